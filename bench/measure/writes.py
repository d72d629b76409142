"""Reads at a fixed offered rate while a provisioning system writes into the store
(docs/method/writes.md).

Per server, the store is loaded and the server started once; then each step of write rates
(writes per second; CEILING: as fast as the writer goes) runs for the same length, in every
repeat, the steps in ABBA order across repeats (bench/measure/stats.py: round_order). In a
step:

- the open-loop prober (bench/load/prober, -O -R) offers the read rate, up to
  PROBER_MAX_QPS, and records every query (RCODE, latency, or lost); dnsperf (-Q) offers the
  rest of a higher rate beside it, as beside capacity's steps, its answers and losses counted
  with the prober's (the latency figures are the prober's);
- a writer thread with its own connection (Loader.writer: loaders/writes.py) applies changes
  paced to the step's rate, one transaction each, cycling through the five kinds; for a
  server of zone files each change is followed by what tells it (ServerFollow: rndc, knotc,
  nsd-control, pdns_control);
- a sampler thread takes every k-th write as it commits (k: about SAMPLES_PER_STEP a step;
  at the ceiling every write, whenever the sampler is free) and asks the server (dnspython,
  UDP) every POLL_S until an answer shows it: commit to that answer is the write's
  visibility delay; a write offered while the sampler still follows an earlier one is
  skipped (counted), one not shown within VISIBLE_TIMEOUT_S is recorded as not seen;
- the staleness check: every answer the sampler gets, and CONFIRM_ASKS more after the first
  that shows the write, is compared with the store as it was the bound (stale_bound_ms, the
  same for every server) before the query was sent: an answer that does not show a write
  committed earlier than that is stale past the bound, and so is the write (counted);
- the database server's processes and the DNS server's are CPU-metered over the step (not
  the sampler's following of its last write after it).

A writer is anything with `apply(change)` (loaders/writes.py: StoreWriter) that says what it
changed through the Change it was given: a second writer (RFC 2136 updates sent to the
server) can stand in for the store's own.
"""

from __future__ import annotations

import math
import queue
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype

from base.errors import UserError
from base.update_access import TsigKey, UpdateAccess
from bench.load import dnsperf
from bench.load.prober import LOST, Recorder, Recording, nearest_rank
from bench.load.update_sender import UpdateWriter
from bench.measure import capacity
from bench.measure.accounting import CpuMeter, us_per_query
from bench.measure.capacity import OFFERED_SHARE
from bench.measure.serial import Section
from bench.measure.serving import LoadedStore, loaded_store
from bench.measure.stats import Interval, median_interval, round_order
from bench.verify.answers import ask, compare_answers
from bench.verify.bind_classes import ZoneFacts
from bench.verify.compare import UNEXPLAINED, classify
from bench.verify.updated_answers import serial_masked
from loaders.loader import Loader
from loaders.writes import ADD, ADD_ZONE, CHANGE, DELETE, DELETE_ZONE, Change, StoreWriter
from servers import REFERENCE, DnsServer, ServerKind, non_recursive_query
from zonedata.model import Record, Zone, make_record

METHOD = ("open-loop prober at a fixed read rate, every query recorded (dnsperf -Q beside it "
          "for the reads above the prober's share); a writer thread "
          "with its own connection paced to the step's write rate, one transaction a "
          "change; every k-th write polled by a sampler until an answer shows it")

CEILING = -1  # a step's rate: as fast as the writer goes
# How the writes reach the server: straight into its store (a provisioning system's way), or
# as RFC 2136 UPDATE messages it writes into the store itself (records only).
VIA_STORE, VIA_UPDATE = "store", "update"
VIAS = (VIA_STORE, VIA_UPDATE)
NOERROR, NXDOMAIN = 0, 3
# The most reads a second the prober sends; dnsperf offers the rest. Asked for each database
# row's breaking point alone, the prober sent only 5.6-15k reads/s beside the server on the
# 2-vCPU Intel VM (writes-at-max-2026-11-28); capacity's steps pace it to at most this too.
PROBER_MAX_QPS = capacity.MAX_PROBE_QPS
# How often the sampler asks while a write is not yet visible: 1 ms puts about 1,000
# queries a second on top of the read load while it waits, small next to it.
POLL_S = 0.001
# Past PowerDNS's packet and query caches (20 s) for the -cached rows.
VISIBLE_TIMEOUT_S = 30.0
# The staleness check's bound by default: the +cache rows' stated one (servers/dlz.py:
# DlzCache), so that every row is held to what they promise.
STALE_BOUND_MS = 1000.0
# Answers asked after the first that shows a sampled write: one that shows the state before
# it again (a cache of another thread, a replica behind) is caught.
CONFIRM_ASKS = 5
# Samples aimed at per step (k = the step's expected writes / this, at least 1).
SAMPLES_PER_STEP = 50
# Changes whose names are asked of the server and of native BIND after the run.
CHECKED_CHANGES = 1000
# How many later writes may add or change a sampled write's name again (its add and change
# are adjacent; two cycles of five leave room).
SUPERSEDE_REACH = 10
# The zone every added zone sits under (none of the data set's).
ADDED_ZONES = dns.name.from_text("writes.dlzbench.test.")


