"""Inside the drivers (docs/method/fuzz.md, "Inside the drivers"): each libFuzzer harness of
drivers/fuzz built and run for 1,000 executions from its committed corpus, clean; the record-text
normaliser held to named's and dnspython's text of the same records; bdbhpt's owner-list edit
held to Python's sorted set; and the pool and update paths under ThreadSanitizer.
"""

from __future__ import annotations

import base64
import os
import random
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dns.rdata
import dns.rdataclass
import dns.rdatatype
import pytest

from base.paths import REPO_ROOT
from base.process import as_user, give_to_service_user, service_environment, service_user
from bench.verify.harnesses import BUILT, SOURCES, harnesses, run_harness
from zonedata.generator import coverage_zones

# Enough to mutate well past the seeds, few enough for `make test` (a second's run takes two:
# libFuzzer counts whole seconds); the time is only a cap. A fixed seed: the same mutations on
# every run, so a finding is met again where it was met (long runs, `bench fuzz-harness`, vary).
HARNESS_RUNS = 1000
HARNESS_SEED = 1
HARNESS_CAP_S = 60


@pytest.fixture(scope="module")
def fuzz_built() -> None:
    """The harnesses, fuzzcli and tsan_pool, in one make (one compiler per core)."""
    made = subprocess.run(["make", "-s", f"-j{os.cpu_count() or 1}", "-C",
                           str(REPO_ROOT / "drivers"), "fuzz", "tsan"],
                          capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stdout + made.stderr


@pytest.mark.parametrize("harness", harnesses())
def test_each_harness_runs_clean_on_its_corpus(harness: str, fuzz_built: None,
                                               tmp_path: Path) -> None:
    run = run_harness(harness, HARNESS_CAP_S, tmp_path,
                      flags=[f"-runs={HARNESS_RUNS}", f"-seed={HARNESS_SEED}"])
    log = (tmp_path / harness / "libfuzzer.log").read_text(errors="replace")
    assert run.clean, log[-4000:]
    # It ran: past its seeds, with coverage that libFuzzer counted.
    assert run.executions >= HARNESS_RUNS and run.coverage > 0 and run.features > 0, log[-2000:]


# The inputs behind docs/method/fuzz.md's "What the harnesses found", kept in each harness's
# corpus as finding-<name>: the harness holds the rule it once stepped around.
FINDINGS = [("rdtext", "loc-17-digits"), ("rdtext", "generic-after-a-tab"),
            ("rdtext", "svcb-key0-is-mandatory"), ("update", "add-without-a-line"),
            ("update", "wildcard-owner-after-a-name-below")]


@pytest.mark.parametrize(("harness", "finding"), FINDINGS, ids=[f for _, f in FINDINGS])
def test_a_reported_finding_passes_its_harness(harness: str, finding: str, fuzz_built: None,
                                               tmp_path: Path) -> None:
    """The finding's input alone through its harness (libFuzzer runs a file once), as the
    servers' user as every harness run: no sanitizer report, no failed check."""
    give_to_service_user(tmp_path)
    done = subprocess.run([str(BUILT / f"fuzz_{harness}"), f"-artifact_prefix={tmp_path}/",
                           str(SOURCES / "corpus" / harness / f"finding-{finding}")],
                          capture_output=True, text=True, cwd=tmp_path, check=False,
                          timeout=HARNESS_CAP_S, env=service_environment(),
                          **as_user(service_user()))
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"Executed {SOURCES}" in done.stderr, done.stderr[-2000:]


def test_a_failing_input_is_a_crash_with_its_input_kept(fuzz_built: None,
                                                        tmp_path: Path) -> None:
    """libFuzzer's own verdict on an input, read back: with a 1 MB allocation limit, a node
    value of 40,000 records (640 kB, whose rows take 1.6 MB) is an out-of-memory crash; the run
    says so and keeps the input."""
    scratch = tmp_path / "records" / "corpus"
    scratch.mkdir(parents=True)
    (scratch / "big").write_bytes(b"A 300 192.0.2.1\n" * 40000)
    run = run_harness("records", 5, tmp_path, flags=["-malloc_limit_mb=1"])
    assert not run.clean and run.exit_code != 0
    assert [name.split("-")[0] for name in run.crashes] == ["oom"]
    assert run.finding.startswith("ERROR: libFuzzer: out-of-memory (malloc(")
    assert "1 CRASH(ES)" in run.line()


# --- the normaliser against named and dnspython ---------------------------------------------

_DIGESTS = {1: 20, 2: 32, 4: 48}  # DS digest type -> octets


def _hex(rng: random.Random, octets: int) -> str:
    return rng.randbytes(octets).hex()


def _b64(rng: random.Random, octets: int) -> str:
    return base64.b64encode(rng.randbytes(octets)).decode()


def _seconds(rng: random.Random) -> str:
    return f"{rng.randrange(60)}.{rng.randrange(1000):03d}"


def _random_texts(rng: random.Random) -> list[tuple[str, str]]:
    """One record of each binary-tailed type, LOC and an unknown type, with random values."""
    digest = rng.choice(list(_DIGESTS))
    when = "20301231000000 20201231000000"
    return [
        ("DS", f"{rng.randrange(65536)} 8 {digest} {_hex(rng, _DIGESTS[digest])}"),
        ("CDS", f"{rng.randrange(65536)} 13 {digest} {_hex(rng, _DIGESTS[digest])}"),
        ("DNSKEY", f"{rng.choice((256, 257))} 3 8 {_b64(rng, rng.randrange(64, 300))}"),
        ("CDNSKEY", f"257 3 13 {_b64(rng, 64)}"),
        ("RRSIG", f"A 8 3 300 {when} {rng.randrange(65536)} cov.test. "
                  f"{_b64(rng, rng.randrange(64, 300))}"),
        ("SSHFP", f"{rng.randrange(1, 5)} 2 {_hex(rng, 32)}"),
        ("TLSA", f"3 1 1 {_hex(rng, 32)}"),
        ("SMIMEA", f"3 0 2 {_hex(rng, 64)}"),
        ("ZONEMD", f"{rng.randrange(1 << 32)} 1 1 {_hex(rng, 48)}"),
        ("LOC", f"{rng.randrange(90)} {rng.randrange(60)} {_seconds(rng)} {rng.choice('NS')} "
                f"{rng.randrange(180)} {rng.randrange(60)} {_seconds(rng)} {rng.choice('EW')} "
                f"{rng.randrange(-1000, 10000)}.{rng.randrange(100):02d}m "
                f"{rng.choice(('1m', '10m', '0.50m', '200m'))} "
                f"{rng.choice(('10000m', '2000m', '5m'))} {rng.choice(('10m', '1m', '30m'))}"),
        ("TYPE65534", f"\\# {(n := rng.randrange(1, 80))} {_hex(rng, n)}"),
    ]


def _loader_text(rdtype: str, text: str) -> str:
    """What the loaders store: dnspython's text of the record (zonedata.model.from_rdata)."""
    rdata = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.from_text(rdtype), text)
    return rdata.to_text(origin=None, relativize=False)


