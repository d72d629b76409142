"""`python3 -m bench fuzz`: packets no one should send, through each server; afterwards it must
still run, still answer, and answer the coverage queries as before (docs/method/fuzz.md)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from base.errors import UserError
from base.process import new_run_dir
from bench.load.fuzz import KINDS, Crash, FuzzOutcome, Packet, fuzz_packets, send_packets
from bench.measure import metadata
from bench.measure.results import write_results_file
from bench.measure.serving import serving
from bench.verify.compare import Comparison, compare_servers, references_for
from servers import DnsServer, selected_servers
from zonedata.derive import derive_queries
from zonedata.generator import COVERAGE_ORIGIN, coverage_zones

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
    fuzzed = selected_servers(args.servers)
    zones = coverage_zones()
    queries = derive_queries(zones)
    packets = fuzz_packets(queries, args.packets, args.seed)
    run_dir = new_run_dir("fuzz")
    meta = {**metadata.collect(), "command": "fuzz", "argv": sys.argv[1:],
            "servers": fuzzed, "packets": args.packets, "seed": args.seed,
            "threads": args.threads, "kinds": list(KINDS)}
    said = Transcript()
    said.say(f"fuzz: {args.packets} packets per server ({len(KINDS)} kinds, seed {args.seed}) "
             f"over the coverage data set: {', '.join(fuzzed)}")
    with ExitStack() as stack:
        served = {name: stack.enter_context(serving(name, lambda: iter(zones), run_dir / name,
                                                    threads=args.threads)).named
                  for name in dict.fromkeys([*references_for(fuzzed), *fuzzed])}
        outcomes = {name: _fuzz_one(name, served[name], packets, run_dir, said)
                    for name in fuzzed}
        standing = {name: named for name, named in served.items()
                    if name not in outcomes or outcomes[name].crash is None}
        fallen = [name for name in references_for(fuzzed) if name not in standing]
        if fallen:
            said.say(f"answers not compared: {', '.join(fallen)}, the reference, fell")
            results = {}
        else:
            results = compare_servers(standing, queries, zones)
    status = report(outcomes, results, said)
    if args.out is not None:
        write_results(args.out, meta, outcomes, results, said)
    return status


def write_results(out: Path, meta: dict, outcomes: dict[str, FuzzOutcome],
                  results: dict[str, Comparison], said: Transcript) -> None:
    """results.json.xz: the metadata, each server's outcome and its answers afterwards (counts);
    results.md: the lines printed, under the metadata that says where they come from."""
    out.mkdir(parents=True, exist_ok=True)
    servers = {name: {**dataclasses.asdict(outcome),
                      "after": None if name not in results else {
                          "identical": results[name].identical, "total": results[name].total,
                          "driver_differences": results[name].driver_differences,
                          "classes": dict(results[name].classes)}}
               for name, outcome in outcomes.items()}
    write_results_file({"meta": meta, "servers": servers}, out)
    dirty = " (uncommitted changes)" if meta["git_dirty"] else ""
    head = [f"# bench fuzz, {meta['date']}", "",
            f"`python3 -m bench {' '.join(meta['argv'])}` at commit "
            f"`{str(meta['git_commit'])[:12]}`{dirty}, boot `{str(meta['boot_id'])[:8]}`, "
            f"kernel {meta['kernel']}, {meta['bind']}.",
            "", "```"]
    (out / "results.md").write_text("\n".join([*head, *said.lines, "```", ""]))


def _fuzz_one(name: str, named: DnsServer, packets: list[Packet], run_dir: Path,
              said: Transcript) -> FuzzOutcome:
    """The packets through one server, then one well-formed query it must answer; a dead or
    silent server's suspect packets are written to run_dir for a rerun."""
    outcome = send_packets(packets, named.host, named.port, named.running)
    if outcome.crash is None and not _answers(named):
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


def _answers(named: DnsServer) -> bool:
    deadline = time.monotonic() + _ANSWER_WITHIN_S
    while not named.answers(COVERAGE_ORIGIN.to_text()):
        if not named.running() or time.monotonic() > deadline:
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


def report(outcomes: dict[str, FuzzOutcome], results: dict[str, Comparison],
           said: Transcript) -> int:
    """The answers after the packets, per fuzzed server that still runs; 1 on a crash or a
    driver difference."""
    for name in outcomes:
        if name in results:
            said.say(f"after: {results[name].summary()}")
            for text in results[name].differences:
                said.say(f"  {text}")
    crashes = sum(o.crash is not None for o in outcomes.values())
    differing = sum(1 for name in outcomes
                    if name in results and results[name].driver_differences)
    said.say(f"fuzz: {crashes} crashes, {differing} servers with driver differences "
             "afterwards")
    return 1 if crashes or differing else 0