@dataclass(frozen=True)
class Profile:
    rates: tuple[int, ...]
    step_s: float
    repeats: int
    read_qps: float


PROFILES: dict[str, Profile] = {
    # 5 steps x 20 s x 3 repeats = 5 min of load per server, plus load and start.
    "default": Profile(rates=(0, 10, 100, 1000, CEILING), step_s=20, repeats=3, read_qps=1000),
    "tiny": Profile(rates=(0, 10, CEILING), step_s=2, repeats=1, read_qps=100),
}


def rate_text(rate: int) -> str:
    return "ceiling" if rate == CEILING else f"{rate:,}/s"


# --- the writes --------------------------------------------------------------------------


class WriteCycle:
    """The changes a writer makes, in a cycle of five kinds over the data set's zones:
    add w<i>.wr.<zone> A, change it, add zone wz<i>.<ADDED_ZONES>, delete the oldest record
    and zone of earlier cycles still there. Each cycle's first write makes the empty
    non-terminal wr.<zone> where it is new. What is left at the end is the last cycle's
    record and zone, and any the sampler was still following.

    A record or zone the sampler follows is pinned: it is not deleted until it is seen
    (the next oldest goes instead), since an answer after its delete looks like one before
    its add. Without the pin a record lived about 8 writes (80 ms at 100 writes/s), and
    every write slower than that to show was counted "not seen" instead of measured
    (writes-at-max-pg-fs-2026-11-26: one a step). With nothing old enough to delete, a
    TXT record is added instead (w<i>-first.wr, w<i>-second.wr)."""

    def __init__(self, zones: Sequence[dns.name.Name], *, zone_kinds: bool = True) -> None:
        if not zones:
            raise UserError("the data set has no zone to write into")
        self.zones = list(zones)
        # Without zone kinds (RFC 2136 updates, which change records only): add, change,
        # delete.
        self.kinds = (ADD, CHANGE, ADD_ZONE, DELETE, DELETE_ZONE) if zone_kinds else \
            (ADD, CHANGE, DELETE)
        self.count = 0
        self.changes: list[Change] = []  # every change applied, in order
        self.committed_ns: list[int] = []  # when each was committed (monotonic clock)
        # Changed records and added zones still in the store, oldest first.
        self._records: list[tuple[int, dns.name.Name, Record]] = []
        self._added_zones: list[tuple[int, dns.name.Name]] = []
        self._pinned: set[tuple[dns.name.Name, str]] = set()

    def _record(self, i: int, changed: bool = False) -> Record:
        zone = self.zones[i % len(self.zones)]
        owner = dns.name.from_text(f"w{i}.wr", origin=zone)
        address = f"198.51.100.{i % 250 + 1}" if changed else f"192.0.2.{i % 250 + 1}"
        return make_record(owner, 300, "A", address)

    def _zone(self, i: int) -> tuple[dns.name.Name, tuple[Record, ...]]:
        origin = dns.name.from_text(f"wz{i}", origin=ADDED_ZONES)
        return origin, (
            make_record(origin, 300, "SOA", f"ns.{origin} hostmaster.{origin} 1 3600 600 "
                                            "86400 300"),
            make_record(origin, 300, "NS", f"ns.{origin}"),
            make_record(dns.name.from_text("ns", origin=origin), 300, "A", "192.0.2.53"),
            make_record(origin, 300, "A", f"192.0.2.{i % 250 + 1}"))

    def _stand_in(self, i: int, label: str) -> Change:
        zone = self.zones[i % len(self.zones)]
        return Change(ADD, zone, make_record(dns.name.from_text(f"w{i}-{label}.wr", origin=zone),
                                             300, "TXT", f'"{label}"'))

    def next(self) -> Change:
        """The cycle's next change (not yet applied)."""
        i, step = divmod(self.count, len(self.kinds))
        kind = self.kinds[step]
        zone = self.zones[i % len(self.zones)]
        if kind == ADD:
            return Change(ADD, zone, self._record(i))
        if kind == CHANGE:
            return Change(CHANGE, zone, self._record(i, changed=True), old=self._record(i))
        if kind == ADD_ZONE:
            origin, records = self._zone(i)
            return Change(ADD_ZONE, origin, zone_records=records)
        if kind == DELETE:
            held = next(((z, r) for j, z, r in self._records
                         if j < i and (r.owner, r.rdtype) not in self._pinned), None)
            return self._stand_in(i, "first") if held is None else Change(DELETE, *held)
        origin = next((z for j, z in self._added_zones
                       if j < i and (z, "SOA") not in self._pinned), None)
        return self._stand_in(i, "second") if origin is None else Change(DELETE_ZONE, origin)

    def done(self, change: Change, committed_ns: int) -> None:
        i = self.count // len(self.kinds)
        self.count += 1
        if change.kind == CHANGE:
            self._records.append((i, change.zone, change.record))
        elif change.kind == DELETE:
            self._records = [e for e in self._records if e[1:] != (change.zone, change.record)]
        elif change.kind == ADD_ZONE:
            self._added_zones.append((i, change.zone))
        elif change.kind == DELETE_ZONE:
            self._added_zones = [e for e in self._added_zones if e[1] != change.zone]
        self.committed_ns.append(committed_ns)
        self.changes.append(change)  # last: a reader of both lists never sees it half-added

    def pin(self, index: int) -> None:
        """Keep the question of the change at index from being deleted (the sampler
        follows it); called on the writer's thread, between two writes."""
        self._pinned.add(probe(self.changes[index]))

    def unpin(self, index: int) -> None:
        self._pinned.discard(probe(self.changes[index]))

    def superseding(self, index: int) -> list[Change]:
        """The change at index and the later adds and changes committed on the same question
        within the cycle's reach (a record's add and change are two writes apart): an
        answer showing one of those shows that the sampled one was made. (A later delete
        does not count: the state before the sampled add looks the same, which is why a
        followed question is pinned.)"""
        question = probe(self.changes[index])
        later = self.changes[index + 1:index + 1 + SUPERSEDE_REACH]
        return [self.changes[index], *(c for c in later
                                       if c.kind in (ADD, CHANGE) and probe(c) == question)]


