"""`python3 -m bench capacity`: loss and latency against offered load, for every server."""

from __future__ import annotations

import argparse

from base.errors import UserError
from bench.commands.run import add_run_options, measure, prepare
from bench.load.prober import NO_TLS
from bench.measure.capacity import DEFAULT_STEPS, parse_steps
from bench.measure.runner import CAPACITY_PHASES, Runner


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("capacity", help="offered-load sweep: %% answered, latency and the "
                                        "breaking point of every server, and resperf's ramp")
    add_run_options(p)
    p.add_argument("--steps", default=",".join(f"{s:g}" for s in DEFAULT_STEPS),
                   help="offered loads in %% of each server's closed-loop maximum "
                        f"(default {','.join(f'{s:g}' for s in DEFAULT_STEPS)})")
    p.add_argument("--common-rate", type=float, default=1000.0, metavar="QPS",
                   help="one absolute rate every server is also asked to carry, to compare "
                        "latency at the same load (default 1000; 0: none)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    parse_steps(args.steps)  # a bad list stops here, before anything starts
    if args.transport == "dot":
        raise UserError(f"capacity --transport dot: {NO_TLS}, and every offered step's "
                        "latency is the prober's (`run --transport dot` gives DoT's QPS)")
    if args.common_rate < 0:
        raise UserError(f"--common-rate {args.common_rate:g}: must be 0 (none) or a positive "
                        "number of queries per second")
    # One thread unless told otherwise: the sweep is long, and thread counts are `tune`'s.
    profile, setup, results = prepare(args, "capacity", threads=(1,))
    setup.steps = parse_steps(args.steps)
    setup.common_rate = args.common_rate or None
    results.meta["capacity"] = {"steps_percent": list(setup.steps),
                                "common_rate_qps": setup.common_rate,
                                "step_s": profile.step_s,
                                "resperf_ramp_s": profile.resperf_ramp_s}
    return measure(Runner(profile, setup, results, phases=CAPACITY_PHASES))
