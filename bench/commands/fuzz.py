"""`python3 -m bench fuzz`: packets no one should send, through each server, then signed RFC
2136 updates to the coverage zone through each server that takes them; afterwards it must still
run, still answer, and answer the coverage queries (and those of the updated names) as native
BIND does after the same updates (docs/method/fuzz.md)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import dns.name
import dns.update

from base.errors import UserError
from base.process import new_run_dir
from base.update_access import TsigKey, UpdateAccess
from bench.load.fuzz import (
    KINDS,
    Crash,
    FuzzOutcome,
    Packet,
    UpdatesOutcome,
    fuzz_packets,
    fuzz_updates,
    send_packets,
    send_updates,
    update_queries,
)
from bench.measure import metadata
from bench.measure.results import write_results_file
from bench.measure.serving import serving
from bench.verify.answers import transfer
from bench.verify.compare import Comparison, compare_servers, references_for
from servers import REFERENCE, DnsServer, get_server, selected_servers
from zonedata.derive import Query, derive_queries
from zonedata.generator import COVERAGE_ORIGIN, coverage_zones
from zonedata.model import Record, Zone

# After the packets, a server must answer a well-formed query within this (it may be busy
# with the last of them).
_ANSWER_WITHIN_S = 10.0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fuzz", help="malformed and odd queries through each server (the "
                                    "coverage data set): it must stay up, and answer as "
                                    "native BIND afterwards")
    p.add_argument("--servers", "--drivers", dest="servers", default="all",
                   help="'all' (every server that is built) or a comma list")
    p.add_argument("--packets", type=int, default=10000,
                   help="packets sent to each server (default 10000)")
    p.add_argument("--seed", type=int, default=1,
                   help="the packets' seed, default 1 (the same seed sends the same packets)")
    p.add_argument("--updates", type=int, default=500,
                   help="signed UPDATE messages to the coverage zone, through each server that "
                        "takes updates (and native BIND and the memory driver, to compare "
                        "with) after the packets (default 500; 0: none)")
    p.add_argument("--threads", type=int, default=2, help="server worker threads")
    p.add_argument("--out", type=Path,
                   help="also write results.json.xz (the run's metadata and each server's "
                        "outcome) and results.md (what was printed) into this directory")
    p.set_defaults(func=run)


class Transcript:
    """Every line the command prints, kept for results.md."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.lines.append(text)


def run(args: argparse.Namespace) -> int:
    if args.packets < 1:
        raise UserError("--packets needs at least 1")
    if args.updates < 0:
        raise UserError("--updates cannot be negative")
    fuzzed = selected_servers(args.servers)
    zones = coverage_zones()
    queries = derive_queries(zones)
    packets = fuzz_packets(queries, args.packets, args.seed)
    updated_zone = zones[0]
    messages = fuzz_updates(updated_zone, args.updates, args.seed)
    key = TsigKey.generate("dlzbench-fuzz.")
    run_dir = new_run_dir("fuzz")
    meta = {**metadata.collect(), "command": "fuzz", "argv": sys.argv[1:],
            "servers": fuzzed, "packets": args.packets, "seed": args.seed,
            "updates": args.updates, "updated_zone": updated_zone.origin.to_text(),
            "threads": args.threads, "kinds": list(KINDS)}
    said = Transcript()
    said.say(f"fuzz: {args.packets} packets per server ({len(KINDS)} kinds, seed {args.seed}) "
             f"over the coverage data set: {', '.join(fuzzed)}")
    everyone = list(dict.fromkeys([*references_for(fuzzed), *fuzzed]))
    access = UpdateAccess((), (updated_zone.origin,), key) if messages else None
    updatable = [name for name in everyone
                 if access is not None and get_server(name).takes_updates()]
    if messages:
        said.say(f"then {len(messages)} signed updates of {updated_zone.origin} through those "
                 f"that take them: {', '.join(updatable)}")
    with ExitStack() as stack:
        served = {name: stack.enter_context(serving(
            name, lambda: iter(zones), run_dir / name, threads=args.threads,
            access=access if name in updatable else None)).server for name in everyone}
        outcomes = {name: _fuzz_one(name, served[name], packets, run_dir, said)
                    for name in fuzzed}
        fell = {name for name, outcome in outcomes.items() if outcome.crash is not None}
        updated = {name: _update_one(name, served[name], messages, key, said)
                   for name in updatable if name not in fell}
        fell |= {name for name, outcome in updated.items() if outcome.crash is not None}
        standing = {name: server for name, server in served.items() if name not in fell}
        fallen = [name for name in references_for(fuzzed) if name in fell]
        if fallen:
            said.say(f"answers not compared: {', '.join(fallen)}, the reference, fell")
            results = {}
        else:
            results = _compare_after(standing, set(updated), queries, zones, updated_zone,
                                     messages)
    status = report(outcomes, updated, results, said)
    if args.out is not None:
        write_results(args.out, meta, outcomes, updated, results, said)
    return status