def shows(change: Change, response: dns.message.Message) -> bool:
    """Does this answer show the change made?"""
    rcode = response.rcode()
    authoritative = bool(response.flags & dns.flags.AA)
    if change.kind == ADD_ZONE:
        return rcode == NOERROR and authoritative and bool(response.answer)
    if change.kind == DELETE_ZONE:
        return not (rcode == NOERROR and authoritative)
    answer = _rdatas(change, response)
    if change.added is not None:
        return _rdata(change.added) in answer
    assert change.removed is not None
    return rcode in (NOERROR, NXDOMAIN) and authoritative \
        and _rdata(change.removed) not in answer


def probe(change: Change) -> tuple[dns.name.Name, str]:
    """The question that shows a change: its owner and type, or the added zone's SOA."""
    if change.record is None:
        return change.zone, "SOA"
    return change.record.owner, change.record.rdtype


def _rdata(record: Record) -> dns.rdata.Rdata:
    return dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.from_text(record.rdtype),
                               record.rdata)


def _rdatas(change: Change, response: dns.message.Message) -> set[dns.rdata.Rdata]:
    owner, rdtype = probe(change)
    wanted = dns.rdatatype.from_text(rdtype)
    return {rd for rrset in response.answer if rrset.name == owner and rrset.rdtype == wanted
            for rd in rrset}


class ServerFollow:
    """What a server must be told after a store write, as its kind says
    (ServerKind.tell_of_write): nothing for a database or a store it reads live;
    native named, NSD, Knot and PowerDNS's bind backend load zone files on command."""

    def __init__(self, kind: ServerKind, server: DnsServer, target: Any) -> None:
        self.kind = kind
        self.server = server
        self.target = target

    def __call__(self, change: Change) -> None:
        self.kind.tell_of_write(self.server, self.target, change)


def not_writable(server: ServerKind) -> str | None:
    """Why the server cannot be measured under writes (one line); None: it can."""
    if server.needs_reload and not server.told_of_writes:
        return (f"{server.name} reads its store once (at start or reload): a write is "
                "seen only after a reload, which is a restart of its data, not a write")
    loader = server.loader()
    if type(loader).writer is Loader.writer:
        return f"the {server.store} store takes no writes here: {loader.no_writes}"
    return None


# --- results -----------------------------------------------------------------------------


