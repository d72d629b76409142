"""Instructions per answered query: the cost of a query that does not depend on the machine's
mood (docs/method/instructions.md).

named (and, where it can, the database server behind it) runs under Valgrind's callgrind,
which counts every instruction the process executes (Ir). The query window is bracketed with
`callgrind_control --dump`, which writes the counters since the previous dump and zeroes them:

    start, warm-up (the query set once) -> dump | idle W s -> dump | the query set -> dump

so each dump holds exactly one window, taken from the running process without a restart or
a second process. Instructions per answered query =
    (Ir of the query window - Ir of the idle window x query seconds / idle seconds) / answered.

Queries go one at a time, each after the previous answer: the path every query takes (one
wake-up, one receive, one send) is then the same however fast the machine runs, where a rate
or a queue depth would batch more or fewer queries per wake-up as the machine speeds up or
slows down. Every repeat is a fresh named (its own start, hash seeds and memory layout): two
repeats agreeing is what makes the figure one to compare across boots and machines.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import dns.exception
import dns.query

from base.errors import UserError
from base.process import as_user, give_to_service_user, service_environment, service_user
from bench.measure.serial import Derived, Section
from bench.measure.serving import LoadedStore
from servers import DnsServer, ServerKind, non_recursive_query

METHOD = ("callgrind (Ir), counters dumped and zeroed by callgrind_control at each bracket; "
          "idle window subtracted in proportion to the query window's length; one query at a "
          "time; a fresh named per repeat")
# Reruns within this relative difference agree (issue 26: "reruns must agree within 1%").
AGREEMENT_TARGET = 0.01
# Per query: a query through a database that itself runs under callgrind takes tens of
# milliseconds; a lost reply costs this once and is counted as unanswered.
QUERY_TIMEOUT_S = 10.0
# A dump takes about 0.25 s here (vgdb wakes the process blocked in a system call).
_DUMP_TIMEOUT_S = 60.0
_TOTALS = re.compile(r"^totals:\s+(\d+)", re.M)

# Which database servers run under callgrind, and why the others do not, is each database's
# (Database.profiled_program, not_profiled).
NO_DATABASE_SERVER = ("none: named reads its files itself (natively or through the DLZ "
                      "driver), counted in named's figure")


@dataclass(frozen=True)
class QuerySet:
    """The fixed queries every server answers: (name, TYPE) pairs, with the hash that says
    two runs asked the same."""

    queries: tuple[tuple[str, str], ...]

    @property
    def sha256(self) -> str:
        text = "".join(f"{name} {rdtype}\n" for name, rdtype in self.queries)
        return hashlib.sha256(text.encode("ascii")).hexdigest()

    def __len__(self) -> int:
        return len(self.queries)


@dataclass
class Counted:
    """One process's (or process tree's) instructions in the idle and the query window."""

    idle_ir: int
    query_ir: int


@dataclass
class Repeat:
    """One fresh named's windows: how long each lasted, what was answered, what was counted."""

    sent: int
    answered: int
    idle_seconds: float
    query_seconds: float
    named: Counted
    database: Counted | None = None

    # The per-query figures, written for readers of the file.
    json_derived: ClassVar[Derived] = {
        "named_per_query": lambda r: r.named_per_query,
        "database_per_query": lambda r: r.database_per_query,
        "total_per_query": lambda r: r.total_per_query}

    def per_query(self, counted: Counted | None) -> float | None:
        """Instructions per answered query of one process: the query window less the idle
        window's rate over the query window's length."""
        if counted is None or not self.answered or self.idle_seconds <= 0:
            return None
        idle_share = counted.idle_ir * self.query_seconds / self.idle_seconds
        return (counted.query_ir - idle_share) / self.answered

    @property
    def named_per_query(self) -> float | None:
        return self.per_query(self.named)

    @property
    def database_per_query(self) -> float | None:
        return self.per_query(self.database)

    @property
    def total_per_query(self) -> float | None:
        named, database = self.named_per_query, self.database_per_query
        if named is None:
            return None
        return named + (database or 0.0)


def mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known and len(known) == len(values) else None


def spread(values: Sequence[float | None]) -> float | None:
    """The repeats' agreement: (max - min) / min; None with fewer than two figures."""
    known = [v for v in values if v is not None]
    if len(known) < 2 or len(known) != len(values) or min(known) <= 0:
        return None
    return (max(known) - min(known)) / min(known)


