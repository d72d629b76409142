"""Record-level writes into every store that takes them (loaders/writes.py), and `bench writes`
(bench/measure/writes.py).

Each store runs in its real private server (or directory): a small data set is loaded, a
sequence of every kind of write is applied through the store's writer, and the store read back
must hold exactly what the same changes make of the model; the marker rows of empty
non-terminals must be those a fresh load writes. Writes that cannot be made raise a one-line
error and change nothing. Then a tiny `bench writes` over memory (n/a), pg, fs, bdbhpt-t and
native, half the servers in each of two runs made at once: every column in the report, the
writes counted, every changed name answered as native BIND answers it given the same changes;
and Ctrl-C in the middle of a step leaves nothing running.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import dns.exception
import dns.name
import dns.query
import dns.rdataclass
import ldap as ldapmod
import pytest

from base.errors import UserError
from base.paths import REPO_ROOT
from bench.commands.cli import build_parser
from bench.commands.writes import read_rates
from bench.load.dnsperf import DnsperfRun
from bench.load.update_sender import Signer, change_message
from bench.measure.loading import timed_load
from bench.measure.results import Results, has_results, load_results
from bench.measure.serving import serving
from bench.measure.writes import (
    CEILING,
    PROBER_MAX_QPS,
    STALE_BOUND_MS,
    ServerFollow,
    ServerWrites,
    StepRun,
    WriteCycle,
    changed_questions,
    checked_changes,
    final_zones,
    probe,
    read_split,
    shows,
    summarize,
)
from bench.report.writes import COLUMNS, STALE_COLUMN, render_server
from loaders import bdbhpt, fs, get_loader
from loaders.berkeley import decode_lines
from loaders.ldap import ENT_VALUE, bound, filter_value
from loaders.loader import Loader
from loaders.writes import ADD, ADD_ZONE, CHANGE, DELETE, DELETE_ZONE, Change
from servers import get_server
from servers.dnsserver import DnsServer, non_recursive_query
from tests.at_once import results_at_once
from tests.benchcli import interrupt_when, processes_under, run_bench, start_bench
from zonedata.model import Zone, canonical_set, empty_nonterminals, make_record, name_key

ORIGIN = dns.name.from_text("example.test.")
OTHER = dns.name.from_text("other.test.")
NEW_ZONE = dns.name.from_text("new.writes.test.")
# Every store whose writer this file checks (bdb and memory say why they take none).
WRITABLE = ["pg", "mysql", "pdns_pg", "pdns_mysql", "pdns_lmdb", "ldap", "fs", "bdbhpt", "native"]


def _n(text: str, origin: dns.name.Name = ORIGIN) -> dns.name.Name:
    return dns.name.from_text(text, origin=origin)


def _zone(origin: dns.name.Name) -> Zone:
    return Zone(origin, [
        make_record(origin, 3600, "SOA", f"ns.{origin} admin.{origin} 1 3600 900 604800 300"),
        make_record(origin, 3600, "NS", f"ns.{origin}"),
        make_record(_n("ns", origin), 3600, "A", "192.0.2.53"),
        make_record(_n("www", origin), 300, "A", "192.0.2.1"),
        make_record(_n("mail", origin), 300, "MX", f"10 ns.{origin}"),
        # deep.b.a: a and b.a are empty non-terminals.
        make_record(_n("deep.b.a", origin), 300, "TXT", '"deep"')])


def _changes() -> list[Change]:
    """Every kind, and the ENT cases: a new name two levels down (a new ENT), the last record
    of a name with a name below it (it becomes an ENT), the last name under an ENT (it goes)."""
    return [
        Change(ADD, ORIGIN, make_record(_n("x.y"), 300, "A", "192.0.2.7")),
        Change(ADD, ORIGIN, make_record(_n("www"), 300, "A", "192.0.2.2")),
        Change(CHANGE, ORIGIN, make_record(_n("www"), 300, "A", "192.0.2.3"),
               old=make_record(_n("www"), 300, "A", "192.0.2.1")),
        Change(ADD, ORIGIN, make_record(_n("b.a"), 300, "TXT", '"now a record"')),
        Change(DELETE, ORIGIN, make_record(_n("deep.b.a"), 300, "TXT", '"deep"')),
        Change(ADD, ORIGIN, make_record(_n("mx2"), 300, "MX", f"20 ns.{ORIGIN}")),
        Change(DELETE, ORIGIN, make_record(_n("mail"), 300, "MX", f"10 ns.{ORIGIN}")),
        Change(ADD_ZONE, NEW_ZONE, zone_records=tuple(_zone(NEW_ZONE).records)),
        Change(DELETE_ZONE, OTHER),
        Change(ADD, ORIGIN, make_record(_n("c.x.y"), 300, "A", "192.0.2.8")),
        Change(DELETE, ORIGIN, make_record(_n("x.y"), 300, "A", "192.0.2.7")),
    ]


def _bad_changes() -> list[Change]:
    """Writes that cannot be made once _changes() are in."""
    return [
        Change(ADD, ORIGIN, make_record(_n("www"), 300, "A", "192.0.2.3")),  # there already
        Change(DELETE, ORIGIN, make_record(_n("www"), 300, "A", "192.0.2.99")),  # not there
        Change(CHANGE, ORIGIN, make_record(_n("www"), 300, "A", "192.0.2.4"),
               old=make_record(_n("www"), 300, "A", "192.0.2.1")),  # old one gone
        Change(ADD, OTHER, make_record(_n("www", OTHER), 300, "A", "192.0.2.1")),  # no zone
        Change(ADD_ZONE, NEW_ZONE, zone_records=tuple(_zone(NEW_ZONE).records)),  # there
        Change(DELETE_ZONE, OTHER),  # gone already
    ]


def _expected() -> list[Zone]:
    """The two zones with _changes() made to the model."""
    held = {zone.origin: zone for zone in (_zone(ORIGIN), _zone(OTHER))}
    for change in _changes():
        after = change.applied_to(held.get(change.zone))
        if after is None:
            del held[change.zone]
        else:
            held[change.zone] = after
    return list(held.values())


def _markers(store: str, target: Any) -> set[str] | None:
    """The keys of every empty-non-terminal marker the store holds (None: zone files, which
    hold none: named finds empty non-terminals itself)."""
    loader = get_loader(store)
    if store in ("pg", "pdns_pg"):
        with loader.database.connect(target) as conn:
            return {r[0] for r in conn.execute(f"SELECT name FROM records WHERE "
                                               f"{SQL_MARKER[store]}")}
    if store in ("mysql", "pdns_mysql"):
        conn = loader.database.connect(target)
        try:
            cursor = conn.cursor()
            cursor.execute(f"SELECT name FROM records WHERE {SQL_MARKER[store]}")
            return {_text(r[0]) for r in cursor.fetchall()}
        finally:
            conn.close()
    if store == "ldap":
        with bound(target) as conn:
            found = conn.search_s(target.suffix, ldapmod.SCOPE_SUBTREE,
                                  f"(dlzRecord={filter_value(ENT_VALUE)})", ["dlzOwner"])
            return {attrs["dlzOwner"][0].decode() for _, attrs in found}
    if store == "fs":
        return {line.split(" ")[0] for file in Path(target).rglob(fs.ZONE_FILE)
                for line in file.read_text().splitlines() if line.split(" ")[1:2] == ["ENT"]}
    if store == "bdbhpt":
        return _bdbhpt_markers(Path(target))
    return None


SQL_MARKER = {"pg": "type = 'ENT'", "mysql": "type = 'ENT'", "pdns_pg": "type IS NULL",
              "pdns_mysql": "type IS NULL"}


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _bdbhpt_markers(target: Path) -> set[str]:
    """The empty nodes of every live generation, the same in all three homes."""
    found = []
    for mode in bdbhpt.MODES:
        home = bdbhpt._Home(target / mode, mode, write=False)
        try:
            markers = set()
            for _, gen in bdbhpt._all_items(home.dbs["dns_zone"]):
                for owner in decode_lines(home.dbs["dns_xfr"].get(gen) or b""):
                    if home.dbs["dns_data"].get(bdbhpt.data_key(gen.decode(), owner)) == b"":
                        markers.add(owner)
            found.append(markers)
        finally:
            home.close()
    assert found[0] == found[1] == found[2]
    return found[0]


@pytest.fixture(scope="module", params=WRITABLE)
def written(request: pytest.FixtureRequest, run_dir: Path) -> Iterator[tuple[str, Loader, Any]]:
    """(store, loader, target) of a store holding the two zones, _changes() applied."""
    store = request.param
    loader = get_loader(store)
    with loader.database.server(run_dir / store) as target:
        timed_load(loader, [_zone(ORIGIN), _zone(OTHER)], target)
        with loader.writer(target) as writer:
            for change in _changes():
                writer.apply(change)
        yield store, loader, target


def test_read_back_shows_exactly_the_changes(written: tuple[str, Loader, Any]) -> None:
    store, loader, target = written
    assert canonical_set(loader.read_back(target)) == canonical_set(_expected()), store


def test_marker_rows_are_a_fresh_loads(written: tuple[str, Loader, Any]) -> None:
    store, _, target = written
    markers = _markers(store, target)
    if markers is None:
        pytest.skip(f"{store}: no marker rows to read (native: zone files hold none; "
                    "pdns_lmdb: rectify-zone keeps them)")
    # The names here are spelled alike as keys and in PowerDNS's rows.
    wanted = {name_key(n) for zone in _expected() for n in empty_nonterminals(zone)}
    assert markers == wanted
    # a stays (b.a now has a record); b.a is no marker; y (above x.y, then c.x.y) and x.y
    # (whose record went, c.x.y below it) are; the added zone brings its own.
    assert wanted == {"a.example.test", "y.example.test", "x.y.example.test",
                      "a.new.writes.test", "b.a.new.writes.test"}


def test_a_bad_write_changes_nothing(written: tuple[str, Loader, Any]) -> None:
    store, loader, target = written
    before = canonical_set(loader.read_back(target))
    with loader.writer(target) as writer:
        for change in _bad_changes():
            with pytest.raises(UserError):
                writer.apply(change)
    assert canonical_set(loader.read_back(target)) == before, store


@pytest.mark.check
@pytest.mark.parametrize("store", ["memory", "bdb"])
def test_a_store_without_writes_says_why(store: str, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot be written while serving: .+"):
        get_loader(store).writer(tmp_path)


@pytest.mark.check
def test_the_cycle_leaves_its_last_record_and_zone() -> None:
    cycle = WriteCycle([ORIGIN, OTHER])
    for _ in range(12):
        cycle.done(cycle.next(), 0)
    kinds = [c.kind for c in cycle.changes]
    assert set(kinds) == {ADD, CHANGE, DELETE, ADD_ZONE, DELETE_ZONE}
    questions = changed_questions(cycle.changes)
    assert (_n("wr"), "A") in questions and (_n("w0.wr"), "A") in questions


@pytest.mark.check
def test_an_update_message_makes_one_record_change() -> None:
    www = make_record(_n("www"), 300, "A", "192.0.2.1")
    new = make_record(_n("www"), 300, "A", "192.0.2.3")
    change = change_message(Change(CHANGE, ORIGIN, new, old=www), Signer())
    assert change.zone[0].name == ORIGIN
    assert [(rrset.name, rrset.deleting, [rd.to_text() for rd in rrset])
            for rrset in change.update] == [(_n("www"), dns.rdataclass.NONE, ["192.0.2.1"]),
                                            (_n("www"), None, ["192.0.2.3"])]
    with pytest.raises(UserError, match="records, not zones"):
        change_message(Change(DELETE_ZONE, OTHER), Signer())


@pytest.mark.check
def test_a_cycle_of_updates_changes_records_only() -> None:
    cycle = WriteCycle([ORIGIN, OTHER], zone_kinds=False)
    kinds = [c.kind for c in _write(cycle, 9)]
    assert kinds == [ADD, CHANGE, ADD, ADD, CHANGE, DELETE, ADD, CHANGE, DELETE]


def _write(cycle: WriteCycle, count: int) -> list[Change]:
    made = []
    for _ in range(count):
        change = cycle.next()
        cycle.done(change, 0)
        made.append(change)
    return made


@pytest.mark.check
def test_a_followed_record_or_zone_is_not_deleted_until_seen() -> None:
    """An answer after a record's delete looks like one before its add: the record the
    sampler follows is kept, and the next oldest goes in its turn."""
    cycle = WriteCycle([ORIGIN, OTHER])
    _write(cycle, 3)  # w0 added and changed, zone wz0 added
    cycle.pin(1)  # the change of w0
    cycle.pin(2)  # zone wz0
    _write(cycle, 2)  # the first cycle has no earlier one to delete from
    cycle1 = _write(cycle, 5)  # w1 and wz1 made; w0 and wz0 pinned: TXT records instead
    assert [(c.kind, c.record.rdtype) for c in cycle1[3:] if c.record] == \
        [(ADD, "TXT"), (ADD, "TXT")]
    cycle2 = _write(cycle, 5)
    assert (cycle2[3].kind, cycle2[3].record.owner) == (DELETE, _n("w1.wr", OTHER))
    assert (cycle2[4].kind, cycle2[4].zone) == (DELETE_ZONE, cycle1[2].zone)
    cycle.unpin(1)
    cycle.unpin(2)
    cycle3 = _write(cycle, 5)
    assert (cycle3[3].kind, cycle3[3].record.owner) == (DELETE, _n("w0.wr"))
    assert (cycle3[4].kind, cycle3[4].zone) == (DELETE_ZONE, cycle.changes[2].zone)


@pytest.mark.check
def test_cpu_per_read_counts_only_the_steps_window() -> None:
    """CPU metered to the end of the step, not to the sampler's last poll, over the reads
    answered; a run from before the window was recorded gives none."""
    run = StepRun(rate=100, repeat=0, seconds=3.0, answered=6000, server_cpu_s=0.6,
                  db_cpu_s=0.3, cpu_window_s=3.0)
    assert run.cpu_us_per_read == pytest.approx(150.0)
    old = StepRun(rate=100, repeat=0, seconds=3.0, answered=6000, server_cpu_s=4.2)
    assert old.cpu_us_per_read is None
    step = summarize(100, [run, StepRun(rate=100, repeat=1, seconds=3.0, answered=3000,
                                        server_cpu_s=0.3, cpu_window_s=3.1)])
    assert step.cpu_us_per_read is not None and step.cpu_us_per_read.estimate == \
        pytest.approx(125.0)
    assert step.server_cpu_share is not None and step.server_cpu_share.estimate == \
        pytest.approx((0.2 + 0.3 / 3.1) / 2)


@pytest.mark.check
def test_a_prober_that_fell_short_of_the_reads_asked_says_so() -> None:
    """Reads asked at a breaking point the prober could not send (writes-at-max-2026-11-28:
    it sent 5.6-15k reads/s where 14-61k were asked): the server's section says what it
    sent, as the load generator's limit; a prober that kept up gets no such line."""
    def entry(sent_per_run: list[int]) -> ServerWrites:
        runs = [StepRun(rate=0, repeat=i, seconds=3.0, sent=sent, answered=sent)
                for i, sent in enumerate(sent_per_run)]
        return ServerWrites("pg", read_qps=20_000.0, runs=runs)

    short = entry([24_000, 23_000, 25_000])  # 8,000 a second of the 20,000 asked
    assert short.reads_sent() == pytest.approx(8_000.0)
    assert short.prober_short()
    text = "\n".join(render_server(short, staleness=False))
    assert "**The prober sent 8,000 per second** (40% of it" in text
    kept_up = entry([59_700, 60_000, 60_300])
    assert not kept_up.prober_short()
    assert "prober sent" not in "\n".join(render_server(kept_up, staleness=False))
    assert entry([]).reads_sent() is None and not entry([]).prober_short()


