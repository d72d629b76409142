"""`python3 -m bench fuzz`, the short version (docs/method/fuzz.md): the generator's packets
(every kind, each of its shape, the same seed giving the same packets), a few hundred of them
through named with the memory, pg and fs drivers, which must stay up and answer the coverage
queries as native BIND afterwards, and through the AddressSanitizer builds of the drivers (pg's
client cannot run with libasan preloaded) and the UndefinedBehaviorSanitizer builds of memory,
fs and pg, which must report nothing.
"""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

import dns.exception
import dns.message
import dns.name
import dns.rdataclass
import dns.rdatatype
import pytest

from base.paths import REPO_ROOT
from base.process import free_port
from bench.load.fuzz import KINDS, Packet, fuzz_packets, fuzz_updates, send_packets, update_queries
from bench.measure.results import read_results_file
from bench.measure.serving import loaded_store
from servers import get_server
from servers.dlz import DlzNamed
from servers.named import Named, asan_environment, ubsan_environment
from tests.benchcli import run_bench
from zonedata.derive import Query, derive_queries
from zonedata.generator import coverage_zones

QUERIES = derive_queries(coverage_zones())
# Enough for every kind many times over.
PACKETS = fuzz_packets(QUERIES, 1100, seed=5)


def _of(kind: str) -> list[Packet]:
    return [p for p in PACKETS if p.kind == kind]


def _parsed(packet: Packet) -> dns.message.Message | None:
    try:
        return dns.message.from_wire(packet.wire)
    except (dns.exception.DNSException, ValueError, struct.error):
        return None


@pytest.mark.check
def test_every_kind_comes_in_turn() -> None:
    assert [p.kind for p in PACKETS[:len(KINDS)]] == list(KINDS)
    assert {kind: len(_of(kind)) for kind in KINDS} == {kind: 100 for kind in KINDS}


@pytest.mark.check
def test_the_same_seed_gives_the_same_packets() -> None:
    assert fuzz_packets(QUERIES, 300, seed=5) == PACKETS[:300]
    other = fuzz_packets(QUERIES, 300, seed=6)
    assert sum(a != b for a, b in zip(other, PACKETS, strict=False)) > 250


@pytest.mark.check
def test_well_formed_kinds_parse_with_what_they_change() -> None:
    standard = {dns.rdatatype.A, dns.rdatatype.AAAA, dns.rdatatype.MX, dns.rdatatype.TXT}
    types = [_parsed(p).question[0].rdtype for p in _of("odd-type")]
    assert dns.rdatatype.AXFR in types and dns.rdatatype.OPT in types
    assert not standard & set(types)
    assert any(p.tcp for p in _of("odd-type")) and not any(p.tcp for p in _of("edns"))
    classes = {_parsed(p).question[0].rdclass for p in _of("odd-class")}
    assert dns.rdataclass.IN not in classes and dns.rdataclass.CH in classes
    labels = [label for p in _of("binary-label")
              for label in _parsed(p).question[0].name.labels]
    assert b"*" in labels and any(not label.isascii() for label in labels)
    assert any(b"\x00" in label for label in labels)


@pytest.mark.check
def test_edns_packets_carry_options_and_some_a_second_opt() -> None:
    parsed = [_parsed(p) for p in _of("edns")]
    assert any(m is not None and m.options for m in parsed)
    # dnspython refuses some, as named does (FORMERR): a second OPT record, a malformed
    # client subnet.
    assert any(m is None for m in parsed)


@pytest.mark.check
def test_the_deepest_legal_name_is_sent() -> None:
    depths = [len(m.question[0].name) for p in _of("long-name") if (m := _parsed(p))]
    assert 128 in depths  # 127 labels and the root


UPDATES = fuzz_updates(coverage_zones()[0], 300, seed=5)


