"""The fs, bdb and bdbhpt layouts, checked the way their C drivers will read them.

Beyond the generic round trip of tests/test_stores.py: the filesystem path encoding against a
pure-Python reference of the driver's path computation (hostile keys stay inside the root), the
Berkeley DB access methods as DB_UNKNOWN detects them, each bdbhpt mode opened as its driver
opens it (a reader process sees a loader update in the shared modes), a hand-built awkward zone
set, atomic replacement (a reader of the old fs zone file keeps reading it; an interrupted load
leaves the old zone), and the purge of replaced bdbhpt generations.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import random
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.name
import pytest
from berkeleydb import db

from base.errors import UserError
from bench.measure.loading import timed_load
from loaders import bdb, bdbhpt, fs
from loaders.berkeley import prepare_zone
from loaders.loader import DEFAULT_XFR_CLIENTS, Loader, interrupts_deferred
from servers import SERVERS, get_server
from servers.dlz import DlzNamed
from tests.failing import FailsHalfWay
from zonedata.generator import coverage_zones
from zonedata.model import (
    Record,
    Zone,
    canonical_set,
    empty_nonterminals,
    make_record,
    name_key,
)

STORES: dict[str, Loader] = {"fs": fs.LOADER, "bdb": bdb.LOADER, "bdbhpt": bdbhpt.LOADER}

# --- a reference of the filesystem driver's path computation --------------------------------
# Written the way the C driver walks the key text BIND hands over: one character at a time,
# rejecting (None) whatever BIND's dns_name_totext never produces.

NAME_MAX = 255
PATH_MAX = 4096
MAX_KEY = 1024
COMP_MAX = 252  # 63 octets, each at most 4 characters


def ref_labels(text: str) -> list[str] | None:
    """Label texts of a key, leftmost first, or None when the driver must answer NOTFOUND."""
    if text == ".":
        return []
    if not text or len(text) > MAX_KEY:
        return None
    labels: list[str] = []
    label = ""
    i = 0
    while i < len(text):
        c = text[i]
        if not "!" <= c <= "~":  # BIND writes every byte outside 0x21..0x7e as \DDD
            return None
        if c == "\\":
            if text[i + 1:i + 4].isdigit() and len(text[i + 1:i + 4]) == 3:
                label += text[i:i + 4]
                i += 4
                continue
            if i + 1 >= len(text) or not "!" <= text[i + 1] <= "~":
                return None
            label += text[i:i + 2]
            i += 2
            continue
        if c == ".":
            if not label:
                return None  # empty label: '..', a leading or trailing dot
            labels.append(label)
            label = ""
        else:
            label += c
        i += 1
    if not label:
        return None
    labels.append(label)
    return labels


def ref_component(label: str) -> str | None:
    out = "".join("\\047" if c == "/" else c for c in label)
    return out if len(out) <= COMP_MAX else None


def ref_components(text: str) -> list[str] | None:
    """Path components of a key, rightmost label first (the tree's order)."""
    labels = ref_labels(text)
    if labels is None:
        return None
    parts = [ref_component(label) for label in reversed(labels)]
    return None if None in parts else parts  # type: ignore[return-value]


def ref_zone_file(zone: str) -> str | None:
    """findzonedb(zone): the path whose existence says zone is a zone."""
    parts = ref_components(zone)
    if parts is None:
        return None
    path = "/".join(["zones", *parts, ".zone"])
    return path if len(path) < PATH_MAX else None


def ref_owner_lines(lines: list[str], key: str) -> list[str]:
    """The driver's lookup of owner key in a zone file's sorted record lines: a binary search
    on the owner field (Python's str order is the driver's bytewise, shorter-first order)."""
    start = bisect.bisect_left(lines, key, key=lambda line: line.split(" ", 1)[0])
    end = start
    while end < len(lines) and lines[end].split(" ", 1)[0] == key:
        end += 1
    return lines[start:end]


HOSTILE_KEYS = [
    "..", "\\.\\.", "/", "../../etc", "..\\/..\\/etc", "a/../../b", "\\000", "\x00", "a\x00b",
    ".", "", "a..b", ".a", "a.", "\\", "a\\", "a b", "\\047", "\\/", "@", "$", "*", ".rr",
    ".zone", "a.rr", "\\.rr", "-" * 63, "x" * 64, "\\255" * 63,
    ".".join(["a" * 63] * 4), ".".join(["\\000" * 63] * 4), ".".join(["/" * 63] * 4),
    ".".join(["a"] * 127), ".".join(["a"] * 200), "a" * 5000, "é", "\t", "\n",
]


def _inside(root: Path, relpath: str) -> bool:
    parts = relpath.split("/")
    if any(p in ("", ".", "..") or "\x00" in p or len(p) > NAME_MAX for p in parts):
        return False
    resolved = os.path.normpath(os.path.join(root, relpath))
    return resolved.startswith(str(root) + os.sep)


@pytest.mark.check
@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_hostile_keys_never_leave_the_root(key: str, tmp_path: Path) -> None:
    for path in (ref_zone_file(key), ref_zone_file(f"{key}.example.com"),
                 ref_zone_file(f"www.{key}")):
        assert path is None or _inside(tmp_path, path), path


@pytest.mark.check
def test_longest_labels_fit_a_component() -> None:
    for label in ("\\000" * 63, "/" * 63, "\\." * 63):
        parts = ref_components(label)
        assert parts is not None and len(parts[0]) <= COMP_MAX <= NAME_MAX


def _random_label(rng: random.Random) -> bytes:
    alphabet = b"/.\\@$ \x00\"'();*-az09\xff"
    return bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 63)))