def _compare_after(standing: dict[str, DnsServer], updated: set[str], queries: list[Query],
                   zones: list[Zone], updated_zone: Zone,
                   messages: list[dns.update.UpdateMessage]) -> dict[str, Comparison]:
    """The servers' answers afterwards. Those that took the updates (with the references,
    which took them too): every query, the updated names' and every zone's transfer. Those
    that take no updates: everything outside the updated zone."""
    took = {name: named for name, named in standing.items() if name in updated}
    untouched = [name for name in standing if name not in updated]
    results = {}
    if took:
        # The known classes go by the zone's shape (its empty non-terminals, delegations,
        # CNAMEs), which the updates changed: the updated zone as native BIND now holds it.
        now = [_zone_after(standing[REFERENCE], zone) if zone.origin == updated_zone.origin
               else zone for zone in zones]
        results = compare_servers(took, [*queries, *update_queries(messages)], now)
    if untouched:
        others = {name: standing[name] for name in standing
                  if name in untouched or name in references_for(untouched)}
        # The updated zone's whole tree: a delegation's DS is answered from it too.
        outside = [zone for zone in zones if not zone.origin.is_subdomain(updated_zone.origin)]
        asked = [query for query in queries if not query[0].is_subdomain(updated_zone.origin)]
        results.update({name: result for name, result in
                        compare_servers(others, asked, outside).items() if name in untouched})
    return results


def _zone_after(named: DnsServer, zone: Zone) -> Zone:
    """zone as named serves it now: its records from a full transfer."""
    rrs = transfer(named, zone.origin).answer
    return Zone(zone.origin, [Record(dns.name.from_text(owner), ttl, rdtype, rdata)
                              for owner, ttl, rdtype, rdata in sorted(rrs)])


def write_results(out: Path, meta: dict, outcomes: dict[str, FuzzOutcome],
                  updated: dict[str, UpdatesOutcome], results: dict[str, Comparison],
                  said: Transcript) -> None:
    """results.json.xz: the metadata, each server's outcome (its packets, its updates) and its
    answers afterwards (counts); results.md: the lines printed, under the metadata that says
    where they come from."""
    out.mkdir(parents=True, exist_ok=True)
    servers = {name: {**dataclasses.asdict(outcome),
                      "updates": (dataclasses.asdict(updated[name]) if name in updated
                                  else None),
                      "after": None if name not in results else {
                          "identical": results[name].identical, "total": results[name].total,
                          "unexplained": results[name].unexplained,
                          "classes": dict(results[name].classes)}}
               for name, outcome in outcomes.items()}
    references = {name: dataclasses.asdict(outcome) for name, outcome in updated.items()
                  if name not in outcomes}
    write_results_file({"meta": meta, "servers": servers, "references_updated": references},
                       out)
    dirty = " (uncommitted changes)" if meta["git_dirty"] else ""
    head = [f"# bench fuzz, {meta['date']}", "",
            f"`python3 -m bench {' '.join(meta['argv'])}` at commit "
            f"`{str(meta['git_commit'])[:12]}`{dirty}, boot `{str(meta['boot_id'])[:8]}`, "
            f"kernel {meta['kernel']}, {meta['bind']}.",
            "", "```"]
    (out / "results.md").write_text("\n".join([*head, *said.lines, "```", ""]))