@pytest.mark.check
def test_the_updates_change_the_zone_in_every_way_and_repeat() -> None:
    """The same seed gives the same messages; they add every type of the table at old and new
    names (deep, binary, wildcard), delete records, RRsets and names, and test prerequisites,
    all inside the zone."""
    again = fuzz_updates(coverage_zones()[0], 300, seed=5)
    assert [m.to_wire() for m in again] == [m.to_wire() for m in UPDATES]
    origin = coverage_zones()[0].origin
    rrsets = [rrset for m in UPDATES for rrset in m.update]
    assert all(rrset.name.is_subdomain(origin) for rrset in rrsets)
    added = {dns.rdatatype.to_text(r.rdtype) for r in rrsets if r.deleting is None}
    assert {"A", "TXT", "NS", "CNAME", "DS", "LOC", "TYPE65280", "SOA"} <= added
    deleted = {(r.deleting, r.rdtype) for r in rrsets if r.deleting is not None}
    assert (dns.rdataclass.ANY, dns.rdatatype.ANY) in deleted  # a whole name
    assert any(cls == dns.rdataclass.ANY and t != dns.rdatatype.ANY for cls, t in deleted)
    assert any(cls == dns.rdataclass.NONE for cls, _ in deleted)  # one record
    assert any(m.prerequisite for m in UPDATES)
    assert any(b"*" in r.name.labels[1:] for r in rrsets)  # a name below a wildcard
    assert len(update_queries(UPDATES)) > 100


@pytest.mark.check
def test_truncated_packets_never_parse() -> None:
    assert all(_parsed(p) is None for p in _of("truncated"))


@pytest.mark.check
def test_compression_loops_do_not_parse() -> None:
    """Five of the six shapes loop or point past the end; a pointer into the header may land
    on octets that read as a name."""
    failed = sum(_parsed(p) is None for p in _of("compression-loop"))
    assert failed >= 70, failed


@pytest.mark.check
def test_names_over_255_octets_and_reserved_label_types_are_sent() -> None:
    raw = [p.wire[12:] for p in _of("long-name")]
    assert any(name[0] in range(0x40, 0xC0) for name in raw if name)
    assert any(len(name) > 260 and all(name[i] == 63 for i in range(0, 256, 64))
               for name in raw)


# --- through the servers ----------------------------------------------------------------------

FUZZED = ["memory", "pg", "fs"]


@pytest.mark.skipif(not all(get_server(s).is_built() for s in FUZZED),
                    reason="the drivers are not built")
def test_a_short_fuzz_run_keeps_every_server_up_and_right(run_root: Path) -> None:
    done = run_bench(run_root, "fuzz", "--servers", ",".join(FUZZED), "--packets", "330",
                     "--updates", "60", "--seed", "3", "--out", str(run_root / "fuzz-out"))
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    for server in FUZZED:
        line = re.search(rf"^{server}: 330 packets in .* (\d+) answered, 0 crashes", out,
                         re.MULTILINE)
        assert line and int(line.group(1)) > 0, out
        assert re.search(rf"^after: {server}: \d+/\d+ identical", out, re.MULTILINE), out
    # The signed updates: through native BIND and the two that take them, answered alike
    # (fs takes none, and is compared outside the updated zone).
    assert "then 60 signed updates of cov.test. through those that take them: native, " \
           "memory, pg" in out
    updates = {server: re.search(rf"^{server}: 60 signed updates in [0-9.]+ s \((.*)\), "
                                 "0 crashes", out, re.MULTILINE)
               for server in ("native", "memory", "pg")}
    assert all(updates.values()) and "NOERROR" in updates["native"].group(1), out
    assert len({m.group(1) for m in updates.values() if m}) == 1, out
    assert "fuzz: 0 crashes, 0 servers with unexplained differences afterwards" in out
    # --out keeps what was printed, with the metadata that says where it comes from.
    written = read_results_file(run_root / "fuzz-out")
    assert written["meta"]["boot_id"] and written["meta"]["packets"] == 330
    for server in FUZZED:
        outcome = written["servers"][server]
        assert outcome["sent"] == 330 and outcome["crash"] is None
        assert outcome["after"]["unexplained"] == 0 and outcome["after"]["total"] > 0
    assert written["servers"]["fs"]["updates"] is None
    assert written["servers"]["pg"]["updates"]["sent"] == 60
    assert written["references_updated"]["native"]["answers"]["NOERROR"] > 30
    assert out.splitlines()[-1] in (run_root / "fuzz-out" / "results.md").read_text()


# Every driver whose store needs no libpq: preloading libasan into a libpq client deadlocks in
# glibc's locale locks (tests/test_drivers.py ASAN_IMPOSSIBLE); pg runs under UBSan below.
ASAN_FUZZED = [name for name in ("memory", "fs", "bdb-hash", "mysql", "ldap")
               if get_server(name).is_built()]
UBSAN_FUZZED = [name for name in ("memory", "fs", "pg") if get_server(name).is_built()]