@dataclass
class StepRun:
    """One step of one repeat."""

    rate: int
    repeat: int
    seconds: float
    sent: int = 0
    answered: int = 0  # NOERROR or NXDOMAIN
    lost: int = 0
    p50_us: float | None = None
    p99_us: float | None = None
    p999_us: float | None = None
    writes: int = 0
    write_errors: int = 0
    first_error: str | None = None
    writer_cpu_s: float = 0.0
    db_cpu_s: float | None = None
    server_cpu_s: float | None = None
    # The wall time the two CPU figures cover (None in runs before it was recorded, whose
    # meters ran on past the step while the sampler finished).
    cpu_window_s: float | None = None
    visibility_ms: list[float] = field(default_factory=list)  # the samples shown
    not_seen: int = 0
    skipped: int = 0
    # The staleness check (0 in runs before it): the sampler's answers, those that missed a
    # write committed more than the bound before they were asked, the sampled writes that
    # got any such answer.
    answers_checked: int = 0
    stale_answers: int = 0
    stale_writes: int = 0
    # dnsperf's run beside the prober when the read rate was above PROBER_MAX_QPS (None: the
    # prober alone offered the reads, as in every run before dnsperf did).
    bulk: dnsperf.DnsperfRun | None = None

    @property
    def reads_sent(self) -> int:
        """Reads sent in the step: the prober's and dnsperf's."""
        return self.sent + (self.bulk.queries_sent if self.bulk else 0)

    @property
    def reads_answered(self) -> int:
        """Reads answered NOERROR or NXDOMAIN: the prober's and dnsperf's."""
        if self.bulk is None:
            return self.answered
        return self.answered + sum(self.bulk.rcodes.get(code, 0)
                                   for code in ("NOERROR", "NXDOMAIN"))

    @property
    def reads_lost(self) -> int:
        return self.lost + (self.bulk.queries_lost if self.bulk else 0)

    @property
    def read_loss(self) -> float | None:
        """The share of the reads sent that were lost (None: none sent)."""
        return self.reads_lost / self.reads_sent if self.reads_sent else None

    @property
    def qps(self) -> float:
        return self.reads_answered / self.seconds

    @property
    def metered_s(self) -> float:
        return self.cpu_window_s or self.seconds

    @property
    def cpu_us_per_read(self) -> float | None:
        """The server's and the database's CPU per read answered, in us (None: a run before the
        CPU window was the step's, or no read answered)."""
        if self.cpu_window_s is None or self.server_cpu_s is None:
            return None
        return us_per_query(self.server_cpu_s + (self.db_cpu_s or 0.0), self.reads_answered)

    @property
    def write_rate(self) -> float:
        return self.writes / self.seconds


@dataclass
class Step:
    """A step over its repeats: each figure a median with its interval (stats.py), the
    visibility samples pooled."""

    rate: int
    qps: Interval | None
    loss: Interval | None
    p50_us: Interval | None
    p99_us: Interval | None
    p999_us: Interval | None
    write_rate: Interval | None
    db_cpu_share: Interval | None  # of one core
    server_cpu_share: Interval | None  # the DNS server's, of one core
    # The DNS server's and the database's CPU per read answered: what reads cost the server
    # side, writes included, whether or not the prober kept up with its schedule.
    cpu_us_per_read: Interval | None
    writer_cpu_share: Interval | None  # the writer thread's, of one core
    writes: int
    write_errors: int
    visible_p50_ms: float | None
    visible_p99_ms: float | None
    visible_max_ms: float | None
    sampled: int
    not_seen: int
    skipped: int
    answers_checked: int = 0
    stale_answers: int = 0
    stale_writes: int = 0


@dataclass
class ServerWrites:
    server: str
    status: str = "ok"
    error: str | None = None
    read_qps: float = 0.0
    runs: list[StepRun] = field(default_factory=list)
    checked: int = 0  # questions asked of it and of native BIND after the run
    differing: list[str] = field(default_factory=list)  # unexplained differences

    def steps(self) -> list[Step]:
        rates = list(dict.fromkeys(run.rate for run in self.runs))
        return [summarize(rate, [r for r in self.runs if r.rate == rate]) for rate in rates]

    def reads_sent(self) -> float | None:
        """Reads sent per second (the prober's and dnsperf's), the median over every step run
        (None: no run kept its count)."""
        rates = [r.reads_sent / r.seconds for r in self.runs if r.reads_sent and r.seconds > 0]
        return statistics.median(rates) if rates else None

    def read_loss(self) -> float | None:
        """The share of the reads sent that were lost, the median over every step run (None:
        no run kept its count)."""
        shares = [r.read_loss for r in self.runs if r.read_loss is not None]
        return statistics.median(shares) if shares else None

    def bulk_reads(self) -> bool:
        """dnsperf offered part of the reads beside the prober."""
        return any(r.bulk is not None for r in self.runs)

    def prober_short(self) -> bool:
        """The load generators sent under capacity's OFFERED_SHARE of the reads asked (the
        prober alone, asked for each server's capacity breaking point, sent 5.6-15k reads/s
        beside the server on the 2-vCPU Intel VM: writes-at-max-2026-11-28); whether they or
        the server set the pace, the read loss says (bench/report/writes.py)."""
        sent = self.reads_sent()
        return sent is not None and sent < OFFERED_SHARE * self.read_qps


