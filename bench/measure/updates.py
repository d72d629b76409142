"""RFC 2136 dynamic updates per second (`bench updates`, docs/method/updates-rate.md).

Every server measured runs at once, each over its own store loaded with the same data set,
twice: one instance whose zone (the data set's first) takes updates from loopback without a
key, one whose zone (the second) takes them only signed with the run's TSIG key
(base/update_access.py). A cell is (server, records per message,
TSIG or not); one repeat of a cell is an add phase (`records` new names, one A record each, in
messages of that many records, sent by `senders` concurrent senders over TCP) and then a
delete phase removing exactly those records, so the zone ends as it began and every repeat
starts from the same zone. A repeat's rate is the records it changed (added and deleted) over
the seconds both phases took, and its messages over the same seconds; a repeat with any answer
other than NOERROR has no rate (its answers are kept, counted by RCODE).

Repeats are interleaved as `run`'s rounds are (bench/measure/rounds.py): each round runs
every cell once, in the order stats.round_order gives (reversed every other round), so a
drift of the machine lands on no server's side; a cell's rate is the median of its repeats
with the order-statistic interval (stats.median_interval: an interval from 6 repeats), its
ratio to native BIND's the median of the per-round ratios. The CPU the server and its
database used over both phases is divided by the records changed.

After the rounds, the same messages go to every server once more (two messages of the
largest batch into each zone), and each server's answers for the changed names are compared
with native BIND's, once the names are there and again once they are deleted; an update signed
with a wrong key and one without a key are sent to the keyed zone (each must be refused and
change nothing); and each zone must be, SOA serial aside, as it was before the first update.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import dns.message
import dns.name

from base.errors import UserError
from base.update_access import TsigKey, UpdateAccess
from bench.load import update_sender as sender
from bench.load.update_sender import PhaseResult, Signer
from bench.measure import accounting, stats
from bench.measure.serial import Section
from bench.measure.serving import LoadedStore, loaded_store
from bench.verify.compare import UNEXPLAINED, Comparison
from bench.verify.updated_answers import compare_with_native, soa_serial, still_present, zone_state
from servers import REFERENCE, DnsServer, ServerKind
from zonedata.model import Zone

METHOD = ("RFC 2136 update messages over TCP from concurrent senders (dnspython), each a "
          "connection of its own sending its share one message at a time; a repeat adds "
          "`records` new names (one A record each) in messages of N records, then deletes "
          "them; rate = records changed / seconds of both phases; repeats interleaved in "
          "rounds (ABBA), median with its order-statistic 95% interval")

# A phase whose senders used this share of its wall time in CPU may be limited by them
# (one Python process: its threads share one core for everything but waiting).
SENDER_BOUND_SHARE = 0.8


@dataclass(frozen=True)
class Profile:
    batch_sizes: tuple[int, ...]  # records per message
    records: int                  # records each add phase adds (and its delete phase deletes)
    senders: int                  # concurrent senders, each over a TCP connection of its own
    rounds: int                   # repeats of every cell, interleaved
    zones: int                    # zones generated when no data set is named
    threads: int = 2              # the server's threads (and connections to its store)


PROFILES: dict[str, Profile] = {
    # 6 rounds: the fewest with an order-statistic interval (stats.py). 200 names a repeat:
    # in the tiny run of 2026-11-26 (4 servers, other test suites on the machine) the
    # slowest cell, PowerDNS gmysql one record a message with TSIG, took 45 records/s, so a
    # round of 4 servers takes about a minute and the run about 7 minutes; 2 senders: the
    # 100-record batches are then one message per sender and phase.
    "default": Profile(batch_sizes=(1, 10, 100), records=200, senders=2, rounds=6, zones=100),
    # The tests': every batch size once, a few seconds per server.
    "tiny": Profile(batch_sizes=(1, 10, 100), records=100, senders=2, rounds=1, zones=5),
}


# --- results ---------------------------------------------------------------------------------


@dataclass
class Repeat:
    """One add phase and the delete phase after it, in round `round`."""

    round: int
    add: PhaseResult
    delete: PhaseResult
    server_cpu_s: float | None = None
    db_cpu_s: float | None = None  # None: the store has no server of ours

    @property
    def ok(self) -> bool:
        return self.add.all_noerror and self.delete.all_noerror

    @property
    def seconds(self) -> float:
        return self.add.seconds + self.delete.seconds

    @property
    def records(self) -> int:
        return self.add.records + self.delete.records

    @property
    def messages(self) -> int:
        return self.add.messages + self.delete.messages

    @property
    def records_per_s(self) -> float | None:
        return self.records / self.seconds if self.ok and self.seconds > 0 else None

    @property
    def messages_per_s(self) -> float | None:
        return self.messages / self.seconds if self.ok and self.seconds > 0 else None

    @property
    def sender_bound(self) -> bool:
        cpu = self.add.client_cpu_s + self.delete.client_cpu_s
        return self.seconds > 0 and cpu >= SENDER_BOUND_SHARE * self.seconds


@dataclass
class UpdateCell:
    """One server at one batch size, with TSIG or without."""

    server: str
    batch: int
    tsig: bool
    status: str = "ok"  # "ok", "refused" (an answer other than NOERROR), "failed"
    error: str | None = None
    repeats: list[Repeat] = field(default_factory=list)
    records_per_s: stats.Interval | None = None
    messages_per_s: stats.Interval | None = None
    ratio_to_native: stats.Interval | None = None
    cpu_us_per_record: dict[str, float | None] = field(default_factory=dict)

    @property
    def sender_bound(self) -> int:
        return sum(r.sender_bound for r in self.repeats)

    def outcomes(self) -> dict[str, int]:
        """Every answer of every repeat, by RCODE."""
        total: dict[str, int] = {}
        for repeat in self.repeats:
            for phase in (repeat.add, repeat.delete):
                for outcome, count in phase.outcomes.items():
                    total[outcome] = total.get(outcome, 0) + count
        return total

    def by_round(self) -> dict[int, float]:
        return {r.round: rate for r in self.repeats if (rate := r.records_per_s) is not None}


@dataclass
class ServerCheck:
    """What a server's answers and zones were after the rounds (the module docstring)."""

    server: str
    status: str = "ok"  # "ok", or "failed" (the checks could not run)
    error: str | None = None
    # Answers for the changed names against native BIND's: while present, once deleted.
    identical: int = 0
    compared: int = 0
    classes: dict[str, int] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)
    # The outcome of an update signed with a wrong key, and of one without a key, to the
    # keyed zone; and the names either left behind.
    wrong_key: str = ""
    no_key: str = ""
    refused_left: list[str] = field(default_factory=list)
    # Each updated zone, SOA serial aside, as it was before the first update.
    restored: bool = False
    # zone -> [SOA serial before the first update, after the rounds]: every server got the
    # same messages in the rounds
    serials: dict[str, list[int | None]] = field(default_factory=dict)

    # Files up to 2026-11-27 named a difference no known class explains "driver".
    json_renamed_keys: ClassVar[dict[str, dict[str, str]]] = {"classes": {"driver": UNEXPLAINED}}

    @property
    def unexplained(self) -> int:
        return self.classes.get(UNEXPLAINED, 0)

    @property
    def refusals_hold(self) -> bool:
        return (self.wrong_key in sender.REFUSALS and self.no_key in sender.REFUSALS
                and not self.refused_left)