def _fuzz_one(name: str, server: DnsServer, packets: list[Packet], run_dir: Path,
              said: Transcript) -> FuzzOutcome:
    """The packets through one server, then one well-formed query it must answer; a dead or
    silent server's suspect packets are written to run_dir for a rerun."""
    outcome = send_packets(packets, server.host, server.port, server.running)
    if outcome.crash is None and not _answers(server):
        last = range(max(0, len(packets) - 64), len(packets))
        outcome.crash = Crash(last[0], last[-1], [packets[i].kind for i in last],
                              how="stopped answering")
    if outcome.crash is not None:
        suspects = run_dir / f"{name}-suspects.txt"
        suspects.write_text("".join(
            f"{i} {packets[i].kind} {'tcp' if packets[i].tcp else 'udp'} {packets[i].wire.hex()}\n"
            for i in range(outcome.crash.first, outcome.crash.last + 1)))
        said.say(f"{name}: the packets before it stopped answering are in {suspects}")
    said.say(_outcome_line(name, outcome))
    return outcome


def _update_one(name: str, server: DnsServer, messages: list[dns.update.UpdateMessage],
                key: TsigKey, said: Transcript) -> UpdatesOutcome:
    """The signed updates through one server, then one well-formed query it must answer."""
    outcome = send_updates(messages, key, server.host, server.port, server.running)
    if outcome.crash is None and not _answers(server):
        outcome.crash = Crash(max(0, len(messages) - 16), len(messages) - 1,
                              ["update"] * min(16, len(messages)), how="stopped answering")
    answers = ", ".join(f"{n} {rcode}" for rcode, n in
                        sorted(outcome.answers.items(), key=lambda item: -item[1]))
    line = (f"{name}: {outcome.sent} signed updates in {outcome.seconds:.1f} s ({answers}), ")
    if outcome.crash is None:
        said.say(line + "0 crashes, answers afterwards")
    else:
        said.say(line + f"1 CRASH: {outcome.crash.how} after updates {outcome.crash.first}-"
                        f"{outcome.crash.last}")
    return outcome


def _answers(server: DnsServer) -> bool:
    deadline = time.monotonic() + _ANSWER_WITHIN_S
    while not server.answers(COVERAGE_ORIGIN.to_text()):
        if not server.running() or time.monotonic() > deadline:
            return False
    return True


def _outcome_line(name: str, outcome: FuzzOutcome) -> str:
    rate = outcome.sent / outcome.seconds if outcome.seconds > 0 else 0.0
    line = (f"{name}: {outcome.sent} packets in {outcome.seconds:.1f} s ({rate:.0f}/s), "
            f"{outcome.answered} answered, ")
    if outcome.crash is None:
        return line + "0 crashes, answers afterwards"
    kinds = Counter(outcome.crash.kinds)
    said = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
    return (line + f"1 CRASH: {outcome.crash.how} after packets {outcome.crash.first}-"
            f"{outcome.crash.last} ({said})")


def report(outcomes: dict[str, FuzzOutcome], updated: dict[str, UpdatesOutcome],
           results: dict[str, Comparison], said: Transcript) -> int:
    """The answers after the packets and updates, per fuzzed server that still runs; 1 on a
    crash or an unexplained difference."""
    for name in outcomes:
        if name in results:
            said.say(f"after: {results[name].summary()}")
            for text in results[name].differences:
                said.say(f"  {text}")
    crashes = (sum(o.crash is not None for o in outcomes.values()) +
               sum(o.crash is not None for o in updated.values()))
    differing = sum(1 for name in outcomes
                    if name in results and results[name].unexplained)
    said.say(f"fuzz: {crashes} crashes, {differing} servers with unexplained differences "
             "afterwards")
    return 1 if crashes or differing else 0