def _named_text(rdtype: str, text: str) -> str:
    """named's text of the same record (named-rrchecker: BIND's own parser and printer)."""
    done = subprocess.run(["named-rrchecker", "-p"], input=f"IN {rdtype} {text}\n",
                          capture_output=True, text=True, check=True)
    return done.stdout.rstrip("\n").split("\t", 2)[2]


def _normalised(fuzzcli: Path, pairs: list[tuple[str, str]]) -> list[str]:
    requests = "".join(f"{t.encode().hex()} {x.encode().hex()}\n" for t, x in pairs)
    done = subprocess.run([str(fuzzcli), "rdtext"], input=requests, capture_output=True,
                          text=True, check=True)
    return [bytes.fromhex(line).decode() for line in done.stdout.splitlines()]


def test_the_normaliser_turns_named_text_into_the_stored_text(fuzz_built: None) -> None:
    """For every record of the coverage data set (every type the suite stores) and random
    records of each type with a binary tail, LOC and an unknown type: named's text of it,
    normalised, is the text the loaders store, and that text normalised is itself."""
    rng = random.Random(7)
    records = {(r.rdtype, r.rdata) for zone in coverage_zones() for r in zone.records}
    records |= {pair for _ in range(12) for pair in _random_texts(rng)}
    stored = sorted((rdtype, _loader_text(rdtype, text)) for rdtype, text in records)
    with ThreadPoolExecutor(max_workers=4) as pool:  # one named-rrchecker per record
        texts = list(pool.map(lambda pair: _named_text(*pair), stored))
    named = [(rdtype, text) for (rdtype, _), text in zip(stored, texts, strict=True)]
    fuzzcli = BUILT / "fuzzcli"
    from_named = _normalised(fuzzcli, named)
    from_store = _normalised(fuzzcli, stored)
    wrong = [f"{t}: named {n!r} -> {got!r}, stored {s!r}"
             for (t, s), (_, n), got in zip(stored, named, from_named, strict=True) if got != s]
    assert not wrong, f"{len(wrong)} of {len(stored)}:\n" + "\n".join(wrong[:10])
    changed = [f"{t}: {s!r} -> {got!r}"
               for (t, s), got in zip(stored, from_store, strict=True) if got != s]
    assert not changed, "\n".join(changed[:10])
    assert len(stored) > 300


