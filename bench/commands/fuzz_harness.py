"""`python3 -m bench fuzz-harness`: the libFuzzer harnesses of drivers/fuzz, each for a fixed
time (docs/method/fuzz.md, "Inside the drivers"): executions, coverage and crashes per harness,
written to results/fuzz-harness-<timestamp>/ (results.json, results.md)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from base.errors import UserError
from base.paths import REPO_ROOT
from base.process import new_run_dir
from bench.commands.fuzz import Transcript
from bench.measure import metadata
from bench.verify.harnesses import HarnessRun, build, harnesses, run_harness


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fuzz-harness", help="the drivers' libFuzzer harnesses (drivers/fuzz), "
                                            "each for a fixed time: executions, coverage, "
                                            "crashes")
    p.add_argument("--seconds", type=int, default=60,
                   help="how long each harness runs (default 60)")
    p.add_argument("--harnesses", default="all",
                   help="'all' or a comma list of drivers/fuzz/fuzz_<name>.c names")
    p.add_argument("--out", type=Path,
                   help="where results.json and results.md go (default "
                        "results/fuzz-harness-<timestamp>/)")
    p.set_defaults(func=run)


def chosen(spec: str) -> list[str]:
    known = harnesses()
    if spec == "all":
        return known
    names = [name.strip() for name in spec.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise UserError(f"--harnesses: no harness {', '.join(unknown) or spec!r} "
                        f"(there are: {', '.join(known)})")
    return names


def run(args: argparse.Namespace) -> int:
    if args.seconds < 1:
        raise UserError("--seconds needs at least 1")
    names = chosen(args.harnesses)
    out = args.out or REPO_ROOT / "results" / time.strftime("fuzz-harness-%Y%m%d-%H%M%S")
    build()
    work = new_run_dir("fuzz-harness")
    meta = {**metadata.collect(), "command": "fuzz-harness", "argv": sys.argv[1:],
            "seconds": args.seconds, "harnesses": names}
    said = Transcript()
    said.say(f"fuzz-harness: {len(names)} harnesses, {args.seconds} s each "
             f"(libFuzzer with ASan and UBSan): {', '.join(names)}")
    runs = []
    for name in names:
        runs.append(run_harness(name, args.seconds, work))
        said.say(runs[-1].line())
    failed = [r for r in runs if not r.clean]
    said.say(f"fuzz-harness: {sum(len(r.crashes) for r in runs)} crashes in {len(failed)} "
             f"harnesses; logs and inputs in {work}")
    write_results(out, meta, runs, said)
    return 1 if failed else 0


def write_results(out: Path, meta: dict, runs: list[HarnessRun], said: Transcript) -> None:
    """results.json: the metadata and each harness's run; results.md: a table of them and the
    lines printed, under the metadata that says where they come from."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(
        {"meta": meta, "harnesses": [dataclasses.asdict(r) for r in runs]}, indent=1) + "\n")
    dirty = " (uncommitted changes)" if meta["git_dirty"] else ""
    lines = [f"# bench fuzz-harness, {meta['date']}", "",
             f"`python3 -m bench {' '.join(meta['argv'])}` at commit "
             f"`{str(meta['git_commit'])[:12]}`{dirty}, boot `{str(meta['boot_id'])[:8]}`, "
             f"kernel {meta['kernel']}.", "",
             "| harness | seconds | executions | cov (edges) | ft (features) | corpus | crashes |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r.harness} | {r.seconds:.0f} | {r.executions:,} | {r.coverage} | "
              f"{r.features} | {r.corpus} | {len(r.crashes)} |" for r in runs]
    lines += ["", "```", *said.lines, "```", ""]
    (out / "results.md").write_text("\n".join(lines))