@pytest.mark.check
def test_reference_matches_loader_on_random_names() -> None:
    rng = random.Random(7)
    zone = dns.name.from_text("z.test.")
    for _ in range(2000):
        name = dns.name.Name([_random_label(rng) for _ in range(rng.randint(1, 3))]
                             + list(zone.labels))
        key = name_key(name)
        assert ref_zone_file(key) == fs.zone_file_path(key)


# --- a hand-built awkward zone set ----------------------------------------------------------

PARENT = dns.name.from_text("parent.test.")
CHILD = dns.name.from_text("kid.parent.test.")


def _n(origin: dns.name.Name, *labels: bytes) -> dns.name.Name:
    return dns.name.Name([*labels, *origin.labels])


def awkward_zones() -> list[Zone]:
    """Parent and child sharing the cut, hostile labels, long names, ENT chains, odd rdata."""
    soa = "ns.parent.test. hostmaster.parent.test. 1 3600 900 604800 300"
    long_name = _n(PARENT, *([b"\x00" * 63] * 3), b"/" * 47)  # 253 octets, the limit is 255
    parent = [
        make_record(PARENT, 3600, "SOA", soa),
        make_record(PARENT, 3600, "NS", "ns.parent.test."),
        make_record(_n(PARENT, b"ns"), 300, "A", "192.0.2.1"),
        make_record(CHILD, 3600, "NS", "ns.kid.parent.test."),
        make_record(_n(CHILD, b"ns"), 3600, "A", "192.0.2.2"),
        make_record(_n(PARENT, b"*"), 60, "TXT", '"wild \\"one\\" \\\\ ; x"'),
        make_record(_n(PARENT, b"leaf", b"ent2", b"ent1"), 60, "A", "192.0.2.3"),
        make_record(_n(PARENT, b".."), 60, "A", "192.0.2.4"),
        make_record(_n(PARENT, b"../../etc"), 60, "A", "192.0.2.5"),
        make_record(_n(PARENT, b"/", b"."), 60, "A", "192.0.2.6"),
        make_record(_n(PARENT, b"\x00"), 60, "TXT", '"nul\\000byte" "\\255"'),
        make_record(_n(PARENT, b".rr"), 60, "A", "192.0.2.7"),
        make_record(_n(PARENT, b".zone"), 60, "A", "192.0.2.8"),
        make_record(_n(PARENT, b"@"), 60, "A", "192.0.2.9"),
        make_record(_n(PARENT, b"a" * 63), 60, "AAAA", "2001:db8::1"),
        make_record(long_name, 60, "A", "192.0.2.10"),
        make_record(_n(PARENT, b"apl"), 60, "APL", ""),
        make_record(_n(PARENT, b"Mixed", b"CASE"), 60, "A", "192.0.2.11"),
    ]
    child = [
        make_record(CHILD, 7200, "SOA", soa.replace(" 1 ", " 7 ")),
        make_record(CHILD, 7200, "NS", "ns.kid.parent.test."),
        make_record(_n(CHILD, b"ns"), 7200, "A", "192.0.2.2"),
        make_record(_n(CHILD, b"www"), 7200, "CNAME", "parent.test."),
    ]
    root = [make_record(dns.name.root, 86400, "SOA",
                        "a.root.test. nstld.test. 1 1800 900 604800 86400"),
            make_record(dns.name.root, 86400, "NS", "a.root.test.")]
    return [Zone(PARENT, parent), Zone(CHILD, child), Zone(dns.name.root, root)]