@dataclass
class Writes:
    """results.json's "writes" section."""

    method: str
    profile: str
    dataset: str
    step_s: float
    repeats: int
    rates: list[int] = field(default_factory=list)
    via: str = VIA_STORE
    servers: list[ServerWrites] = field(default_factory=list)
    # The staleness check's bound in ms (None: a run before the check).
    stale_bound_ms: float | None = None

    json_absent: ClassVar[dict[str, Any]] = {"profile": "", "dataset": ""}  # when left out


# results.json's "writes": written by `writes` only.
SECTION = Section("writes", Writes | None)


def summarize(rate: int, runs: Sequence[StepRun]) -> Step:
    def over(values: Callable[[StepRun], float | None]) -> Interval | None:
        found = [v for v in (values(r) for r in runs) if v is not None]
        return median_interval(found)

    pooled = sorted(ms for run in runs for ms in run.visibility_ms)
    return Step(
        rate=rate, qps=over(lambda r: r.qps),
        loss=over(lambda r: r.read_loss),
        p50_us=over(lambda r: r.p50_us), p99_us=over(lambda r: r.p99_us),
        p999_us=over(lambda r: r.p999_us), write_rate=over(lambda r: r.write_rate),
        db_cpu_share=over(lambda r: None if r.db_cpu_s is None else r.db_cpu_s / r.metered_s),
        server_cpu_share=over(lambda r: None if r.server_cpu_s is None
                              else r.server_cpu_s / r.metered_s),
        cpu_us_per_read=over(lambda r: r.cpu_us_per_read),
        writer_cpu_share=over(lambda r: r.writer_cpu_s / r.seconds if r.rate != 0 else None),
        writes=sum(r.writes for r in runs), write_errors=sum(r.write_errors for r in runs),
        visible_p50_ms=_rank(pooled, 50), visible_p99_ms=_rank(pooled, 99),
        visible_max_ms=pooled[-1] if pooled else None, sampled=len(pooled),
        not_seen=sum(r.not_seen for r in runs), skipped=sum(r.skipped for r in runs),
        answers_checked=sum(r.answers_checked for r in runs),
        stale_answers=sum(r.stale_answers for r in runs),
        stale_writes=sum(r.stale_writes for r in runs))


def _rank(ordered: list[float], percent: float) -> float | None:
    if not ordered:
        return None
    return ordered[max(1, math.ceil(percent / 100 * len(ordered))) - 1]


# --- one step ----------------------------------------------------------------------------


class Sampler(threading.Thread):
    """Takes a committed change and asks the server until an answer shows it, and a few times
    more; holds every answer to the bound (stale_bound_ms)."""

    def __init__(self, server: DnsServer, cycle: WriteCycle, stop: threading.Event, *,
                 stale_bound_ms: float = STALE_BOUND_MS,
                 visible_timeout_s: float = VISIBLE_TIMEOUT_S) -> None:
        super().__init__(name="visibility sampler", daemon=True)
        self.server = server
        self.cycle = cycle
        self.stop = stop
        self.bound_ns = stale_bound_ms * 1e6
        self.visible_timeout_s = visible_timeout_s
        self.answers = 0
        self.stale_answers = 0
        self.stale_writes = 0
        self.pending: queue.Queue[int] = queue.Queue()
        # Set while no write is being followed: an offer is taken only then, so that no
        # sample waits (its delay would count the wait).
        self.idle = threading.Event()
        self.idle.set()
        self.delays_ms: list[float] = []
        self.not_seen = 0
        self.skipped = 0

    def offer(self, index: int) -> None:
        """Sample the cycle's change at index (just committed), unless the sampler is still
        following an earlier one (then it is counted as skipped)."""
        if self.idle.is_set():
            self.idle.clear()
            self.cycle.pin(index)
            self.pending.put(index)
        else:
            self.skipped += 1

    def run(self) -> None:
        while not (self.stop.is_set() and self.pending.empty()):
            try:
                index = self.pending.get(timeout=0.05)
            except queue.Empty:
                continue
            committed_ns = self.cycle.committed_ns[index]
            stale_before = self.stale_answers
            seen_ns = self._first_showing(index, committed_ns)
            if seen_ns is None:
                self.not_seen += 1
            else:
                self.delays_ms.append((seen_ns - committed_ns) / 1e6)
                self._confirm(index, committed_ns)
            if self.stale_answers > stale_before:
                self.stale_writes += 1
            self.cycle.unpin(index)
            self.idle.set()

    def _ask(self, index: int, committed_ns: int) -> bool | None:
        """One answer to the change's question: does it show the change (None: no answer)?
        Checked against the bound: one that does not, asked more than the bound after the
        commit, is stale."""
        qname, rdtype = probe(self.cycle.changes[index])
        query = non_recursive_query(qname, rdtype, None, False)
        sent_ns = time.monotonic_ns()
        try:
            response = dns.query.udp(query, self.server.host, port=self.server.port,
                                     timeout=1.0)
        except (dns.exception.Timeout, OSError):
            return None
        shown = any(shows(c, response) for c in self.cycle.superseding(index))
        self.answers += 1
        if not shown and sent_ns - committed_ns > self.bound_ns:
            self.stale_answers += 1
        return shown

    def _first_showing(self, index: int, committed_ns: int) -> int | None:
        deadline = committed_ns + self.visible_timeout_s * 1e9
        while time.monotonic_ns() < deadline:
            if self._ask(index, committed_ns):
                return time.monotonic_ns()
            time.sleep(POLL_S)
        return None

    def _confirm(self, index: int, committed_ns: int) -> None:
        """CONFIRM_ASKS more answers after the first that showed the change."""
        for _ in range(CONFIRM_ASKS):
            time.sleep(POLL_S)
            self._ask(index, committed_ns)


