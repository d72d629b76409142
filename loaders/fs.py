"""The filesystem store: a directory tree, one subtree per zone (see schemas/filesystem.md).

    <root>/zones/<labels reversed>/.zone -> ../../gen/<xx>/<id>   zone index: a symlink per zone
    <root>/gen/<xx>/<id>/                                      one zone generation
        .rr  .acl  .axfr  <label>.rr  <label>/<label>.rr ...
    <root>/tmp/<id>/                                           a generation being built
    <root>/retired/<id>                                        replaced generations, purged later

A zone is replaced by building a new generation and renaming a new `.zone` symlink over the old
one, so a reader resolves the old or the new subtree, never a mix.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import dns.name

from bench.servers.process import REPO_ROOT
from loaders.bdbcommon import (
    ACL_VALUE,
    PreparedZone,
    decode_records,
    prepare_zone,
)
from loaders.model import Zone
from loaders.store import DirectoryStore, LoadStats, Timer

# A replaced generation stays readable this long, for lookups that resolved the old `.zone`
# symlink just before the swap; load() and update() purge older ones.
RETIRE_GRACE_SECONDS = 10.0

RR_SUFFIX = ".rr"
ZONE_LINK = ".zone"
ACL_FILE = ".acl"
AXFR_FILE = ".axfr"

# One label of a key: escapes (\DDD or \c) and any character but an unescaped dot.
_LABEL = re.compile(r"(?:\\(?:[0-9]{3}|.)|[^.\\])+", re.DOTALL)


def key_labels(key: str) -> list[str]:
    """The label texts of a name key, leftmost first ('.' -> none)."""
    return _LABEL.findall(key)


def component(label: str) -> str:
    """A label's path component: its text with '/' written as the escape \\047."""
    return label.replace("/", "\\047")


def relative_components(zone_key: str, owner_key: str) -> list[str]:
    """Components of an owner below its zone, closest to the apex first."""
    zone_labels = key_labels(zone_key)
    owner_labels = key_labels(owner_key)
    below = owner_labels[: len(owner_labels) - len(zone_labels)]
    return [component(label) for label in reversed(below)]


def zone_link_path(zone_key: str) -> str:
    """Path, relative to the root, of the symlink that makes zone_key a zone."""
    parts = [component(label) for label in reversed(key_labels(zone_key))]
    return "/".join(["zones", *parts, ZONE_LINK])


def node_file(components: list[str]) -> str:
    """Path of a node's record file relative to its zone directory ('.rr' at the apex)."""
    if not components:
        return RR_SUFFIX
    return "/".join([*components[:-1], components[-1] + RR_SUFFIX])


class FsStore(DirectoryStore):
    name = "fs"
    variants = ("fs",)

    def load(self, zones: Iterable[Zone], target: Path) -> LoadStats:
        stats = LoadStats(self.name)
        with Timer() as timer:
            _make_root(target)
            _purge_retired(target)
            for zone in zones:
                prepared = prepare_zone(zone)
                _replace_zone(target, prepared)
                stats.zones += 1
                stats.records += prepared.records
        stats.seconds = timer.seconds
        return stats

    def read_back(self, target: Path) -> Iterator[Zone]:
        index = target / "zones"
        for dirpath, dirnames, _files in os.walk(index):
            # `.zone` is a symlink to a directory: os.walk lists it but never enters it.
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            if os.path.islink(os.path.join(dirpath, ZONE_LINK)):
                parts = Path(dirpath).relative_to(index).parts
                yield _read_zone(Path(dirpath) / ZONE_LINK, _name_from_components(parts))

    def driver_file(self, variant: str) -> Path:
        return REPO_ROOT / "drivers" / "filesystem" / "dlz_filesystem.so"

    def dlz_clause(self, variant: str, target: Path, threads: int, connections: int) -> str:
        so = self.driver_file(variant)
        return (f'dlz "{variant}" {{ database "dlopen {so} connections={connections} '
                f'root={Path(target).resolve()}"; }};')