def _shown(server: DnsServer, change: Change, attempts: int = 200) -> bool:
    """Does the server show the change within `attempts` asks 50 ms apart (a hang guard,
    not a measured figure)?"""
    qname, rdtype = probe(change)
    query = non_recursive_query(qname, rdtype, None, False)
    for _ in range(attempts):
        try:
            if shows(change, dns.query.udp(query, server.host, port=server.port, timeout=1.0)):
                return True
        except dns.exception.Timeout:
            pass
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("name", ["nsd", "pdns-bind"])
def test_a_zone_file_server_is_told_of_each_write(name: str, tmp_path: Path) -> None:
    """NSD (nsd-control over its local socket) and PowerDNS's bind backend (pdns_control)
    show every kind of write made to the native store's files."""
    server = get_server(name)
    if not server.is_built():
        pytest.skip(f"{name} is not installed")
    zones = [_zone(ORIGIN), _zone(OTHER)]
    with serving(server, lambda: iter(zones), tmp_path) as served, \
            served.loaded.loader.writer(served.loaded.target) as store:
        follow = ServerFollow(server, served.server, served.loaded.target)
        # NSD deletes only a zone added by nsd-control (one in nsd.conf: "remove it from
        # nsd.conf yourself"), as the writes cycle does.
        changes = [c for c in _changes() if c.kind != DELETE_ZONE]
        for change in [*changes, Change(DELETE_ZONE, NEW_ZONE)]:
            store.apply(change)
            follow(change)
            assert _shown(served.server, change), change.text()