@dataclass
class Updates:
    """results.json's "updates" section."""

    method: str
    profile: str
    dataset: str
    senders: int
    records: int
    batch_sizes: list[int]
    open_zone: str
    keyed_zone: str
    threads: int
    rounds_done: int = 0
    cells: list[UpdateCell] = field(default_factory=list)
    checks: list[ServerCheck] = field(default_factory=list)

    json_absent: ClassVar[dict[str, Any]] = {"threads": 1}  # when left out

    def cell(self, server: str, batch: int, tsig: bool) -> UpdateCell | None:
        return next((c for c in self.cells
                     if (c.server, c.batch, c.tsig) == (server, batch, tsig)), None)

    def servers(self) -> list[str]:
        return list(dict.fromkeys(c.server for c in self.cells))

    def check(self, server: str) -> ServerCheck | None:
        return next((c for c in self.checks if c.server == server), None)


# results.json's "updates": written by `updates` only.
SECTION = Section("updates", Updates | None)


# --- the figures -----------------------------------------------------------------------------


def set_figures(section: Updates) -> None:
    """Every cell's rates, ratio to native BIND's and CPU per record, from its repeats."""
    for cell in section.cells:
        good = [r for r in cell.repeats if r.ok]
        cell.records_per_s = stats.median_interval([r.records_per_s for r in good
                                                    if r.records_per_s is not None])
        cell.messages_per_s = stats.median_interval([r.messages_per_s for r in good
                                                     if r.messages_per_s is not None])
        native = section.cell(REFERENCE, cell.batch, cell.tsig)
        cell.ratio_to_native = (None if native is None or native is cell
                                else stats.ratio_interval(cell.by_round(), native.by_round()))
        records = sum(r.records for r in good)
        db = [r.db_cpu_s for r in good]
        cell.cpu_us_per_record = {
            "server": accounting.us_per_query(sum(r.server_cpu_s or 0.0 for r in good),
                                              records),
            "db": None if not good or None in db else accounting.us_per_query(
                sum(r.db_cpu_s or 0.0 for r in good), records)}


