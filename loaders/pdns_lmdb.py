"""The pdns_lmdb store: PowerDNS's LMDB backend database in a directory, written by PowerDNS's
own `pdnsutil`; read by pdns_server's lmdb backend.

PowerDNS has no bulk loader for LMDB, but `pdnsutil b2b-migrate bind lmdb` copies every zone of
a bind backend (zone files and a named.conf of zone statements) in one process; with
`pdnsutil rectify-all-zones` after it, that is two processes for the whole data set where
`load-zone` + `rectify-zone` took two per zone (36 ms a zone: 10 hours for a million). The zone
files are zonedata/zonefiles.py's text, so the data is exactly what the native store writes.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import dns.name
import dns.rdata
import dns.rdataclass

from base.errors import UserError
from base.process import give_to_service_user, run_checked, run_logged, service_user
from databases.database import DirectoryDatabase
from loaders.loader import Loader
from loaders.pdns_rows import pdns_name
from loaders.writes import ADD_ZONE, DELETE_ZONE, Change, StoreWriter
from zonedata.model import Record, Zone, from_rdata
from zonedata.zonefiles import zone_file_text

_CONF = "pdns.conf"
_PLAIN_NAME = re.compile(r"[a-z0-9_.-]+")
# Types PowerDNS's bind backend leaves out when it reads a zone file (its parseZoneFile: "we
# synthesise NSECs on demand"), so b2b-migrate from it would lose a signed zone's denial chain.
_BIND_BACKEND_DROPS = frozenset({"NSEC", "NSEC3", "NSEC3PARAM"})


class PdnsLmdbLoader(Loader[Path]):
    name = "pdns_lmdb"
    no_writes = ("not written yet (its way: pdnsutil "
                 "add-record / replace-rrset / delete-rrset, then rectify-zone)")
    database = DirectoryDatabase(name)

    def pdns_settings(self, target: Path) -> dict[str, str]:
        # The same settings for pdnsutil and the server: the shard count and file name are
        # part of the database's layout.
        return {"launch": "lmdb", "lmdb-filename": str(target / "pdns.lmdb"),
                "lmdb-shards": "4"}

    def load(self, zones: Iterable[Zone], target: Path) -> None:
        if (target / "pdns.lmdb").exists():
            # b2b-migrate refuses a target that holds any zone: zone by zone then.
            for zone in zones:
                self.update(zone, target)
            return
        self._write_conf(target)
        awkward: list[Zone] = []
        with tempfile.TemporaryDirectory(dir=target) as scratch:
            bind_dir = Path(scratch)
            give_to_service_user(bind_dir)  # pdnsutil reads it
            self._write_bind_backend(zones, bind_dir, awkward)
            # A line per zone: to a file (a million zones' worth in memory is the loader's
            # peak RSS growing with the data, 32 -> 75 MiB from 10,000 to 100,000 zones).
            with self._settings(target, self._loading_settings(target, bind_dir)):
                run_logged(self._argv(target, "b2b-migrate", "bind", "lmdb"),
                           f"pdnsutil b2b-migrate ({target})", bind_dir / "b2b.log", cwd=target,
                           user=service_user())
        # Without a rectify an empty non-terminal does not exist (NXDOMAIN) and glue counts as
        # authoritative: the rows the SQL stores write themselves (pdns_rows).
        with self._settings(target, self._loading_settings(target, None)):
            run_checked(self._argv(target, "rectify-all-zones", "quiet"),
                        f"pdnsutil rectify-all-zones ({target})", cwd=target, timeout=None,
                        user=service_user())
        for zone in awkward:
            self.update(zone, target)

    def update(self, zone: Zone, target: Path) -> None:
        """One zone replaced in one LMDB transaction, a server reading beside it."""
        self._write_conf(target)
        with tempfile.TemporaryDirectory(dir=target) as scratch:
            give_to_service_user(Path(scratch))  # pdnsutil reads it
            zone_file = Path(scratch) / "zone"
            zone_file.write_text(zone_file_text(zone), encoding="ascii")
            name = pdns_name(zone.origin)
            self._pdnsutil(target, "load-zone", name, str(zone_file))
        self._pdnsutil(target, "rectify-zone", name)

    def _write_bind_backend(self, zones: Iterable[Zone], bind_dir: Path,
                            awkward: list[Zone]) -> None:
        """Each zone's file, named by its position (a zone name is no file name), and the
        named.conf that lists them for PowerDNS's bind backend; a zone whose name is more than
        letters, digits, `-`, `_` and dots is kept in `awkward` for load-zone, which takes the
        name as an argument rather than inside named.conf's quotes, and so is a zone holding
        a type the bind backend drops (a signed zone's NSEC or NSEC3 chain)."""
        with open(bind_dir / "named.conf", "w", encoding="ascii") as conf:
            for number, zone in enumerate(zones):
                name = pdns_name(zone.origin)
                if not _PLAIN_NAME.fullmatch(name) or any(
                        r.rdtype in _BIND_BACKEND_DROPS for r in zone.records):
                    awkward.append(zone)
                    continue
                zone_file = _zone_file(bind_dir, number)
                zone_file.write_text(zone_file_text(zone), encoding="ascii")
                conf.write(f'zone "{name}" {{ type master; file "{zone_file}"; }};\n')

    def _loading_settings(self, target: Path, bind_dir: Path | None) -> dict[str, str]:
        """The server's settings, plus the bind backend to copy from, and no fsync: LMDB's
        default syncs at every zone's commit (7 ms a zone here, against 0.4 ms without); the
        file is complete when pdnsutil exits, and a crash mid-load is reloaded anyway."""
        settings = {**self.pdns_settings(target), "lmdb-sync-mode": "nosync"}
        if bind_dir is not None:
            settings.update({"launch": "bind,lmdb",
                             "bind-config": str(bind_dir / "named.conf")})
        return settings

    def writer(self, target: Path) -> StoreWriter:
        """pdnsutil, a process per step: the RRset replaced (or deleted) in one LMDB
        transaction, then rectify-zone for the empty non-terminals."""
        return PdnsLmdbWriter(self, target)

    def zone_names(self, target: Path) -> set[dns.name.Name]:
        listed = self._pdnsutil(target, "list-all-zones")
        return {dns.name.root if n == "." else dns.name.from_text(n)
                for n in listed.split()}

    def read_back(self, target: Path) -> Iterator[Zone]:
        if not (target / _CONF).exists():
            return
        listed = self._pdnsutil(target, "list-all-zones")
        for name in sorted(line for line in listed.splitlines() if line.strip()):
            origin = dns.name.root if name == "." else dns.name.from_text(name)
            yield Zone(origin, list(_records(self._pdnsutil(target, "list-zone", name))))

    def as_held(self, zone: Zone) -> Zone:
        """PowerDNS's lmdb backend keys a record by its owner's labels reversed and joined with
        NUL octets, so a label holding a NUL comes back split there (`nul\\000byte` as
        `byte.nul`: verify's pdns-lmdb-nul-label), and it keeps a name inside rdata relative to
        the zone, so the zone's part comes back in the zone's own case."""
        return Zone(zone.origin, [_as_held(r, zone.origin) for r in zone.records])

    def _write_conf(self, target: Path, settings: dict[str, str] | None = None) -> None:
        """pdns.conf of the settings (default: the server's) in target, which is the service
        user's: pdnsutil runs as it, as the server does, and makes the LMDB files there."""
        target.mkdir(parents=True, exist_ok=True)
        give_to_service_user(target)
        settings = self.pdns_settings(target) if settings is None else settings
        (target / _CONF).write_text("".join(f"{key}={value}\n" for key, value
                                            in settings.items()))

    def _pdnsutil(self, target: Path, *args: str) -> str:
        return run_checked(self._argv(target, *args), f"pdnsutil {args[0]} ({target})",
                           cwd=target, user=service_user())

    def _argv(self, target: Path, *args: str) -> list[str]:
        return ["pdnsutil", f"--config-dir={target}", *args]

    @contextmanager
    def _settings(self, target: Path, settings: dict[str, str]) -> Iterator[None]:
        """Other settings than the server's for a bulk command, the server's written back
        after it."""
        self._write_conf(target, settings)
        try:
            yield
        finally:
            self._write_conf(target)


class PdnsLmdbWriter(StoreWriter):
    """A record's change: the zone listed (pdnsutil list-zone), the change made to its RRset
    (replace-rrset with what is left, or delete-rrset), then rectify-zone, so that a new
    empty non-terminal exists (until then it answers NXDOMAIN). A zone is added as the
    loader's update adds one (load-zone, rectify-zone) and deleted with delete-zone."""

    def __init__(self, loader: PdnsLmdbLoader, target: Path) -> None:
        self.loader = loader
        self.target = target

    def close(self) -> None:
        pass  # a process a step: nothing held open

    def _util(self, *args: str) -> str:
        return self.loader._pdnsutil(self.target, *args)

    def apply(self, change: Change) -> None:
        present = change.zone in self.loader.zone_names(self.target)
        name = pdns_name(change.zone)
        if change.kind == ADD_ZONE:
            if present:
                raise UserError(f"zone {change.zone} is already there")
            self.loader.update(Zone(change.zone, list(change.zone_records)), self.target)
            return
        if not present:
            raise UserError(f"zone {change.zone} is not there")
        if change.kind == DELETE_ZONE:
            self._util("delete-zone", name)
            return
        held = Zone(change.zone, list(_records(self._util("list-zone", name))))
        after = change.applied_to(held)
        assert after is not None and change.record is not None
        owner, rdtype = change.record.owner, change.record.rdtype
        rrset = [r for r in after.records if r.owner == owner and r.rdtype == rdtype]
        relative = "@" if owner == change.zone else owner.relativize(change.zone).to_text()
        if rrset:
            self._util("replace-rrset", name, relative, rdtype, str(rrset[0].ttl),
                       *(r.rdata for r in rrset))
        else:
            self._util("delete-rrset", name, relative, rdtype)
        self._util("rectify-zone", name)


def _zone_file(bind_dir: Path, number: int) -> Path:
    """A thousand zone files a directory: removing the scratch directory lists one directory
    at a time, and a listing of a million names would be the loader's peak memory."""
    directory = bind_dir / str(number // 1000)
    directory.mkdir(exist_ok=True)  # its first zone may have gone to load-zone instead
    return directory / f"{number}.zone"


def _absolute_rdata(rdtype: str, text: str) -> dns.rdata.Rdata:
    """Presentation text parsed against the root: every name in it is absolute."""
    return dns.rdata.from_text(dns.rdataclass.IN, rdtype, text, origin=dns.name.root,
                               relativize=False)


def _split_at_nul(name: dns.name.Name) -> dns.name.Name:
    labels: list[bytes] = []
    for label in name.labels:
        labels.extend(reversed(label.split(b"\0")))
    return dns.name.Name(labels)


def _in_zone_case(name: dns.name.Name, origin: dns.name.Name) -> dns.name.Name:
    if not name.is_subdomain(origin):
        return name
    return name.relativize(origin).derelativize(origin)


def _as_held(record: Record, origin: dns.name.Name) -> Record:
    rdata = _absolute_rdata(record.rdtype, record.rdata)
    names = {slot: _in_zone_case(value, origin) for slot in rdata.__slots__
             if isinstance(value := getattr(rdata, slot), dns.name.Name)}
    if names:
        rdata = rdata.replace(**names)
    return from_rdata(_split_at_nul(record.owner), record.ttl, rdata)


# Types whose presentation has quoted character-strings: a `"` there is quoting.
_QUOTED_STRING_TYPES = frozenset({"TXT", "SPF", "HINFO", "NAPTR", "CAA"})


# Octets pdnsutil prints unescaped inside a name (DNSName escapes only `.`, `\\` and octets
# outside 0x21-0x7e) that a zone file's presentation reads as syntax: a quoted string, a
# multi-line group, a comment. A signed zone's NSEC next names carry them from the owners.
_PRESENTATION_SYNTAX = str.maketrans({c: "\\" + c for c in '"();'})


def _escape_syntax(content: str) -> str:
    """Content of a type without character-strings, its names' syntax octets escaped."""
    return content.translate(_PRESENTATION_SYNTAX)


def _records(listing: str) -> Iterator[Record]:
    """`pdnsutil list-zone` lines (owner, TTL, class, type, content, tab-separated) as model
    records; names in it are absolute, some without the final dot (the SOA's), so the
    content is parsed against the root."""
    for line in listing.splitlines():
        fields = line.split("\t")
        if len(fields) != 5 or fields[2] != "IN":
            continue  # "$ORIGIN ." and the like
        owner, ttl, _, rdtype, content = fields
        if rdtype not in _QUOTED_STRING_TYPES:
            content = _escape_syntax(content)
        yield from_rdata(dns.name.from_text(owner), int(ttl), _absolute_rdata(rdtype, content))


LOADER = PdnsLmdbLoader()
