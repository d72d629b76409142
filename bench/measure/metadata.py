"""What a result was measured on: software versions, machine, repository state, date.

Every probe turns a missing tool into "not installed" and an unreadable file into "unknown":
collecting metadata never fails a run. Nothing that names the machine (hostname) is kept.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path

from base.paths import REPO_ROOT
from base.versions import NOT_INSTALLED, UNKNOWN, command_output
from bench.load import dnsperf
from bench.load.hosts import LoadHost, file_digest
from bench.load.prober import PROBER_BIN
from servers import named_version, software_keys, software_versions

# key -> command whose first output line is the version of a store's database software
# (slapd -VV writes to stderr). The servers' own software (BIND, PowerDNS, NSD, Knot) is each
# server kind's to read (servers.software_versions).
_VERSION_COMMANDS: dict[str, list[str]] = {
    "postgresql": ["/usr/lib/postgresql/15/bin/postgres", "--version"],
    "mariadb": ["/usr/sbin/mariadbd", "--version"],
    "slapd": ["/usr/sbin/slapd", "-VV"],
    "berkeley_db": ["/usr/bin/db_stat", "-V"],
}


def other_bind_versions(versions: set[str]) -> dict[str, str]:
    """`named -v` of each BIND some rows run besides the run's own (NAME@VERSION rows)."""
    return {version: named_version(version) for version in sorted(versions)}


def dnsperf_version() -> str:
    """The dnsperf every run uses: Debian 13's, in the root the Makefile makes
    (bench/load/dnsperf.py), with its Debian package version read from that root."""
    found = dnsperf.version()
    if found is None:
        return NOT_INSTALLED
    root = dnsperf.ROOT.root
    package = command_output(["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W",
                              "-f=${Version}", "dnsperf"])
    return f"dnsperf {found} (Debian {package}, in {root.name if root else UNKNOWN})"


def load_from(hosts: Sequence[LoadHost]) -> dict[str, object]:
    """What the load came from when it ran on load hosts (`--load-from`): each host's dnsperf
    and resperf (Debian package version too), kernel, OS, CPU and glibc as read there when it
    was opened; "dnsperf" then names those dnsperfs, not this machine's unused one."""
    if not hosts:
        return {}
    described = [host.described() for host in hosts]
    return {"load_from": described,
            "dnsperf": "; ".join(f"{d.get('dnsperf', UNKNOWN)} on {d['url']}"
                                 for d in described),
            "prober": f"built here (sha256 {file_digest(PROBER_BIN)}), copied to each load "
                      "host; its floor measured here"}


def cpu_description() -> dict[str, object]:
    """CPU model, logical CPUs, and those this process may run on."""
    model = UNKNOWN
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu_model": model, "cpu_count": os.cpu_count() or 0,
            "cpu_usable": len(os.sched_getaffinity(0))}


def memory_kb() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return UNKNOWN


def boot_id() -> str:
    """The kernel's id of this boot: two runs with different ids ran on different boots (or
    machines), whose speeds differ by up to 2x on this VM, so no ratio is taken between
    them."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return UNKNOWN


def git_state() -> dict[str, object]:
    """The repository's commit and whether the working tree differs from it."""
    commit = command_output(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"])
    if len(commit) != 40:
        return {"git_commit": UNKNOWN, "git_dirty": None}
    try:
        status = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain"],
                                capture_output=True, text=True, timeout=20, check=False)
        dirty: bool | None = bool(status.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        dirty = None
    return {"git_commit": commit, "git_dirty": dirty}


def collect() -> dict[str, object]:
    """Versions, machine and repository state, as a flat JSON-ready dict."""
    meta: dict[str, object] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    meta.update(software_versions())
    for key, argv in _VERSION_COMMANDS.items():
        meta[key] = command_output(argv)
    meta["dnsperf"] = dnsperf_version()
    meta["python"] = platform.python_version()
    meta["kernel"] = platform.release()
    meta["os"] = os_release()
    meta["machine"] = platform.machine()
    meta.update(cpu_description())
    meta["memory_kb"] = memory_kb()
    meta["boot_id"] = boot_id()
    meta.update(git_state())
    return meta


METADATA_KEYS = ("date", *software_keys(), *_VERSION_COMMANDS, "dnsperf", "python", "kernel",
                 "os", "machine", "cpu_model", "cpu_count", "cpu_usable", "memory_kb", "boot_id",
                 "git_commit", "git_dirty")

# What an added run (`--add-to`) is compared on with the run that made the results: a point
# measured on other software or another machine must say so beside the first run's.
_RUN_KEYS = ("date", "git_commit", "git_dirty")
_COMPARED_KEYS = tuple(k for k in METADATA_KEYS if k not in _RUN_KEYS)


def added_run(earlier: dict, now: dict) -> dict:
    """The record of a run adding points to results first measured with `earlier`'s metadata:
    its date and commit, and every version or machine fact that differs ({} when none)."""
    differs = {key: now.get(key) for key in _COMPARED_KEYS
               if key in earlier and now.get(key) != earlier.get(key)}
    return {**{k: now.get(k) for k in _RUN_KEYS}, "differs": differs}