# --- running it ------------------------------------------------------------------------------


@dataclass
class Running:
    """A server instance taking updates into one zone (with the key, or without), over its
    loaded store."""

    kind: ServerKind
    server: DnsServer
    loaded: LoadedStore
    zone: dns.name.Name
    signer: Signer

    def db_pids(self) -> list[int] | None:
        if not (self.loaded.loader.database.has_server and self.loaded.accounts_database):
            return None
        return self.loaded.database_pids()


# (server, TSIG or not) -> its instance.
Instances = dict[tuple[str, bool], Running]
# sender.add_message or sender.delete_message.
Build = Callable[[dns.name.Name, Sequence[int], Signer], dns.message.Message]


def update_zones(zones: Sequence[Zone]) -> tuple[Zone, Zone]:
    """The zones updated: the data set's first two (the first open, the second keyed)."""
    if len(zones) < 2:
        raise UserError("updates needs a data set of two zones at least (one taking updates "
                        "without a key, one only with it)")
    return zones[0], zones[1]


def check_names_free(zones: Sequence[Zone], count: int) -> None:
    """The names the senders add must not be in the data already."""
    for zone in zones:
        owners = {r.owner for r in zone.records}
        taken = [name for i in range(count) if (name := sender.added_name(zone.origin, i))
                 in owners]
        if taken:
            raise UserError(f"the data set already has {taken[0]}, a name updates adds")


def instance_access(access: UpdateAccess, tsig: bool) -> UpdateAccess:
    """What one instance takes: the keyed zone with the key, or the open zone without."""
    if tsig:
        return UpdateAccess((), access.keyed_zones, access.key)
    return UpdateAccess(access.open_zones, (), access.key)