# --- bdbhpt's owner list against a sorted set -------------------------------------------------


def _owner(rng: random.Random) -> str:
    labels = [rng.choice(("a", "b", "ab", "*", "x-1", "\\@", "\\032", "z", "aa"))
              for _ in range(rng.randrange(1, 4))]
    return ".".join([*labels, "example"])


def test_the_owner_list_edit_is_a_sorted_set(fuzz_built: None) -> None:
    """Sorted lists of distinct owners (as the loader writes them), an owner put in or taken
    out, present or not: bdbhpt's edit gives Python's sorted set of the same, bytewise."""
    rng = random.Random(11)
    cases = []
    for _ in range(2000):
        owners = sorted({_owner(rng) for _ in range(rng.randrange(0, 12))},
                        key=str.encode)
        owner = rng.choice([*owners, _owner(rng)]) if owners else _owner(rng)
        cases.append((rng.random() < 0.5, owner, owners))
    requests = "".join(f"{'+' if put else '-'}{owner.encode().hex()} "
                       f"{''.join(o + chr(10) for o in owners).encode().hex()}\n"
                       for put, owner, owners in cases)
    done = subprocess.run([str(BUILT / "fuzzcli"), "ownerlist"], input=requests,
                          capture_output=True, text=True, check=True)
    answers = [bytes.fromhex(line).decode() for line in done.stdout.splitlines()]
    assert len(answers) == len(cases)
    for (put, owner, owners), got in zip(cases, answers, strict=True):
        model = sorted(set(owners) | {owner} if put else set(owners) - {owner},
                       key=str.encode)
        assert got == "".join(o + "\n" for o in model), (put, owner, owners)


# --- ThreadSanitizer ------------------------------------------------------------------------


def test_the_pool_and_updates_are_clean_under_threadsanitizer(fuzz_built: None,
                                                             tmp_path: Path) -> None:
    """drivers/fuzz/tsan_pool.c: readers, an updater and a store that fails and recovers
    every millisecond, then the store working and every answer and update required; TSan
    reports nothing and the updates left what they wrote."""
    env = {**os.environ, "TSAN_OPTIONS": "halt_on_error=1 exitcode=66 second_deadlock_stack=1"}
    done = subprocess.run([str(REPO_ROOT / "build" / "tsan" / "tsan_pool"), str(tmp_path)],
                          capture_output=True, text=True, env=env, check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-6000:]
    assert "ThreadSanitizer" not in done.stderr
    assert "0 failed checks" in done.stdout and " SERVFAIL, all during outages" in done.stdout