DATA_SETS = {"awkward": awkward_zones, "coverage": coverage_zones}


@pytest.fixture(params=list(STORES))
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Loader, Any]]:
    store = STORES[request.param]
    with store.database.server(tmp_path) as target:
        yield store, target


@pytest.mark.check
@pytest.mark.parametrize("data", list(DATA_SETS))
def test_round_trip(store_target: tuple[Loader, Any], data: str) -> None:
    store, target = store_target
    zones = DATA_SETS[data]()
    stats = timed_load(store, zones, target)
    assert (stats.zones, stats.records) == (len(zones), sum(len(z.records) for z in zones))
    assert canonical_set(store.read_back(target)) == canonical_set(zones)


@pytest.mark.check
def test_failed_replace_keeps_old_zone(store_target: tuple[Loader, Any]) -> None:
    store, target = store_target
    zones = awkward_zones()
    store.load(zones, target)
    changed = dataclasses.replace(zones[0], records=FailsHalfWay(zones[0].records[:6]))
    with pytest.raises(RuntimeError, match="half-way"):
        store.load([zones[1], changed], target)
    assert canonical_set(store.read_back(target)) == canonical_set(zones)


@pytest.mark.check
def test_replace_is_whole(store_target: tuple[Loader, Any]) -> None:
    store, target = store_target
    zones = awkward_zones()
    store.load(zones, target)
    smaller = Zone(PARENT, zones[0].records[:3])
    store.update(smaller, target)
    back = {z.key: z for z in store.read_back(target)}
    assert back["parent.test"].canonical() == smaller.canonical()
    assert back["kid.parent.test"].canonical() == zones[1].canonical()


# --- filesystem layout ----------------------------------------------------------------------

def _expected_lines(zone: Zone) -> list[str]:
    """The zone file's record lines: absolute owner keys, ENT markers, sorted."""
    ents = [f"{name_key(e)} ENT 0 " for e in empty_nonterminals(zone)]
    return sorted([*ents, *(f"{name_key(r.owner)} {r.rdtype} {r.ttl} {r.rdata}"
                            for r in zone.records)])


def _zone_file(root: Path, zone_key: str) -> Path:
    path = ref_zone_file(zone_key)
    assert path is not None, zone_key
    return root / path


def _record_lines(root: Path, zone_key: str) -> list[str]:
    """The zone file's lines after the header, checked to be exactly ASCII lines."""
    data = _zone_file(root, zone_key).read_bytes()
    assert data.endswith(b"\n") and data.isascii()
    return data.decode("ascii").split("\n")[1:-1]


@pytest.mark.check
@pytest.mark.parametrize("data", list(DATA_SETS))
def test_fs_zone_file_holds_every_record_sorted(tmp_path: Path, data: str) -> None:
    zones = DATA_SETS[data]()
    fs.LOADER.load(zones, tmp_path)
    for zone in zones:
        path = _zone_file(tmp_path, zone.key)
        assert path.is_file() and not path.is_symlink()
        header = path.read_text("ascii").split("\n", 1)[0]
        assert header == " ".join([";xfr", *DEFAULT_XFR_CLIENTS])
        lines = _record_lines(tmp_path, zone.key)
        assert lines == _expected_lines(zone)
        # Every owner found by the driver's binary search, with all of its lines.
        for owner in {line.split(" ", 1)[0] for line in lines}:
            assert ref_owner_lines(lines, owner) == [
                line for line in lines if line.split(" ", 1)[0] == owner]