class Writer(threading.Thread):
    """Applies the cycle's changes at `rate` a second (CEILING: unpaced) until stopped."""

    def __init__(self, store: StoreWriter, follow: Callable[[Change], None], cycle: WriteCycle,
                 rate: int, every: int, sampler: Sampler, stop: threading.Event) -> None:
        super().__init__(name="writer", daemon=True)
        self.store, self.follow, self.cycle = store, follow, cycle
        self.rate, self.every, self.sampler, self.stop = rate, every, sampler, stop
        self.writes = 0
        self.errors = 0
        self.first_error: str | None = None
        self.cpu_s = 0.0

    def run(self) -> None:
        start_cpu = time.thread_time()
        start = time.monotonic()
        while not self.stop.is_set() and not self._failing():
            if self.rate != CEILING:
                # On a schedule of attempts: a failed write takes its slot too.
                wait = start + (self.writes + self.errors) / self.rate - time.monotonic()
                if wait > 0 and self.stop.wait(wait):
                    break
            change = self.cycle.next()
            try:
                self.store.apply(change)
            except Exception as exc:  # a database error: counted, the step goes on
                self._failed(change, exc)
                self.cycle.count += 1  # past it: the cycle's next change does not need it
                continue
            self.cycle.done(change, time.monotonic_ns())
            self.writes += 1
            try:
                self.follow(change)
            except Exception as exc:  # in the store, but the server was not told (rndc)
                self._failed(change, exc)
                continue
            if self.writes % self.every == 0:
                self.sampler.offer(len(self.cycle.changes) - 1)
        self.cpu_s = time.thread_time() - start_cpu

    def _failed(self, change: Change, exc: Exception) -> None:
        self.errors += 1
        self.first_error = self.first_error or f"{change.text()}: {exc}"

    def _failing(self) -> bool:
        """More than 100 failures and more failures than writes: the store is not taking
        them, and the step ends its writing."""
        return self.errors > 100 and self.errors > self.writes


def run_step(loaded: LoadedStore, server: DnsServer, store: StoreWriter,
             follow: Callable[[Change], None], cycle: WriteCycle, rate: int, repeat: int, *,
             read_qps: float, step_s: float, query_file: Path, run_dir: Path,
             timeout_s: float, stale_bound_ms: float = STALE_BOUND_MS) -> StepRun:
    """One step: the read load, the writer and the sampler for step_s."""
    # At the ceiling the rate is not known beforehand: every write is offered, and the
    # sampler takes the next one each time it is free.
    every = 1 if rate in (0, CEILING) else max(1, round(rate * step_s / SAMPLES_PER_STEP))
    stop = threading.Event()
    sampler = Sampler(server, cycle, stop, stale_bound_ms=stale_bound_ms)
    writer = Writer(store, follow, cycle, rate, every, sampler, stop)
    db_meter = CpuMeter(loaded.database_pids()) if loaded.accounts_database else None
    server_meter = CpuMeter(server.pids())
    probing, bulk_qps = read_split(read_qps)
    recorder = Recorder(server.host, server.port, query_file,
                        run_dir / f"recording-{rate_text(rate).replace('/', '')}-{repeat}.txt",
                        qps=probing, seconds=step_s, timeout=timeout_s)
    meters = [m for m in (db_meter, server_meter) if m is not None]
    with bulk_reads(server, query_file, bulk_qps, step_s, timeout_s) as bulk, recorder:
        started = time.monotonic()
        for meter in meters:
            meter.start()
        sampler.start()
        if rate != 0:
            writer.start()
        try:
            time.sleep(step_s)
        finally:
            stop.set()
            # The CPU window ends with the step: the sampler may follow its last write for
            # up to VISIBLE_TIMEOUT_S more, polling every POLL_S, and that is not the step's
            # load (metered to the joins, a 3-s step of pg at 100 writes/s showed named at
            # 138% of a core: writes-at-max-pg-fs-2026-11-26).
            for meter in meters:
                meter.stop()
            cpu_window_s = time.monotonic() - started
            if rate != 0:
                writer.join()
            sampler.join()
        recording = recorder.wait()
        bulk_run = None if bulk is None else bulk.wait(step_s + timeout_s + 30)
    run = StepRun(rate, repeat, step_s, writes=writer.writes, write_errors=writer.errors,
                  first_error=writer.first_error, writer_cpu_s=writer.cpu_s,
                  visibility_ms=sampler.delays_ms, not_seen=sampler.not_seen,
                  skipped=sampler.skipped, cpu_window_s=cpu_window_s,
                  answers_checked=sampler.answers, stale_answers=sampler.stale_answers,
                  stale_writes=sampler.stale_writes,
                  server_cpu_s=server_meter.seconds,
                  db_cpu_s=None if db_meter is None else db_meter.seconds, bulk=bulk_run)
    _read_figures(run, recording)
    return run


