"""The libFuzzer harnesses of drivers/fuzz (docs/method/fuzz.md, "Inside the drivers"): each
one run for a fixed time over its committed corpus, and what it reported.

A harness is drivers/fuzz/fuzz_<name>.c, built by `make -C drivers fuzz` into
build/fuzz/fuzz_<name>; its seed corpus is drivers/fuzz/corpus/<name>/ and its dictionary, if
it has one, drivers/fuzz/<name>.dict. A run reads the committed corpus and writes the inputs
it finds to a scratch corpus of its own, so the committed one changes only by hand.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from base.errors import UserError
from base.paths import REPO_ROOT
from base.process import as_user, give_to_service_user, service_environment, service_user

DRIVERS = REPO_ROOT / "drivers"
SOURCES = DRIVERS / "fuzz"
BUILT = REPO_ROOT / "build" / "fuzz"
# An input that runs longer than this is a hang: libFuzzer saves it as a timeout-* artifact.
UNIT_TIMEOUT_S = 10
# The artifacts libFuzzer writes for an input that failed: a crash (a sanitizer's report or a
# harness check), a leak, a hang, an out-of-memory.
_ARTIFACT = re.compile(r"^(crash|leak|timeout|oom|slow-unit)-")
# libFuzzer's status lines ("#1234 pulse cov: 87 ft: 335 corp: 81/15Kb ...").
_STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/")
# What a failing input reported first: a harness check, a sanitizer, libFuzzer itself.
_FINDING = re.compile(r"(harness check failed: .*|SUMMARY: \w+Sanitizer: .*|"
                      r"ERROR: libFuzzer: .*)")


@dataclass
class HarnessRun:
    """One harness for a fixed time: executions, coverage (libFuzzer's cov: edges and ft:
    features, at the end), the corpus it ended with, and the inputs that failed."""

    harness: str
    seconds: float = 0.0
    executions: int = 0
    coverage: int = 0
    features: int = 0
    corpus: int = 0
    exit_code: int = 0
    crashes: list[str] = field(default_factory=list)
    finding: str = ""

    @property
    def clean(self) -> bool:
        return self.exit_code == 0 and not self.crashes

    def line(self) -> str:
        rate = self.executions / self.seconds if self.seconds > 0 else 0.0
        head = (f"{self.harness}: {self.executions:,} executions in {self.seconds:.0f} s "
                f"({rate:,.0f}/s), cov {self.coverage}, ft {self.features}, "
                f"corpus {self.corpus}, ")
        if self.clean:
            return head + "0 crashes"
        return head + f"{len(self.crashes)} CRASH(ES): {self.finding or f'exit {self.exit_code}'}"


def harnesses() -> list[str]:
    """Every harness of drivers/fuzz, by name."""
    return sorted(path.stem.removeprefix("fuzz_") for path in SOURCES.glob("fuzz_*.c"))


def build() -> None:
    """`make -C drivers fuzz`: the harnesses and fuzzcli (clang, ASan, UBSan)."""
    done = subprocess.run(["make", "-s", f"-j{os.cpu_count() or 1}", "-C", str(DRIVERS),
                           "fuzz"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UserError("make -C drivers fuzz failed (clang and libclang-rt-14-dev are "
                        f"`make deps` packages):\n{done.stdout}{done.stderr}")


def run_harness(harness: str, seconds: int, work: Path,
                flags: Sequence[str] = ()) -> HarnessRun:
    """harness for `seconds` over its committed corpus (and whatever work/<harness>/corpus/
    already holds), with libFuzzer's `flags` besides; its log, scratch corpus and failing
    inputs go under work/<harness>/."""
    binary = BUILT / f"fuzz_{harness}"
    if not binary.exists():
        raise UserError(f"{binary} is not built: make -C drivers fuzz")
    own = work / harness
    scratch, artifacts = own / "corpus", own / "artifacts"
    scratch.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(exist_ok=True)
    # The harness parses hostile input with a driver's code: it runs as the servers' user
    # (base/process.py), which writes its corpus and findings here.
    give_to_service_user(own, tree=True)
    command = [str(binary), f"-max_total_time={seconds}", f"-timeout={UNIT_TIMEOUT_S}",
               "-print_final_stats=1", f"-artifact_prefix={artifacts}/", *flags]
    dictionary = SOURCES / f"{harness}.dict"
    if dictionary.exists():
        command.append(f"-dict={dictionary}")
    command += [str(scratch), str(SOURCES / "corpus" / harness)]
    log = own / "libfuzzer.log"
    start = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=own,
                              env=service_environment({"UBSAN_OPTIONS": "print_stacktrace=1"}),
                              check=False, **as_user(service_user()))
    run = HarnessRun(harness, time.monotonic() - start, exit_code=done.returncode,
                     crashes=sorted(p.name for p in artifacts.iterdir() if _ARTIFACT.match(p.name)))
    _read_log(log.read_text(errors="replace"), run)
    return run


def _read_log(text: str, run: HarnessRun) -> None:
    """The last status line's coverage, the executions of the final stats (else of the last
    status line), and the first finding."""
    for line in text.splitlines():
        if status := _STATUS.match(line):
            run.executions = int(status.group(1))
            run.coverage, run.features, run.corpus = (int(status.group(i)) for i in (2, 3, 4))
        elif line.startswith("stat::number_of_executed_units:"):
            run.executions = int(line.split(":")[-1])
        elif not run.finding and (found := _FINDING.search(line)):
            run.finding = found.group(1).strip()
