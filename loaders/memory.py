"""The `memory` store: one tab-separated data file that the memory DLZ driver reads into hash
tables when named starts (format: schemas/memory.md).

No server: the target is a directory holding the file. Loading rewrites the whole file
through a temporary file and a rename, so a reader sees the old data set or the new one;
zones of the old file that the load does not name are carried over.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from base.errors import UserError
from databases.database import DirectoryDatabase
from loaders.loader import DEFAULT_XFR_CLIENTS, Loader
from zonedata.model import ENT_TYPE, Record, Zone, empty_nonterminals, key_to_name, name_key

DATA_FILE = "zones.tsv"
MAGIC = "#dlzbench-memory 1"
# The driver's switches that make it fail on demand (drivers/memory: a store that is down, a
# write it refuses), passed on when a server's options name them (tests).
DRIVER_SWITCHES = ("outage_file", "refuse_file")


def data_file(target: Path) -> Path:
    return Path(target) / DATA_FILE


def _field(text: str, what: str) -> str:
    """A field as written: tabs and line breaks would split it, so they are refused."""
    if any(c in text for c in "\t\n\r"):
        raise UserError(f"memory store: {what} {text!r} contains a tab or line break")
    return text


def _rdata_field(text: str) -> str:
    # rdata is the last field, so a tab in it would be harmless; a line break never is.
    if "\n" in text or "\r" in text:
        raise UserError(f"memory store: rdata {text!r} contains a line break")
    return text


def _zone_lines(zone: Zone) -> Iterator[str]:
    """The zone's block: Z, its transfer ACL, its records, its empty non-terminal markers."""
    key = _field(zone.key, "zone name")
    yield f"Z\t{key}\n"
    for client in DEFAULT_XFR_CLIENTS:
        yield f"X\t{key}\t{client}\n"
    for r in zone.records:
        owner = _field(name_key(r.owner), "owner name")
        yield f"R\t{key}\t{owner}\t{r.ttl}\t{_field(r.rdtype, 'type')}\t{_rdata_field(r.rdata)}\n"
    for ent in empty_nonterminals(zone):
        yield f"R\t{key}\t{_field(name_key(ent), 'owner name')}\t0\t{ENT_TYPE}\t\n"


def _zone_of_line(line: str) -> str | None:
    """The zone key a data line belongs to (its second field); None for comments."""
    if line.startswith("#"):
        return None
    parts = line.split("\t", 2)
    if len(parts) < 2:
        raise UserError(f"memory store: malformed line {line.rstrip()!r}")
    return parts[1].rstrip("\n")


def _write_new_zones(zones: Iterable[Zone], out: IO[str]) -> set[str]:
    loaded: set[str] = set()
    for zone in zones:
        if zone.key in loaded:
            raise UserError(f"memory store: zone {zone.key} appears twice in one load")
        loaded.add(zone.key)
        out.writelines(_zone_lines(zone))
    return loaded


def _copy_other_zones(path: Path, loaded: set[str], out: IO[str]) -> None:
    if not path.exists():
        return
    with open(path, encoding="utf-8") as old:
        for line in old:
            zone = _zone_of_line(line)
            if zone is not None and zone not in loaded:
                out.write(line)


def _parse_records(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(kind, fields) of every data line, checking the magic line first."""
    with open(path, encoding="utf-8") as f:
        if f.readline().rstrip("\n") != MAGIC:
            raise UserError(f"{path} is not a dlzbench memory store file")
        for number, line in enumerate(f, start=2):
            if line.startswith("#") or line == "\n":
                continue
            fields = line.rstrip("\n").split("\t", 5)
            if fields[0] not in ("Z", "X", "R") or len(fields) < 2:
                raise UserError(f"{path}:{number}: malformed line")
            yield fields[0], fields


class MemoryLoader(Loader[Path]):
    name = "memory"
    no_writes = ("named reads its file once, at start "
                 "(dlz_create): its data is named's own memory, n/a")
    database = DirectoryDatabase(name)
    read_at_start = True  # at dlz_create, into named's memory

    def load(self, zones: Iterable[Zone], target: Path) -> None:
        path = data_file(target)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as out:
                out.write(MAGIC + "\n")
                loaded = _write_new_zones(zones, out)
                _copy_other_zones(path, loaded, out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    def read_back(self, target: Path) -> Iterator[Zone]:
        path = data_file(target)
        if not path.exists():
            return
        zones: dict[str, Zone] = {}
        for kind, fields in _parse_records(path):
            if kind == "Z":
                zones.setdefault(fields[1], Zone(key_to_name(fields[1])))
            elif kind == "R" and fields[4] != ENT_TYPE:
                zone_key, owner, ttl, rdtype, rdata = fields[1:6]
                if zone_key not in zones:
                    raise UserError(f"{path}: record of zone {zone_key} before its Z line")
                zones[zone_key].records.append(
                    Record(key_to_name(owner), int(ttl), rdtype, rdata))
        yield from zones.values()

    def dlz_args(self, target: Path, options: Mapping[str, str]) -> dict[str, str]:
        return {"file": str(data_file(target)),
                **{key: options[key] for key in DRIVER_SWITCHES if key in options}}

    def dlz_write_access(self, target: Path, options: Mapping[str, str], zones: Sequence[str]
                         ) -> tuple[dict[str, str], dict[str, str]]:
        """The driver keeps updates in named's memory (schemas/memory.md): it reads the file
        as always and writes nothing to it, so there is no account to limit to the zones."""
        return self.dlz_args(target, options), {}


LOADER = MemoryLoader()