@pytest.mark.check
def test_fs_tree_holds_only_index_directories_and_zone_files(tmp_path: Path) -> None:
    zones = awkward_zones()
    fs.LOADER.load(zones, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp", "zones"]
    files = [p for p in (tmp_path / "zones").rglob("*") if not p.is_dir()]
    assert sorted(str(p.relative_to(tmp_path)) for p in files) == sorted(
        fs.zone_file_path(z.key) for z in zones)
    assert not any(p.is_symlink() for p in (tmp_path / "zones").rglob("*"))


@pytest.mark.check
def test_fs_child_zone_is_not_an_ent_of_parent(tmp_path: Path) -> None:
    fs.LOADER.load(awkward_zones(), tmp_path)
    # The delegation point holds the parent's NS and glue, the child's apex holds its SOA.
    parent = _record_lines(tmp_path, "parent.test")
    child = _record_lines(tmp_path, "kid.parent.test")
    assert [line.split(" ")[1] for line in ref_owner_lines(parent, "kid.parent.test")] == ["NS"]
    assert ref_owner_lines(parent, "ns.kid.parent.test")
    assert "SOA" in [line.split(" ")[1] for line in ref_owner_lines(child, "kid.parent.test")]
    assert not ref_owner_lines(parent, "www.kid.parent.test")


@pytest.mark.check
def test_fs_reader_of_the_old_file_keeps_reading_it(tmp_path: Path) -> None:
    zones = awkward_zones()
    fs.LOADER.load(zones, tmp_path)
    path = _zone_file(tmp_path, "parent.test")
    smaller = Zone(PARENT, zones[0].records[:3])
    with open(path, "rb") as old:
        fs.LOADER.update(smaller, tmp_path)
        old_lines = old.read().decode("ascii").split("\n")[1:-1]
    assert old_lines == _expected_lines(zones[0])
    assert _record_lines(tmp_path, "parent.test") == _expected_lines(smaller)
    assert not list((tmp_path / "tmp").iterdir())


class _Interrupt(KeyboardInterrupt):
    """Ctrl-C at the one step of a replace that a failing record iterator does not reach."""


@pytest.mark.check
def test_fs_load_interrupted_while_writing_leaves_the_old_zone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    zones = awkward_zones()
    fs.LOADER.load(zones, tmp_path)
    before = {z.key: _zone_file(tmp_path, z.key).read_bytes() for z in zones}
    new_zone = Zone(dns.name.from_text("new.test."), zones[1].records[:0])

    def interrupted(src: str, dst: str) -> None:
        raise _Interrupt

    monkeypatch.setattr(fs.os, "replace", interrupted)
    for zone in (Zone(PARENT, zones[0].records[:3]), new_zone):
        with pytest.raises(_Interrupt):
            fs.LOADER.load([zone], tmp_path)
    monkeypatch.undo()
    assert {z.key: _zone_file(tmp_path, z.key).read_bytes() for z in zones} == before
    assert not _zone_file(tmp_path, "new.test").exists()
    assert not list((tmp_path / "tmp").iterdir())


@pytest.mark.check
def test_fs_load_clears_leftovers_of_a_killed_load(tmp_path: Path) -> None:
    fs.LOADER.load(awkward_zones(), tmp_path)
    (tmp_path / "tmp" / "left-by-kill-9").write_text("half a zone")
    fs.LOADER.load([awkward_zones()[1]], tmp_path)
    assert not list((tmp_path / "tmp").iterdir())


@pytest.mark.check
def test_fs_refuses_a_root_in_the_old_layout(tmp_path: Path) -> None:
    (tmp_path / "gen").mkdir()
    with pytest.raises(UserError, match="old layout"):
        fs.LOADER.load(awkward_zones(), tmp_path)


@pytest.mark.check
def test_fs_bad_rdata_is_a_user_error(tmp_path: Path) -> None:
    bad = Record(PARENT, 60, "TXT", "\"two\nlines\"")
    with pytest.raises(UserError, match="line break"):
        fs.LOADER.load([Zone(PARENT, [bad])], tmp_path)
    assert not _zone_file(tmp_path, "parent.test").exists()


# --- Berkeley DB ----------------------------------------------------------------------------

@pytest.mark.check
def test_bdb_access_method_is_detectable(tmp_path: Path) -> None:
    bdb.LOADER.load(awkward_zones(), tmp_path)
    for access, method in bdb.ACCESS_METHODS.items():
        handle = db.DB()
        handle.open(str(tmp_path / bdb.FILES[access]), None, db.DB_UNKNOWN,
                    db.DB_RDONLY)
        try:
            assert handle.get_type() == method
            assert handle.get(b"Z parent.test") == b""
            assert handle.get(b"Z kid.parent.test") == b""
            assert handle.get(b"Z www.parent.test") is None
            assert handle.get(b"D parent.test ent1.parent.test") == b""  # ENT marker
            assert handle.get(b"D parent.test ns.parent.test") == b"A 300 192.0.2.1\n"
            assert handle.get(b"A parent.test") == b"127.0.0.1\n::1\n"
            assert (handle.get(b"X parent.test") is not None) == (method == db.DB_HASH)
        finally:
            handle.close()


@pytest.mark.check
def test_bdb_clause_names_the_driver_file(tmp_path: Path) -> None:
    server = get_server("bdb-hash")
    assert isinstance(server, DlzNamed)
    clause = server.body(tmp_path, 3)
    assert clause.startswith(f'dlz "bdb-hash" {{\n\tdatabase "dlopen {server.library_file} ')
    assert f"connections=3 file={tmp_path.resolve()}/hash.db" in clause


@pytest.mark.check
def test_which_drivers_see_updates_only_after_reload() -> None:
    needs = {s.name: s.needs_reload for s in SERVERS if s.store in STORES}
    assert needs == {"fs": False, "bdb-btree": True, "bdb-hash": True, "bdbhpt-t": False,
                     "bdbhpt-c": False, "bdbhpt-p": True}


# --- BDBHPT ---------------------------------------------------------------------------------

_READER = textwrap.dedent("""
    import sys, time
    from berkeleydb import db
    from loaders.bdbhpt import ENV_FLAGS
    home, mode, zone = sys.argv[1:]
    env = db.DBEnv()
    env.open(home, ENV_FLAGS[mode])
    zones = db.DB(env)
    zones.open("dns.db", "dns_zone", db.DB_UNKNOWN, db.DB_RDONLY | db.DB_THREAD)
    data = db.DB(env)
    data.open("dns.db", "dns_data", db.DB_UNKNOWN, db.DB_RDONLY | db.DB_THREAD)
    def apex():
        gen = zones.get(zone.encode())
        return data.get(gen + b" " + zone.encode())
    first = apex()
    print("ready", flush=True)
    deadline = time.monotonic() + 30
    while apex() == first and time.monotonic() < deadline:
        time.sleep(0.01)
    print(next(l for l in apex().decode().splitlines() if l.startswith("SOA")), flush=True)
    zones.close(); data.close(); env.close()
""")


@pytest.mark.parametrize("mode", ["transactional", "concurrent"])
def test_bdbhpt_reader_sees_update_while_open(tmp_path: Path, mode: str) -> None:
    """A process holding the environment open, as named does, sees the loader's update."""
    zones = awkward_zones()
    bdbhpt.LOADER.load(zones, tmp_path)
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER, str(tmp_path / mode), mode, "parent.test"],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    try:
        assert reader.stdout is not None
        assert reader.stdout.readline().strip() == "ready"
        new_soa = make_record(PARENT, 3600, "SOA",
                              "ns.parent.test. hostmaster.parent.test. 99 3600 900 604800 300")
        bdbhpt.LOADER.update(Zone(PARENT, [new_soa, *zones[0].records[1:]]), tmp_path)
        assert reader.stdout.readline().split()[:6] == ["SOA", "3600", "ns.parent.test.",
                                                        "hostmaster.parent.test.", "99",
                                                        "3600"]
        assert reader.wait(timeout=30) == 0
    finally:
        reader.kill()
        reader.wait()