@pytest.fixture(scope="module")
def asan_built() -> None:
    done = subprocess.run(["make", "-s", "-C", str(REPO_ROOT / "drivers"), "asan"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _sanitized(kind: str, driver: str) -> Path:
    """build/<kind>/<d>/dlz_<d>.so of driver (make -C drivers asan or ubsan)."""
    server = get_server(driver)
    assert isinstance(server, DlzNamed)
    so = server.library_file
    return REPO_ROOT / "build" / kind / so.parent.name / so.name


@pytest.mark.parametrize("driver", ASAN_FUZZED)
def test_asan_builds_under_the_packets(run_dir: Path, asan_built: None, driver: str) -> None:
    """named loads the driver's AddressSanitizer build (libasan preloaded): after the packets
    it still runs and answers, and ASan has reported nothing."""
    server = get_server(driver)
    reports = run_dir / f"asan-{driver}"
    reports.mkdir()
    with loaded_store(driver, lambda: iter(coverage_zones()), run_dir / driver) as loaded:
        body = server.body(loaded.target, 2, library=_sanitized("asan", driver))
        env = {**asan_environment(reports), **loaded.loader.database.client_env(loaded.target)}
        with Named(run_dir / f"named-asan-{driver}", body, threads=2, env=env) as named:
            outcome = send_packets(PACKETS[:330], named.host, named.port, named.running)
            assert outcome.crash is None, outcome.crash
            named.wait_answers("cov.test.", timeout=10)  # UserError if it does not
            log = named.log_path
    found = sorted(reports.glob("asan*"))
    assert not found, found[0].read_text(errors="replace")[:4000]
    assert "AddressSanitizer" not in log.read_text(errors="replace")


def _well_formed(queries: list[Query]) -> list[Packet]:
    """Every query as a resolver sends it, then each zone's transfer (over TCP)."""
    packets = [Packet("query", dns.message.make_query(name, rdtype, flags=0).to_wire())
               for name, rdtype in queries]
    return packets + [Packet("axfr", dns.message.make_query(zone.origin, "AXFR").to_wire(),
                             tcp=True) for zone in coverage_zones()]


@pytest.fixture(scope="module")
def ubsan_built() -> None:
    targets = [str(_sanitized("ubsan", driver)) for driver in UBSAN_FUZZED]
    done = subprocess.run(["make", "-s", "-j2", "-C", str(REPO_ROOT / "drivers"), *targets],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("driver", UBSAN_FUZZED)
def test_ubsan_builds_under_the_queries_and_packets(run_dir: Path, ubsan_built: None,
                                                    driver: str) -> None:
    """named loads the driver's UndefinedBehaviorSanitizer build (make -C drivers ubsan),
    which stops named at its first report: every coverage query and zone transfer, then the
    packets, and named still runs, answers, and UBSan has reported nothing."""
    server = get_server(driver)
    reports = run_dir / f"ubsan-{driver}"
    reports.mkdir()
    with loaded_store(driver, lambda: iter(coverage_zones()), run_dir / driver) as loaded:
        body = server.body(loaded.target, 2, library=_sanitized("ubsan", driver))
        env = {**ubsan_environment(reports), **loaded.loader.database.client_env(loaded.target)}
        with Named(run_dir / f"named-ubsan-{driver}", body, threads=2, env=env) as named:
            outcome = send_packets(_well_formed(QUERIES) + PACKETS[:330], named.host,
                                   named.port, named.running)
            assert outcome.crash is None, outcome.crash
            assert outcome.answered > len(QUERIES)
            named.wait_answers("cov.test.", timeout=10)
            log = named.log_path
    found = sorted(reports.glob("ubsan*"))
    assert not found, found[0].read_text(errors="replace")[:4000]
    assert "runtime error" not in log.read_text(errors="replace")


def test_a_server_that_dies_is_a_crash_naming_its_last_packets() -> None:
    """The "server" is a process killed at the sender's third look (nothing listens on the
    port): sending stops there, and the crash names the last two batches' packets."""
    proc = subprocess.Popen(["sleep", "60"])
    looks = 0

    def alive() -> bool:
        nonlocal looks
        looks += 1
        if looks == 3:
            proc.kill()
            proc.wait()
        return proc.poll() is None

    try:
        outcome = send_packets(PACKETS[:300], "127.0.0.1", free_port(), alive)
    finally:
        proc.kill()
        proc.wait()
    crash = outcome.crash
    assert crash is not None and crash.how == "died"
    assert 0 < crash.first < crash.last == outcome.sent - 1 < 300
    assert crash.kinds == [p.kind for p in PACKETS[crash.first:crash.last + 1]]