def read_split(read_qps: float) -> tuple[float, float]:
    """(the prober's, dnsperf's) reads per second of a step offering read_qps."""
    probing = min(read_qps, PROBER_MAX_QPS)
    return probing, read_qps - probing


@contextmanager
def bulk_reads(server: DnsServer, query_file: Path, qps: float, step_s: float,
               timeout_s: float) -> Iterator[dnsperf.MergedLoad | None]:
    """dnsperf offering `qps` reads a second for the step (sending when this returns), as
    capacity's steps offer theirs; None when the prober offers every read."""
    if qps <= 0:
        yield None
        return
    with dnsperf.start_background(
            server.host, server.port, query_file, duration=step_s,
            queue_depth=capacity.outstanding_for(qps), timeout=timeout_s, rate=qps,
            extra=capacity.offered_load_options()) as load:
        yield load


def _read_figures(run: StepRun, recording: Recording) -> None:
    latencies = sorted(lat for rcode, lat in zip(recording.rcodes, recording.latencies_ns,
                                                 strict=True) if rcode != LOST)
    run.sent = len(recording.rcodes)
    run.lost = sum(1 for rcode in recording.rcodes if rcode == LOST)
    run.answered = sum(1 for rcode in recording.rcodes if rcode in (NOERROR, NXDOMAIN))
    if latencies:
        run.p50_us = nearest_rank(latencies, 50) / 1000
        run.p99_us = nearest_rank(latencies, 99) / 1000
        run.p999_us = nearest_rank(latencies, 99.9) / 1000


# --- one server --------------------------------------------------------------------------


def measure_server(kind: ServerKind, stream: Callable[[], Iterator[Zone]], query_file: Path,
                   run_dir: Path, *, rates: Sequence[int], step_s: float, repeats: int,
                   read_qps: float, threads: int, timeout_s: float, via: str = VIA_STORE,
                   stale_bound_ms: float = STALE_BOUND_MS,
                   progress: Callable[[str], None] = print) -> ServerWrites:
    """The server through every step and repeat, then its answers for every changed name
    against native BIND's that got the same changes; a failure is recorded, not raised."""
    result = ServerWrites(kind.name, read_qps=read_qps)
    reason = not_writable(kind) if via == VIA_STORE else not_updatable(kind)
    if reason is not None:
        result.status, result.error = "n/a", reason
        progress(f"{kind.name}: n/a: {reason}")
        return result
    zones = _zone_names(stream)
    cycle = WriteCycle(zones, zone_kinds=via == VIA_STORE)
    try:
        with loaded_store(kind, stream, run_dir / kind.name) as loaded, \
                _server(loaded, zones, via, run_dir / kind.name, threads) as server, \
                _writer(loaded, server, via) as store:
            follow = ServerFollow(loaded.server, server, loaded.target) if via == VIA_STORE \
                else _told_already
            for repeat in range(repeats):
                for rate in round_order(list(rates), repeat):
                    run = run_step(loaded, server, store, follow, cycle, rate, repeat,
                                   read_qps=read_qps, step_s=step_s, query_file=query_file,
                                   run_dir=run_dir / kind.name, timeout_s=timeout_s,
                                   stale_bound_ms=stale_bound_ms)
                    result.runs.append(run)
                    progress(f"{kind.name}: {rate_text(rate)} writes, repeat {repeat + 1}: "
                             f"{run.qps:,.0f} reads/s answered, {run.lost} lost, "
                             f"{run.write_rate:,.1f} writes/s, "
                             f"{run.stale_writes} sampled stale past the bound"
                             + (f", {run.write_errors} failed ({run.first_error})"
                                if run.write_errors else ""))
            _check_against_native(result, server, kind, stream, cycle.changes,
                                  run_dir / kind.name / "native-reference", threads,
                                  serials_masked=via == VIA_UPDATE)
    except UserError as exc:
        result.status, result.error = "failed", str(exc)
        progress(f"{kind.name} failed: {exc}")
    return result