@pytest.mark.check
@pytest.mark.parametrize("driver", ["bdbhpt-t", "bdbhpt-c", "bdbhpt-p"])
def test_bdbhpt_each_mode_opens_as_its_driver_does(tmp_path: Path, driver: str) -> None:
    zones = awkward_zones()
    bdbhpt.LOADER.load(zones, tmp_path)
    server = get_server(driver)
    assert isinstance(server, DlzNamed)
    mode = server.options["mode"]
    assert canonical_set(bdbhpt.read_mode(tmp_path, mode)) == canonical_set(zones)
    clause = server.body(tmp_path, 2)
    assert f"connections=2 mode={mode} env={(tmp_path / mode).resolve()}" in clause


@pytest.mark.check
def test_bdbhpt_shared_environment_refuses_another_mode(tmp_path: Path) -> None:
    """Why there is one home per mode: regions fix an environment's locking mode (BDB1540)."""
    bdbhpt.LOADER.load(awkward_zones(), tmp_path)
    for mode in ("transactional", "concurrent"):
        bdbhpt.read_mode(tmp_path, mode)  # creates its regions, as named's first open does
    join = {"transactional": db.DB_INIT_TXN | db.DB_INIT_LOG | db.DB_INIT_LOCK | db.DB_INIT_MPOOL,
            "concurrent": db.DB_INIT_CDB | db.DB_INIT_MPOOL}
    for home, other in (("transactional", "concurrent"), ("concurrent", "transactional")):
        env = db.DBEnv()
        with pytest.raises(db.DBInvalidArgError, match="BDB1540"):
            env.open(str(tmp_path / home), join[other])
        env.close()