@dataclass
class ServerInstructions:
    """Every repeat of one server, and what its database figure is (or why there is none)."""

    server: str
    database: str  # the process counted ("slapd"), or why none is
    database_counted: bool = False
    status: str = "ok"  # "ok" or "failed"
    error: str | None = None
    repeats: list[Repeat] = field(default_factory=list)

    json_derived: ClassVar[Derived] = {
        "agreement": lambda s: {w: s.agreement(w) for w in ("named", "database", "total")}}

    def figures(self, which: str) -> list[float | None]:
        """Per-repeat instructions per query: which is "named", "database" or "total"."""
        return [getattr(r, f"{which}_per_query") for r in self.repeats]

    def mean(self, which: str) -> float | None:
        return mean(self.figures(which)) if self.repeats else None

    def agreement(self, which: str) -> float | None:
        return spread(self.figures(which))

    @property
    def unanswered(self) -> int:
        return sum(r.sent - r.answered for r in self.repeats)


@dataclass
class Instructions:
    """results.json's "instructions" section: how it was counted, over what, every server."""

    method: str
    valgrind: str
    queries: int
    queries_sha256: str
    idle_seconds: float
    dataset: str
    servers: list[ServerInstructions] = field(default_factory=list)

    json_absent: ClassVar[dict[str, Any]] = {"dataset": ""}  # when left out

    def server(self, name: str) -> ServerInstructions | None:
        return next((s for s in self.servers if s.server == name), None)


# results.json's "instructions": written by `instructions` only.
SECTION = Section("instructions", Instructions | None)


# --- counting --------------------------------------------------------------------------------


def valgrind_version() -> str:
    """`valgrind --version` ("valgrind-3.19.0"); a missing valgrind stops the command."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise UserError("valgrind (with callgrind_control) is not installed: run `make deps`")
    out = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def callgrind_wrapper(out_dir: Path) -> list[str]:
    """The prefix that runs a process under callgrind, its dumps in out_dir (one file per
    process and dump: callgrind.out.<pid>.<n>; the directory made the service user's, whom
    the servers run as). Counters only: no cache simulation, so the figure is Ir and the
    slowdown the least callgrind has."""
    give_to_service_user(out_dir)
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_dir}/callgrind.out.%p",
            f"--vgdb-prefix={_vgdb_prefix(out_dir)}"]


def _vgdb_prefix(out_dir: Path) -> str:
    """Where Valgrind's gdbserver keeps its FIFOs for callgrind_control: out_dir, not /tmp,
    where a FIFO left by a killed process of another user under a pid now reused could stand
    in the way."""
    return f"{out_dir}/vgdb"


class Callgrind:
    """The processes of one server running under callgrind, their counters read at brackets.

    `pids` lists them; each dump sums the totals of every process's new dump file.
    """

    def __init__(self, out_dir: Path, pids: Callable[[], list[int]]) -> None:
        self.out_dir = out_dir
        self.pids = pids
        self._dumps = 0

    def dump(self) -> int:
        """Dump and zero every process's counters; the instructions since the last dump."""
        self._dumps += 1
        label = f"bracket-{self._dumps}"
        total = 0
        for pid in self.pids():
            before = set(self.out_dir.glob(f"callgrind.out.{pid}.*"))
            try:
                # As the servers' user, whom the process runs as: vgdb run as root reaches
                # it (ptrace) but then waits for its answer for ever (Valgrind 3.19).
                done = subprocess.run(["callgrind_control",
                                       f"--vgdb-prefix={_vgdb_prefix(self.out_dir)}",
                                       f"--dump={label}", str(pid)],
                                      capture_output=True, text=True, timeout=_DUMP_TIMEOUT_S,
                                      env=service_environment(), **as_user(service_user()))
            except subprocess.TimeoutExpired:
                raise UserError(f"callgrind_control did not dump process {pid} within "
                                f"{_DUMP_TIMEOUT_S:g} s") from None
            if done.returncode != 0:
                raise UserError(f"callgrind_control could not dump process {pid}: "
                                f"{(done.stdout + done.stderr).strip()[:300]}")
            new = set(self.out_dir.glob(f"callgrind.out.{pid}.*")) - before
            total += sum(_totals(path) for path in new)
        return total


def _totals(path: Path) -> int:
    found = _TOTALS.search(path.read_text(errors="replace"))
    if found is None:
        raise UserError(f"{path}: no totals line (not a callgrind dump?)")
    return int(found.group(1))