def _server(loaded: LoadedStore, zones: Sequence[dns.name.Name], via: str, run_dir: Path,
            threads: int) -> DnsServer:
    """The server (not started): over its store, and for updates taking them unsigned from
    loopback in the zones written (over TCP: a DLZ driver takes unsigned updates only
    there)."""
    if via == VIA_STORE:
        return loaded.dns_server(run_dir, threads=threads)
    access = UpdateAccess(tuple(zones), (), TsigKey.generate())
    return loaded.server.build_updatable(loaded.target, run_dir / f"updated-{threads}", access,
                                         threads=threads, connections=threads)


def _writer(loaded: LoadedStore, server: DnsServer, via: str) -> StoreWriter:
    if via == VIA_STORE:
        return loaded.loader.writer(loaded.target)
    return UpdateWriter(server.host, server.port)


def _told_already(change: Change) -> None:
    """An update's server wrote the change itself: nothing to tell it."""


def not_updatable(server: ServerKind) -> str | None:
    """Why the server cannot be measured under RFC 2136 updates (one line); None: it can."""
    if server.takes_updates():
        return None
    return f"{server.name} takes no RFC 2136 updates in this suite (docs/method/updates.md)"


def _zone_names(stream: Callable[[], Iterator[Zone]], most: int = 100) -> list[dns.name.Name]:
    """The first zones of the data set (the writes' targets), apexes that own an SOA."""
    names = []
    for zone in stream():
        if any(r.rdtype == "SOA" and r.owner == zone.origin for r in zone.records):
            names.append(zone.origin)
        if len(names) >= most:
            break
    return names


def changed_questions(changes: Sequence[Change]) -> list[tuple[dns.name.Name, str]]:
    """What to ask after the run: every written owner (A, TXT), its parent (the empty
    non-terminal, A), every zone written (SOA, NS, A)."""
    questions: dict[tuple[dns.name.Name, str], None] = {}
    for change in changes:
        if change.record is not None:
            owner = change.record.owner
            questions[(owner, change.record.rdtype)] = None
            questions[(owner.parent(), "A")] = None
        else:
            for rdtype in ("SOA", "NS", "A"):
                questions[(change.zone, rdtype)] = None
    return list(questions)


def checked_changes(changes: Sequence[Change], most: int = CHECKED_CHANGES) -> list[Change]:
    """The changes whose names are asked after the run: the last most/2, and as many spread
    evenly over the earlier ones (a run at the ceiling makes tens of thousands)."""
    half = most // 2
    recent, earlier = changes[-half:], changes[:max(0, len(changes) - half)]
    step = max(1, math.ceil(len(earlier) / half))
    return [*earlier[::step], *recent]


def final_zones(stream: Callable[[], Iterator[Zone]],
                changes: Sequence[Change]) -> Callable[[], Iterator[Zone]]:
    """The data set as the changes leave it: each written zone as the model makes it
    (Change.applied_to), deleted zones left out, added ones at the end."""
    written: dict[dns.name.Name, Zone | None] = {}
    originals = {change.zone for change in changes}
    held = {zone.origin: zone for zone in stream() if zone.origin in originals}
    for change in changes:
        before = written[change.zone] if change.zone in written else held.get(change.zone)
        written[change.zone] = change.applied_to(before)

    def zones() -> Iterator[Zone]:
        for zone in stream():
            if zone.origin not in written:
                yield zone
            elif (after := written[zone.origin]) is not None:
                yield after
        yield from (z for origin, z in written.items() if origin not in held and z is not None)

    return zones


def _check_against_native(result: ServerWrites, server: DnsServer, kind: ServerKind,
                          stream: Callable[[], Iterator[Zone]], changes: Sequence[Change],
                          run_dir: Path, threads: int, *, serials_masked: bool) -> None:
    """Native BIND over the data set as the same changes leave it, started afresh: the
    changed names' answers must be the same (up to the server's known classes,
    bench/verify; with serials_masked, every SOA serial aside: a server that took the
    changes as updates raised its serials, the reference loaded from files did not)."""
    final = final_zones(stream, changes)
    with loaded_store(REFERENCE, final, run_dir) as reference:
        with reference.dns_server(run_dir, threads=threads) as native:
            facts = ZoneFacts.of(final())
            for qname, rdtype in changed_questions(checked_changes(changes)):
                query = (qname, rdtype)
                pair = compare_answers(query, ask(native, query), ask(server, query))
                if pair is not None and serials_masked and \
                        serial_masked(pair[0]) == serial_masked(pair[1]):
                    pair = None
                result.checked += 1
                if pair is None:
                    continue
                if classify(query, pair[0], pair[1], facts, kind.known_classes()) == UNEXPLAINED:
                    result.differing.append(f"{qname} {rdtype}: native {pair[0].describe()} "
                                            f"| {kind.name} {pair[1].describe()}")