@pytest.mark.check
def test_bdbhpt_first_load_writes_one_file_for_the_three_homes(tmp_path: Path) -> None:
    bdbhpt.LOADER.load(awkward_zones(), tmp_path)
    files = [(tmp_path / mode / bdbhpt.DATA_FILE).read_bytes() for mode in bdbhpt.MODES]
    assert files[0] == files[1] == files[2]
    assert not (tmp_path / bdbhpt.STAGING).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(bdbhpt.MODES)


@pytest.mark.check
def test_bdbhpt_failed_first_load_leaves_no_data(tmp_path: Path) -> None:
    def failing() -> Iterator[Zone]:
        yield from awkward_zones()[:2]
        raise RuntimeError("the zone source broke")

    with pytest.raises(RuntimeError, match="broke"):
        bdbhpt.LOADER.load(failing(), tmp_path)
    assert not any((tmp_path / mode / bdbhpt.DATA_FILE).exists() for mode in bdbhpt.MODES)
    assert not (tmp_path / bdbhpt.STAGING).exists()
    assert list(bdbhpt.LOADER.read_back(tmp_path)) == []
    bdbhpt.LOADER.load(awkward_zones(), tmp_path)  # and a new first load works
    assert canonical_set(bdbhpt.LOADER.read_back(tmp_path)) == canonical_set(awkward_zones())


@pytest.mark.check
def test_ctrl_c_waits_for_the_end_of_a_deferred_block() -> None:
    finished = False
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            signal.raise_signal(signal.SIGINT)
            finished = True
    assert finished
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _generations(target: Path, mode: str) -> set[bytes]:
    env = db.DBEnv()
    env.open(str(target / mode), bdbhpt.ENV_FLAGS[mode])
    xfr = db.DB(env)
    xfr.open("dns.db", "dns_xfr", db.DB_UNKNOWN, db.DB_RDONLY)
    data = db.DB(env)
    data.open("dns.db", "dns_data", db.DB_UNKNOWN, db.DB_RDONLY)
    try:
        return set(xfr.keys()) | {key.split(b" ", 1)[0] for key in data.keys()}
    finally:
        xfr.close()
        data.close()
        env.close()


@pytest.mark.check
def test_bdbhpt_replaced_generations_are_purged(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    zones = awkward_zones()
    bdbhpt.LOADER.load(zones, tmp_path)
    bdbhpt.LOADER.update(zones[0], tmp_path)
    for mode in bdbhpt.MODES:
        assert len(_generations(tmp_path, mode)) == len(zones) + 1  # old one within its grace
    monkeypatch.setattr(bdbhpt, "RETIRE_GRACE_SECONDS", 0.0)
    bdbhpt.LOADER.update(zones[1], tmp_path)
    for mode in bdbhpt.MODES:
        assert len(_generations(tmp_path, mode)) == len(zones) + 1  # only the newest retired


@pytest.mark.check
def test_record_values_are_one_line_per_record() -> None:
    owner = dns.name.from_text("x.test.")
    record = Record(owner, 5, "TXT", '"a b" "c\\010d"')
    zone = Zone(dns.name.from_text("test."), [record])
    prepared = prepare_zone(zone)
    assert [n.value for n in prepared.nodes] == [b'TXT 5 "a b" "c\\010d"\n']