def _make_root(root: Path) -> None:
    for sub in ("zones", "gen", "tmp", "retired"):
        (root / sub).mkdir(parents=True, exist_ok=True)


def _generation_path(root: Path, gen_id: str) -> Path:
    return root / "gen" / gen_id[:2] / gen_id


def _replace_zone(root: Path, zone: PreparedZone) -> None:
    gen_id = secrets.token_hex(8)
    build = root / "tmp" / gen_id
    final = _generation_path(root, gen_id)
    try:
        _write_generation(build, zone)
        final.parent.mkdir(exist_ok=True)
        os.rename(build, final)
        old_id = _swap_zone_link(root, zone.key, gen_id)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        shutil.rmtree(final, ignore_errors=True)
        raise
    if old_id:
        (root / "retired" / old_id).touch()


def _write_generation(directory: Path, zone: PreparedZone) -> None:
    directory.mkdir()
    # Sorted by components, every parent directory is made before the nodes below it.
    nodes = sorted(zone.nodes, key=lambda n: relative_components(zone.key, n.key))
    with open(directory / AXFR_FILE, "wb") as axfr:
        for node in nodes:
            parts = relative_components(zone.key, node.key)
            if len(parts) > 1:
                (directory / "/".join(parts[:-1])).mkdir(exist_ok=True)
            (directory / node_file(parts)).write_bytes(node.value)
            for line in node.value.decode("ascii").splitlines():
                axfr.write(f"{node.key} {line}\n".encode("ascii"))
    (directory / ACL_FILE).write_bytes(ACL_VALUE)


def _swap_zone_link(root: Path, zone_key: str, gen_id: str) -> str | None:
    """Point the zone's index symlink at generation gen_id; return the replaced generation."""
    link = root / zone_link_path(zone_key)
    link.parent.mkdir(parents=True, exist_ok=True)
    depth = len(Path(zone_link_path(zone_key)).parts) - 1
    target = "/".join([".."] * depth + ["gen", gen_id[:2], gen_id])
    old_id = os.path.basename(os.readlink(link)) if os.path.islink(link) else None
    fresh = link.with_name(f"{ZONE_LINK}.{gen_id}")
    os.symlink(target, fresh)
    os.replace(fresh, link)
    return old_id


def _purge_retired(root: Path) -> None:
    now = time.time()
    for marker in (root / "retired").iterdir():
        if now - marker.stat().st_mtime >= RETIRE_GRACE_SECONDS:
            shutil.rmtree(_generation_path(root, marker.name), ignore_errors=True)
            marker.unlink()


def _name_from_components(parts: Iterable[str], origin: dns.name.Name = dns.name.root
                          ) -> dns.name.Name:
    """Components (closest to the apex first) back to a name; \\047 parses as '/'."""
    text = ".".join(reversed(list(parts)))
    if not text:
        return origin
    if text == "@":
        # A lone '@' would parse as the origin itself; here it is a label spelled '@'.
        return dns.name.Name([b"@"]).concatenate(origin)
    return dns.name.from_text(text, origin=origin)


def _read_zone(zone_dir: Path, origin: dns.name.Name) -> Zone:
    zone = Zone(origin)
    for dirpath, dirnames, filenames in os.walk(zone_dir):
        dirnames.sort()
        parts = Path(dirpath).relative_to(zone_dir).parts
        for filename in sorted(filenames):
            if not filename.endswith(RR_SUFFIX):
                continue
            label = filename[: -len(RR_SUFFIX)]
            owner = _name_from_components([*parts, label] if label else parts, origin)
            zone.records.extend(decode_records(owner, (Path(dirpath) / filename).read_bytes()))
    return zone


def axfr_lines(root: Path, zone_key: str) -> list[str]:
    """The zone's transfer file as the driver's allnodes reads it: '<owner> <record line>'."""
    return (root / zone_link_path(zone_key) / AXFR_FILE).read_text("ascii").splitlines()

STORE = FsStore()
