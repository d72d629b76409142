"""The filesystem store: one regular file per zone, found through a zone index (see
schemas/fs.md).

    <root>/zones/<cN>/…/<c1>/.zone    zone c1.….cN: a header line, then every record, sorted
    <root>/zones/.zone                the root zone, if loaded
    <root>/tmp/<id>                   a zone file being written (never read by the driver)

A zone is replaced by writing its whole new file under tmp/ and renaming it over the old one:
a reader has either the old file or the new one open, never a mix, and a reader that opened
(or mapped) the old file keeps reading the old inode.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import dns.name

from base.errors import UserError
from databases.database import DirectoryDatabase
from loaders.berkeley import decode_lines, prepare_zone, record_line
from loaders.loader import DEFAULT_XFR_CLIENTS, Loader
from loaders.writes import StoreWriter, ZoneRewriter
from zonedata.model import ENT_TYPE, Record, Zone, key_to_name, name_key

ZONE_FILE = ".zone"
# First line of every zone file: this tag, then the clients allowed to transfer the zone, each
# after one space. No owner key starts with ';' (BIND escapes it as '\;').
XFR_HEADER = ";xfr"
# The line of an empty non-terminal: the name exists and owns no record.
ENT_LINE = record_line(Record(dns.name.root, 0, ENT_TYPE, ""))

# One label of a key: escapes (\DDD or \c) and any character but an unescaped dot.
_LABEL = re.compile(r"(?:\\(?:[0-9]{3}|.)|[^.\\])+", re.DOTALL)


def key_labels(key: str) -> list[str]:
    """The label texts of a name key, leftmost first ('.' -> none)."""
    return _LABEL.findall(key)


def component(label: str) -> str:
    """A label's path component: its text with '/' written as the escape \\047."""
    return label.replace("/", "\\047")


def zone_dir_path(zone_key: str) -> str:
    """Path, relative to the root, of the index directory that holds zone_key's file."""
    parts = [component(label) for label in reversed(key_labels(zone_key))]
    return "/".join(["zones", *parts])


def zone_file_path(zone_key: str) -> str:
    """Path, relative to the root, of the file whose existence makes zone_key a zone."""
    return f"{zone_dir_path(zone_key)}/{ZONE_FILE}"


def xfr_header(clients: Iterable[str]) -> str:
    return " ".join([XFR_HEADER, *clients])


class FsLoader(Loader[Path]):
    name = "fs"
    database = DirectoryDatabase(name)

    def load(self, zones: Iterable[Zone], target: Path) -> None:
        writer = ZoneWriter(target)
        for zone in zones:
            writer.replace(zone)

    def read_back(self, target: Path) -> Iterator[Zone]:
        index = Path(target) / "zones"
        for dirpath, dirnames, filenames in os.walk(index):
            dirnames.sort()
            if ZONE_FILE in filenames:
                parts = Path(dirpath).relative_to(index).parts
                yield read_zone_file(Path(dirpath) / ZONE_FILE, _name_from_components(parts))

    def dlz_args(self, target: Path, options: Mapping[str, str]) -> dict[str, str]:
        return {"root": str(Path(target).resolve())}

    def writer(self, target: Path) -> StoreWriter:
        """Each change rewrites its zone's file and renames it over the old one."""
        return FsWriter(target)


class FsWriter(ZoneRewriter):
    """The fs store's writes: a zone file is the unit, replaced by rename (a reader has the
    old file or the new one), removed by unlink."""

    def __init__(self, root: Path) -> None:
        self.files = ZoneWriter(root)

    def _path(self, origin: dns.name.Name) -> str:
        return f"{self.files.root}/{zone_file_path(name_key(origin))}"

    def read_zone(self, origin: dns.name.Name) -> Zone | None:
        path = self._path(origin)
        return read_zone_file(Path(path), origin) if os.path.exists(path) else None

    def write_zone(self, zone: Zone) -> None:
        self.files.replace(zone)

    def drop_zone(self, origin: dns.name.Name) -> None:
        os.unlink(self._path(origin))

    def close(self) -> None:
        pass  # nothing held open between writes


class ZoneWriter:
    """Replaces zone files under one root; made once per load (it clears tmp/ leftovers)."""

    def __init__(self, root: Path) -> None:
        self.root = str(Path(root).resolve())
        self.tmp = f"{self.root}/tmp"
        if os.path.isdir(f"{self.root}/gen"):
            raise UserError(f"{self.root} holds the filesystem store's old layout (gen/, a "
                            f"file per name): delete {self.root} and load again")
        os.makedirs(f"{self.root}/zones", exist_ok=True)
        os.makedirs(self.tmp, exist_ok=True)
        _clear_directory(self.tmp)
        # Temporary names: one random prefix per load and a counter, cheaper than a random
        # name per zone and as unique.
        self.prefix = secrets.token_hex(8)
        self.written = 0

    def replace(self, zone: Zone) -> int:
        """Write zone's file and rename it over the old one; the number of records written.

        The zone is read whole before anything is written, so a record iterator that raises
        leaves the old file in place; anything raised later removes the temporary file.
        """
        text, records = zone_file_text(zone)
        index_dir = f"{self.root}/{zone_dir_path(zone.key)}"
        self.written += 1
        tmp = f"{self.tmp}/{self.prefix}.{self.written}"
        try:
            _write_new_file(tmp, text.encode("ascii"))
            _make_dirs(index_dir)
            os.replace(tmp, f"{index_dir}/{ZONE_FILE}")
        except BaseException:
            _remove_if_present(tmp)
            raise
        return records


def zone_file_text(zone: Zone) -> tuple[str, int]:
    """The zone file's whole text and the number of records in it (ENT markers not counted).

    prepare_zone (shared with bdb and bdbhpt) reads the zone whole, checks it and sorts its
    nodes by key, which is the bytewise order of this ASCII text: the order of the driver's
    binary search, each owner's lines together.
    """
    prepared = prepare_zone(zone)
    lines = [xfr_header(DEFAULT_XFR_CLIENTS)]
    for node in prepared.nodes:
        lines += [f"{node.key} {line}" for line in decode_lines(node.value) or [ENT_LINE]]
    lines.append("")
    return "\n".join(lines), prepared.records


def _write_new_file(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _make_dirs(path: str) -> None:
    """mkdir -p, with one syscall when the parent exists (the common case)."""
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(path, exist_ok=True)


def _remove_if_present(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _clear_directory(path: str) -> None:
    """Remove the files a load that was killed or interrupted left in tmp/."""
    for entry in os.scandir(path):
        os.unlink(entry.path)


def _name_from_components(parts: Iterable[str]) -> dns.name.Name:
    """Index components (rightmost label first) back to a zone name; \\047 parses as '/'."""
    text = ".".join(reversed(list(parts)))
    return dns.name.from_text(text) if text else dns.name.root


def read_zone_file(path: Path, origin: dns.name.Name) -> Zone:
    """A zone file back in the model's form; ENT markers dropped (they are not records)."""
    zone = Zone(origin)
    with open(path, encoding="ascii", newline="\n") as lines:
        header = next(lines, "")
        if not header.startswith(XFR_HEADER):
            raise UserError(f"{path}: first line is no '{XFR_HEADER}' header")
        for line in lines:
            owner, rdtype, ttl, rdata = line.rstrip("\n").split(" ", 3)
            if rdtype != ENT_TYPE:
                zone.records.append(Record(key_to_name(owner), int(ttl), rdtype, rdata))
    return zone


LOADER = FsLoader()