def measure(servers: Sequence[ServerKind], stream: Callable[[], Iterator[Zone]],
            run_dir: Path, profile: Profile, section: Updates,
            save: Callable[[], None], progress: Callable[[str], None]) -> None:
    """Every server started over its store, the rounds, then the checks; `save` after each
    round."""
    # Only the two updated zones are kept: the data set may be large.
    zones = list(itertools.islice(stream(), 2))
    open_zone, keyed_zone = update_zones(zones)
    check_names_free([open_zone, keyed_zone], verify_first(profile) + 2 * max(
        profile.batch_sizes) + 2)
    access = UpdateAccess((open_zone.origin,), (keyed_zone.origin,), TsigKey.generate())
    section.open_zone, section.keyed_zone = (open_zone.origin.to_text(),
                                             keyed_zone.origin.to_text())
    section.cells = [UpdateCell(server.name, batch, tsig) for batch in profile.batch_sizes
                     for tsig in (False, True) for server in servers]
    with contextlib.ExitStack() as stack:
        running = start_servers(stack, servers, stream, run_dir, access, profile, progress,
                                section)
        before = {key: (zone_state(r.server, r.zone), soa_serial(r.server, r.zone))
                  for key, r in running.items()}
        for index in range(profile.rounds):
            progress(f"round {index + 1} of {profile.rounds}")
            run_round(section, running, profile, index)
            section.rounds_done = index + 1
            set_figures(section)
            save()
        serials = {key: [before[key][1], soa_serial(r.server, r.zone)]
                   for key, r in running.items()}
        progress("checking every server's answers against native BIND's")
        section.checks = [check_server(kind.name, running, profile, zones, before)
                          for kind in servers if (kind.name, True) in running]
        for check in section.checks:
            check.serials = {running[(check.server, tsig)].zone.to_text():
                             serials[(check.server, tsig)] for tsig in (False, True)}


def start_servers(stack: contextlib.ExitStack, servers: Sequence[ServerKind],
                  stream: Callable[[], Iterator[Zone]], run_dir: Path, access: UpdateAccess,
                  profile: Profile, progress: Callable[[str], None],
                  section: Updates) -> Instances:
    """Each store loaded once; over it, each server twice: one instance whose zone takes
    updates without a key, one whose zone takes them only with it (a server given one update
    policy for all its zones, as named's DLZ path is, can then still refuse an unsigned
    update in the keyed zone). They all run at once. A server other than native BIND that
    cannot start so (a store's mode that takes no updates) has its cells failed, with why."""
    stores: dict[str, LoadedStore] = {}
    running: Instances = {}
    for kind in servers:
        store = kind.loader().name
        try:
            if store not in stores:
                progress(f"loading the {store} store")
                stores[store] = stack.enter_context(loaded_store(kind, stream, run_dir))
            for tsig in (False, True):
                running[(kind.name, tsig)] = start_instance(stack, kind, stores[store],
                                                            access, tsig, run_dir, profile)
                progress(f"started {kind.name} ({'with' if tsig else 'without'} TSIG)")
        except UserError as exc:
            if kind.name == REFERENCE:
                raise
            progress(f"{kind.name} failed: {exc}")
            for cell in section.cells:
                if cell.server == kind.name:
                    cell.status, cell.error = "failed", str(exc)
            running.pop((kind.name, False), None)
    return running


def start_instance(stack: contextlib.ExitStack, kind: ServerKind, loaded: LoadedStore,
                   access: UpdateAccess, tsig: bool, run_dir: Path, profile: Profile) -> Running:
    """The server's instance taking the keyed zone's updates (tsig) or the open zone's,
    started (stopped when the stack closes)."""
    mine = instance_access(access, tsig)
    server = kind.build_updatable(
        loaded.target, run_dir / f"server-{kind.name}-{'tsig' if tsig else 'open'}", mine,
        threads=profile.threads, connections=profile.threads)
    return Running(kind, stack.enter_context(server), loaded, mine.zones[0],
                   Signer(access.key if tsig else None))


def run_round(section: Updates, running: Instances, profile: Profile, index: int) -> None:
    """Every cell still measured, once, in this round's order."""
    for cell in stats.round_order(section.cells, index):
        if cell.status == "failed" or (cell.server, cell.tsig) not in running:
            continue
        try:
            repeat = run_repeat(running[(cell.server, cell.tsig)], cell.batch, profile, index)
        except (OSError, UserError) as exc:
            cell.status, cell.error = "failed", f"{type(exc).__name__}: {exc}"
            continue
        cell.repeats.append(repeat)
        if not repeat.ok:
            cell.status = "refused"