def ask_each(named: DnsServer, query_set: QuerySet) -> int:
    """Every query once, one at a time, each waiting for its answer; the answers received."""
    answered = 0
    for qname, rdtype in query_set.queries:
        query = non_recursive_query(qname, rdtype)
        try:
            dns.query.udp(query, named.host, port=named.port, timeout=QUERY_TIMEOUT_S)
        except (dns.exception.Timeout, OSError):
            continue
        answered += 1
    return answered


def _named_pids(named: DnsServer) -> Callable[[], list[int]]:
    # The valgrind process is named itself (valgrind execs the tool in place); the server's
    # own pid is the one to signal.
    return lambda: [named.main_pid()]


def one_repeat(named: DnsServer, database: Callgrind | None, query_set: QuerySet,
               idle_seconds: float) -> Repeat:
    """Warm-up, idle window, query window on a named already started under callgrind."""
    counters = Callgrind(named.run_dir / "callgrind", _named_pids(named))
    ask_each(named, query_set)  # warm-up: caches, connections, first-touch allocations
    _dump_both(counters, database)  # zero both: what follows is the idle window
    start = time.monotonic()
    time.sleep(idle_seconds)
    idle_end = time.monotonic()
    named_idle, db_idle = _dump_both(counters, database)
    query_start = time.monotonic()
    answered = ask_each(named, query_set)
    query_end = time.monotonic()
    named_queries, db_queries = _dump_both(counters, database)
    return Repeat(sent=len(query_set), answered=answered, idle_seconds=idle_end - start,
                  query_seconds=query_end - query_start,
                  named=Counted(named_idle, named_queries),
                  database=None if database is None else Counted(db_idle or 0, db_queries or 0))


def _dump_both(named: Callgrind, database: Callgrind | None) -> tuple[int, int | None]:
    return named.dump(), None if database is None else database.dump()


def named_under_callgrind(loaded: LoadedStore, run_dir: Path) -> DnsServer:
    """A named (not started) over the loaded store, running under callgrind, one thread (a
    second worker would only add its idle wake-ups: queries come one at a time)."""
    if not counts_named(loaded.server):
        raise UserError(f"instructions counts named's instructions: {loaded.server.name} is "
                        f"not named")
    named = loaded.dns_server(run_dir, threads=1)
    out_dir = named.run_dir / "callgrind"
    out_dir.mkdir(parents=True, exist_ok=True)
    named.run_under(callgrind_wrapper(out_dir))
    return named


def counts_named(server: ServerKind) -> bool:
    """Whether the server's process runs under callgrind (ServerKind.runs_under_wrapper:
    named's, native or through a DLZ driver): the only one counted here."""
    return server.runs_under_wrapper


def database_description(loaded: LoadedStore) -> tuple[str, bool]:
    """What the database figure is, and whether it is counted."""
    database = loaded.loader.database
    if not database.has_server:
        return NO_DATABASE_SERVER, False
    if not loaded.accounts_database:
        return "not counted: a lent server (--store-url), not the suite's own", False
    if database.profiled_program is not None:
        return database.profiled_program, True
    return database.not_profiled, False


def database_under_callgrind(loaded: LoadedStore, run_dir: Path) -> Callgrind:
    """Restart the store's own server under callgrind, its data kept; its counters."""
    out_dir = run_dir / "callgrind-database"
    out_dir.mkdir(parents=True, exist_ok=True)
    target: Any = loaded.target  # the store's own PrivateServer (database_description)
    target.run_under(callgrind_wrapper(out_dir))
    loaded.restart_database()
    return Callgrind(out_dir, loaded.database_pids)


def measure_server(loaded: LoadedStore, query_set: QuerySet, run_dir: Path, *,
                   repeats: int, idle_seconds: float,
                   progress: Callable[[str], None] = print) -> ServerInstructions:
    """Every repeat of one loaded server; a failure is recorded, not raised."""
    name = loaded.server.name
    description, counted = database_description(loaded)
    result = ServerInstructions(name, description, counted)
    try:
        database = database_under_callgrind(loaded, run_dir) if counted else None
        for index in range(repeats):
            named = named_under_callgrind(loaded, run_dir / f"repeat-{index + 1}")
            with named:
                repeat = one_repeat(named, database, query_set, idle_seconds)
            result.repeats.append(repeat)
            progress(f"{name} repeat {index + 1}: named {_fmt(repeat.named_per_query)}"
                     + (f", {description} {_fmt(repeat.database_per_query)}" if counted else "")
                     + f" instructions/query, {repeat.answered}/{repeat.sent} answered")
    except UserError as exc:
        result.status, result.error = "failed", str(exc)
        progress(f"{name} failed: {exc}")
    return result


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"
