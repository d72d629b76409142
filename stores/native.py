"""The `native` store: zone files that BIND loads itself, the baseline every driver is held to.

There is no server: the target is a directory of zone files (one per zone, sharded), and the
named.conf clause includes a file of `zone {}` blocks, one per zone, pointing at its file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dns.name

from base.errors import UserError
from stores.store import LoadStats, Store, Timer
from zonedata.model import Zone
from zonedata.zonefiles import read_zone_dir, write_zone_dir, zone_files

# Octets written as themselves in a zone name inside named.conf; `.` separates labels.
_PLAIN_OCTETS = frozenset(range(0x21, 0x7F)) - set(b'".;\\()@$')


@dataclass(frozen=True)
class NativeTarget:
    zone_dir: Path


class NativeStore(Store):
    name = "native"
    variants = ("native",)

    @contextmanager
    def server(self, run_dir: Path) -> Iterator[NativeTarget]:
        zone_dir = Path(run_dir).resolve() / "zones"
        zone_dir.mkdir(parents=True, exist_ok=True)
        yield NativeTarget(zone_dir)

    def load(self, zones: Iterable[Zone], target: NativeTarget) -> LoadStats:
        """Each zone replaces its file atomically (temp file, rename) via write_zone_dir."""
        stats = LoadStats(self.name)

        def counted(stream: Iterable[Zone]) -> Iterator[Zone]:
            for zone in stream:
                stats.records += len(zone.records)
                yield zone

        with Timer() as timer:
            stats.zones = write_zone_dir(counted(zones), target.zone_dir)
        stats.seconds = timer.seconds
        return stats

    def read_back(self, target: NativeTarget) -> Iterator[Zone]:
        if next(zone_files(target.zone_dir), None) is None:
            return iter(())
        return read_zone_dir(target.zone_dir)

    def update_needs_reload(self, variant: str) -> bool:
        return True  # native BIND reads zone files at load time only

    def dlz_clause(self, variant: str, target: NativeTarget, threads: int,
                   connections: int) -> str:
        """An include of zones.conf: one primary zone per file, names checked by nothing (the
        data set is awkward). The file is written zone by zone, so a million zones (about
        200 MB of config) are never one string in memory."""
        conf = target.zone_dir.parent / "zones.conf"
        with open(conf, "w", encoding="ascii") as out:
            # zone_dir is absolute already, so each file's path is too: resolving a million of
            # them one by one would cost a stat per path component.
            for file in zone_files(target.zone_dir):
                out.write(_zone_block(_file_origin(file), file))
        return f'include "{_quoted(str(conf))}";\n'


def _zone_block(origin: dns.name.Name, file: Path) -> str:
    return (f'zone "{named_conf_zone_name(origin)}" {{ type primary; '
            f'file "{_quoted(str(file))}"; check-names ignore; '
            f'check-integrity no; }};\n')


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


STORE = NativeStore()
