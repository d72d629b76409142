"""Native BIND: named loading the native store's zone files itself, the baseline every driver
is held to.

named.conf includes a zones.conf written zone by zone (one primary zone per file, names checked
by nothing: the data set is awkward), so a million zones (about 200 MB of config) are never
one string in memory.

With a NamedUpdatePolicy, the zones it names take RFC 2136 updates under it: each is served from a
copy of its file in the run directory, its journal beside it, so the store's files stay as the
loader wrote them for every other server.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import dns.name

from base.errors import UserError
from loaders.writes import ADD_ZONE, DELETE_ZONE, Change
from servers import bindversion
from servers.dnsserver import DnsServer
from servers.kind import ServerKind
from servers.named import Named
from servers.update_policy import NamedUpdatePolicy
from zonedata.model import name_key
from zonedata.zonefiles import zone_file_path, zone_files

# Octets written as themselves in a zone name inside named.conf; `.` separates labels.
_PLAIN_OCTETS = frozenset(range(0x21, 0x7F)) - set(b'".;\\()@$')


@dataclass(frozen=True)
class NativeNamed(ServerKind):
    needs_reload: bool = True  # named reads zone files at load time only
    group = "native BIND"
    runs_bind = True
    runs_under_wrapper = True
    told_of_writes = True
    version_key = "bind"
    # Zones that take RFC 2136 updates, and from whom (None: none does).
    updates: NamedUpdatePolicy | None = None

    @classmethod
    def software_version(cls) -> str:
        return bindversion.version_text()

    def takes_updates(self) -> bool:
        return True

    def tell_of_write(self, server: DnsServer, target: Any, change: Change) -> None:
        """rndc: a zone added or removed is a new zones.conf and `rndc reconfig`; a record is
        its zone's file read again (`rndc reload ZONE`)."""
        assert isinstance(server, Named)
        if change.kind in (ADD_ZONE, DELETE_ZONE):
            # zones.conf names every zone file of the store: written again, then reconfig.
            self.body(target, server.run_dir)
            server.rndc("reconfig")
        else:
            server.rndc("reload", change.zone.to_text())

    def body(self, zone_dir: Path, run_dir: Path) -> str:
        """An include of run_dir/zones.conf, which names every zone file of zone_dir (and
        the update keys before it)."""
        run_dir.mkdir(parents=True, exist_ok=True)
        conf = run_dir / "zones.conf"
        with open(conf, "w", encoding="ascii") as out:
            # The store's directory is absolute already, so each file's path is too:
            # resolving a million of them one by one would cost a stat per path component.
            for file in zone_files(Path(zone_dir).resolve()):
                origin = _file_origin(file)
                if self.updates is not None and self.updates.takes(origin):
                    out.write(self._dynamic_zone_block(origin, file, run_dir))
                else:
                    out.write(_zone_block(origin, file))
        keys = self.updates.key_statements() if self.updates else ""
        return keys + f'include "{_quoted(str(conf))}";\n'

    def _dynamic_zone_block(self, origin: dns.name.Name, file: Path, run_dir: Path) -> str:
        """A zone taking updates: a copy of its file, and its journal, in run_dir/dynamic."""
        assert self.updates is not None
        dynamic = run_dir / "dynamic"
        dynamic.mkdir(exist_ok=True)
        copy = dynamic / f"{len(list(dynamic.glob('*.zone')))}.zone"
        shutil.copyfile(file, copy)
        return _zone_block(origin, copy, self.updates.native_zone_options() +
                           f'journal "{_quoted(str(copy))}.jnl"; ')

    def build(self, target: Any, run_dir: Path, *, threads: int, connections: int,
              port: int | None = None) -> Named:
        return Named(run_dir, self.body(target, run_dir), threads=threads, port=port,
                     bind=self.named_bind())


def native_zones(zone_dir: Path) -> Iterator[tuple[dns.name.Name, Path]]:
    """(origin, file) of every zone file the native store wrote under zone_dir, one at a time
    (other servers over the same files: NSD, Knot, PowerDNS's bind backend)."""
    for file in zone_files(Path(zone_dir).resolve()):
        yield _file_origin(file), file


class ZoneControl(Protocol):
    """A running server over the native store's files that adds, removes and reads again one
    zone on command (NSD through nsd-control, Knot through knotc)."""

    def add_zone(self, origin: dns.name.Name, file: Path) -> None: ...

    def remove_zone(self, origin: dns.name.Name) -> None: ...

    def reload_zone(self, origin: dns.name.Name) -> None: ...


def tell_zone_control(server: ZoneControl, zone_dir: Path, change: Change) -> None:
    """A write into the native store's files under zone_dir, told one zone at a time: a zone
    added or removed, or read again from its file."""
    if change.kind == ADD_ZONE:
        server.add_zone(change.zone, zone_file_path(Path(zone_dir).resolve(),
                                                    name_key(change.zone)))
    elif change.kind == DELETE_ZONE:
        server.remove_zone(change.zone)
    else:
        server.reload_zone(change.zone)


# Octets another server's config may hold as themselves in a zone name.
_STRICT_PLAIN = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_*")


def strict_zone_name(name: dns.name.Name) -> str:
    """A zone name for NSD's, Knot's or PowerDNS's config: every octet but letters, digits,
    '-', '_' and '*' written as \\DDD, so that no config syntax (quotes, %, backslashes)
    meets a raw octet and every server's name parser reads the same name."""
    if name == dns.name.root:
        return "."
    return "".join("".join(chr(o) if o in _STRICT_PLAIN else f"\\{o:03d}" for o in label) + "."
                   for label in name.labels if label)


def _zone_block(origin: dns.name.Name, file: Path, options: str = "") -> str:
    return (f'zone "{named_conf_zone_name(origin)}" {{ type primary; '
            f'file "{_quoted(str(file))}"; check-names ignore; '
            f'check-integrity no; {options}}};\n')


def named_conf_zone_name(name: dns.name.Name) -> str:
    """A zone name as the body of a named.conf quoted string.

    BIND's config lexer keeps every backslash of a quoted string except the one before `"`, and
    the string is then parsed as a presentation-format name. Writing `"` and `\\` inside labels
    as decimal escapes (\\034, \\092) keeps both layers unambiguous.
    """
    if name == dns.name.root:
        return "."
    return ".".join(_escape_label(label) for label in name.labels if label) + "."


def _escape_label(label: bytes) -> str:
    out = []
    for octet in label:
        if octet in _PLAIN_OCTETS:
            out.append(chr(octet))
        elif octet in b".;()@$":
            out.append("\\" + chr(octet))
        else:
            out.append(f"\\{octet:03d}")
    return "".join(out)


def _quoted(text: str) -> str:
    return text.replace('"', '\\"')


def _file_origin(file: Path) -> dns.name.Name:
    """The `$ORIGIN` on the first line of a file this store wrote."""
    with open(file, encoding="ascii") as handle:
        first = handle.readline().split()
    if len(first) != 2 or first[0] != "$ORIGIN":
        raise UserError(f"{file}: not written by the native store (no leading $ORIGIN)")
    return dns.name.from_text(first[1])