def run_repeat(r: Running, batch: int, profile: Profile, index: int,
               signer: Signer | None = None) -> Repeat:
    """The add phase, then the delete phase, into the instance's zone signed as it takes
    them (or with `signer`), with the server's and its database's CPU."""
    signer = signer or r.signer
    plan = sender.batches(profile.records, batch)
    db_pids = r.db_pids()
    server_cpu = db_cpu = 0.0
    phases = []
    for build in (sender.add_message, sender.delete_message):
        messages = [sender.render(build(r.zone, indexes, signer), len(indexes),
                                  signer.keyring()) for indexes in plan]
        server_meter = accounting.CpuMeter(r.server.pids())
        db_meter = accounting.CpuMeter(db_pids or [])
        with server_meter, db_meter:
            phases.append(sender.send_phase(r.server.host, r.server.port, messages,
                                            profile.senders))
        server_cpu += server_meter.seconds
        db_cpu += db_meter.seconds
    return Repeat(index, phases[0], phases[1], server_cpu, None if db_pids is None else db_cpu)


def verify_first(profile: Profile) -> int:
    """The first name index of the checks' messages (after the rounds' names)."""
    return profile.records


def check_server(name: str, running: Instances, profile: Profile, zones: Sequence[Zone],
                 before: dict[tuple[str, bool], tuple]) -> ServerCheck:
    """The module docstring's checks of one server against native BIND."""
    check = ServerCheck(name)
    batch = max(profile.batch_sizes)
    first = verify_first(profile)
    plan = sender.batches(2 * batch, batch, first)
    try:
        if name != REFERENCE:  # native BIND gets the messages beside every other server
            for build in (sender.add_message, sender.delete_message):
                for tsig in (False, True):
                    _send_to_both(running[(REFERENCE, tsig)], running[(name, tsig)], build,
                                  plan)
                for tsig in (False, True):
                    mine = running[(name, tsig)]
                    pair = {REFERENCE: running[(REFERENCE, tsig)].server, name: mine.server}
                    queries = [(sender.added_name(mine.zone, i), "A") for indexes in plan
                               for i in indexes]
                    _add_comparison(check, compare_with_native(pair, queries, zones)[name])
        check_refusals(check, running[(name, True)], first + 2 * batch)
        check.restored = all(zone_state(running[(name, tsig)].server,
                                        running[(name, tsig)].zone) == before[(name, tsig)][0]
                             for tsig in (False, True))
    except (OSError, UserError) as exc:
        check.status, check.error = "failed", f"{type(exc).__name__}: {exc}"
    return check


def _send_to_both(native: Running, mine: Running, build: Build,
                  plan: list[list[int]]) -> None:
    """The same rendered messages to native BIND's instance and the server's."""
    messages = [sender.render(build(mine.zone, indexes, mine.signer), len(indexes),
                              mine.signer.keyring()) for indexes in plan]
    for r in (native, mine):
        sent = sender.send_phase(r.server.host, r.server.port, messages, 1)
        if not sent.all_noerror:
            raise UserError(f"{r.kind.name}: the checks' updates were answered {sent.outcomes}")


def _add_comparison(check: ServerCheck, comparison: Comparison) -> None:
    check.compared += comparison.total
    check.identical += comparison.identical
    for cls, count in comparison.classes.items():
        check.classes[cls] = check.classes.get(cls, 0) + count
    check.differences += comparison.differences[:20]


def check_refusals(check: ServerCheck, keyed: Running, first: int) -> None:
    """An update signed with a wrong key, and one unsigned, to the keyed zone: refused, and
    neither name added."""
    server, zone = keyed.server, keyed.zone
    assert keyed.signer.key is not None
    wrong = Signer(keyed.signer.key.wrong_secret())
    check.wrong_key = sender.ask_once(server.host, server.port,
                                      sender.add_message(zone, [first], wrong), 1, wrong)
    check.no_key = sender.ask_once(server.host, server.port,
                                   sender.add_message(zone, [first + 1], Signer()), 1, Signer())
    check.refused_left = [n.to_text() for n in still_present(
        server, [sender.added_name(zone, first), sender.added_name(zone, first + 1)])]