# --- bench writes ------------------------------------------------------------------------

SERVERS = ["memory", "pg", "fs", "bdbhpt-t", "native"]


def _bench_writes(run_root: Path, servers: list[str], out: Path, *extra: str) -> Results:
    done = run_bench(run_root, "writes", "--servers", ",".join(servers), "--profile", "tiny",
                     "--generate", "10", "--records", "5", "--queries", "100",
                     "--out", str(out), *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    results = load_results(out)
    results.meta["markdown"] = (out / "results.md").read_text()
    return results


# Through RFC 2136 updates: two DLZ drivers that take them, and one that does not (n/a).
UPDATED = ["memory", "pg", "fs"]


@pytest.fixture(scope="module")
def writes_runs(run_root: Path) -> dict[str, Results]:
    """The servers in two `bench writes` runs made at once, half of them each (each with
    servers of its own), and beside them a `--via update` run: a server's steps are fixed
    lengths of a light read load (100 reads a second), so the three overlap (one run of all
    five: 62 s of the suite on 2 vCPUs)."""
    servers = [s for s in SERVERS if get_server(s).is_built()]
    halves = [servers[0::2], servers[1::2]]
    made = {f"half-{i}": partial(_bench_writes, run_root, half, run_root / f"writes-out-{i}")
            for i, half in enumerate(halves)}
    made["update"] = partial(_bench_writes, run_root, UPDATED, run_root / "writes-out-update",
                             "--via", "update")
    made["bulk"] = partial(_bench_writes, run_root, ["fs"], run_root / "writes-out-bulk",
                           "--read-qps", f"{PROBER_MAX_QPS + 200:g}", "--rates", "0,10")
    runs = results_at_once(made)
    assert processes_under(run_root) == []
    return runs


@pytest.fixture(scope="module")
def bench_writes(writes_runs: dict[str, Results]) -> list[Results]:
    return [results for key, results in writes_runs.items() if key.startswith("half-")]


def test_reads_while_rfc_2136_updates_run(writes_runs: dict[str, Results]) -> None:
    """Each record change an UPDATE message the driver writes itself: counted, visible,
    answered as native BIND given the same changes (SOA serials aside); a store the suite
    gives no update path is n/a."""
    results = writes_runs["update"]
    assert results.writes is not None and results.writes.via == "update"
    assert "## Reads while RFC 2136 updates run" in results.meta["markdown"]
    entries = {entry.server: entry for entry in results.writes.servers}
    assert entries["fs"].status == "n/a" and "no RFC 2136 updates" in (entries["fs"].error or "")
    for name in ("memory", "pg"):
        entry = entries[name]
        assert entry.status == "ok", entry.error
        for run in entry.runs:
            assert (run.writes > 0) == (run.rate != 0) and run.write_errors == 0, \
                run.first_error
        assert any(run.visibility_ms for run in entry.runs if run.rate == CEILING), name
        assert entry.checked > 0 and entry.differing == [], entry.differing


def test_reads_above_the_probers_share_are_offered_by_dnsperf(
        writes_runs: dict[str, Results]) -> None:
    """Reads asked above PROBER_MAX_QPS: the prober sends its share, every read recorded (the
    latency figures), and dnsperf -Q the rest beside it; both count in the reads sent,
    answered and lost, and the report says who sent what."""
    results = writes_runs["bulk"]
    assert results.writes is not None
    [entry] = results.writes.servers
    assert entry.status == "ok", entry.error
    assert entry.bulk_reads()
    for run in entry.runs:
        assert run.bulk is not None and run.bulk.queries_sent > 0, run.rate
        assert 0 < run.sent <= PROBER_MAX_QPS * run.seconds + 1
        assert run.reads_sent == run.sent + run.bulk.queries_sent
        assert run.answered < run.reads_answered <= run.reads_sent
        assert run.qps == run.reads_answered / run.seconds
    assert "dnsperf -Q the rest" in results.meta["markdown"]


@pytest.mark.check
def test_a_steps_reads_are_the_probers_and_dnsperfs() -> None:
    """A step's read figures add dnsperf's run to the prober's recording: answered are
    NOERROR and NXDOMAIN of both, the loss over both sent, the cost per read over both
    answered; a step without dnsperf is the prober's alone, as before it ran beside."""
    assert read_split(100.0) == (100.0, 0.0)
    assert read_split(PROBER_MAX_QPS + 4_000) == (PROBER_MAX_QPS, 4_000.0)
    bulk = DnsperfRun(argv=[], queries_sent=12_000, queries_completed=11_900,
                      queries_lost=100, rcodes={"NOERROR": 11_000, "NXDOMAIN": 800,
                                                "SERVFAIL": 100})
    run = StepRun(rate=0, repeat=0, seconds=3.0, sent=3_000, answered=2_990, lost=10,
                  server_cpu_s=0.6, db_cpu_s=0.3, cpu_window_s=3.0, bulk=bulk)
    assert run.reads_sent == 15_000 and run.reads_answered == 14_790
    assert run.reads_lost == 110 and run.qps == pytest.approx(4_930.0)
    assert run.cpu_us_per_read == pytest.approx(0.9e6 / 14_790)
    step = summarize(0, [run])
    assert step.loss is not None and step.loss.estimate == pytest.approx(110 / 15_000)
    alone = StepRun(rate=0, repeat=0, seconds=3.0, sent=3_000, answered=2_990, lost=10)
    assert (alone.reads_sent, alone.reads_answered, alone.reads_lost) == (3_000, 2_990, 10)
    entry = ServerWrites("pg", read_qps=5_000.0, runs=[run])
    assert entry.bulk_reads() and not ServerWrites("pg", runs=[alone]).bulk_reads()
    assert entry.reads_sent() == pytest.approx(5_000.0)
    assert "dnsperf -Q the rest" in "\n".join(render_server(entry, staleness=False))
    # Sent short of what was asked while the server lost more than 5% of it: the server set
    # the pace too, and the report does not blame the load generators alone.
    overloaded = StepRun(rate=0, repeat=0, seconds=3.0, sent=3_000, answered=2_000, lost=1_000,
                         bulk=bulk)
    entry = ServerWrites("pg", read_qps=8_000.0, runs=[overloaded])
    assert entry.prober_short() and entry.read_loss() == pytest.approx(1_100 / 15_000)
    text = "\n".join(render_server(entry, staleness=False))
    assert "and the server lost 7% of them" in text and "not the server's" not in text


def test_bench_writes_reports_every_column(bench_writes: list[Results]) -> None:
    statuses = {}
    for results in bench_writes:
        markdown = results.meta["markdown"]
        assert "| " + " | ".join(COLUMNS) + " |" in markdown
        assert results.writes is not None
        statuses.update({s.server: s.status for s in results.writes.servers})
        if "memory" in results.meta["servers"]:
            assert "### memory\n\nn/a: " in markdown
    assert sorted(statuses) == sorted(s for s in SERVERS if get_server(s).is_built())
    assert statuses["memory"] == "n/a"
    assert all(status == "ok" for name, status in statuses.items() if name != "memory")


def test_bench_writes_counts_the_writes(bench_writes: list[Results]) -> None:
    for results in bench_writes:
        assert results.writes is not None
        for entry in results.writes.servers:
            if entry.status != "ok":
                continue
            for run in entry.runs:
                assert (run.writes > 0) == (run.rate != 0), (entry.server, run.rate)
                assert run.write_errors == 0, run.first_error
                assert run.sent > 0 and run.answered > 0
            ceiling = [r for r in entry.runs if r.rate == CEILING]
            assert ceiling and all(r.visibility_ms for r in ceiling), entry.server


def test_bench_writes_holds_every_answer_to_the_stale_bound(bench_writes: list[Results]
                                                            ) -> None:
    """The staleness check ran at its default bound and says so; pg, read live, never
    answered a sampled write stale past it."""
    for results in bench_writes:
        assert results.writes is not None and results.writes.stale_bound_ms == STALE_BOUND_MS
        assert STALE_COLUMN in results.meta["markdown"]
        for entry in results.writes.servers:
            for run in entry.runs:
                assert run.answers_checked >= len(run.visibility_ms), entry.server
                if entry.server == "pg":
                    assert run.stale_writes == 0 and run.stale_answers == 0


def test_bench_writes_answers_as_native_after_the_changes(bench_writes: list[Results]) -> None:
    for results in bench_writes:
        assert results.writes is not None
        for entry in results.writes.servers:
            if entry.status == "ok":
                assert entry.checked > 0 and entry.differing == [], entry.server


def test_ctrl_c_during_a_step_leaves_nothing_running(run_root: Path) -> None:
    root = run_root / "interrupted"
    proc = start_bench(root, "writes", "--servers", "pg", "--profile", "tiny", "--step", "30",
                       "--generate", "5", "--records", "5", "--queries", "100",
                       "--out", str(root / "out"))
    interrupt_when(proc, lambda: any(root.rglob("recording-*")))
    assert processes_under(root) == []
    assert not has_results(root / "out")


@pytest.mark.check
def test_read_share_of_a_committed_breaking_point() -> None:
    capacity = REPO_ROOT / "docs" / "results" / "capacity-2026-11-26"
    args = build_parser().parse_args(["writes", "--read-share", "0.5", "--capacity",
                                      str(capacity), "--threads", "1"])
    curve = next(c for c in load_results(capacity).capacity
                 if c.server == "pg" and c.threads == 1)
    point = curve.breaking_point()
    assert point is not None
    assert read_rates([get_server("pg")], args, 1000) == {"pg": 0.5 * point}
    with pytest.raises(UserError, match="no breaking point of mysql"):
        read_rates([get_server("mysql")], args, 1000)


@pytest.mark.check
def test_final_zones_are_the_model_after_the_changes() -> None:
    def stream() -> Iterator[Zone]:
        yield from (_zone(ORIGIN), _zone(OTHER))

    final = {zone.origin: zone for zone in final_zones(stream, _changes())()}
    assert canonical_set(final.values()) == canonical_set(_expected())
    changes = [Change(ADD, ORIGIN, make_record(_n(f"n{i}"), 300, "A", "192.0.2.1"))
               for i in range(3000)]
    checked = checked_changes(changes)
    assert len(checked) <= 1000 and checked[-1] is changes[-1] and checked[0] is changes[0]
