"""A program's version as this machine has it, for a run's metadata: the servers' own software
(servers/: each kind says how its version is read) and the databases' (bench/measure/
metadata.py). A missing program is NOT_INSTALLED and an unreadable answer UNKNOWN: reading a
version never fails a run.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

NOT_INSTALLED = "not installed"
UNKNOWN = "unknown"


def command_output(argv: Sequence[str]) -> str:
    """First non-empty line of a command's stdout+stderr; NOT_INSTALLED if it cannot run."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=20,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return NOT_INSTALLED
    for line in (done.stdout + "\n" + done.stderr).splitlines():
        if line.strip():
            return _tidy(line, argv[0])
    return UNKNOWN


def _tidy(line: str, program: str) -> str:
    """Drop what is not version: slapd's "@(#) $OpenLDAP: ... $" frame, a program's path."""
    line = line.strip().removeprefix("@(#) $OpenLDAP: ").removesuffix("$").strip()
    if line.startswith(program):
        line = Path(program).name + " " + line.removeprefix(program).strip()
    return line


def package_version(package: str) -> str:
    """A Debian package's installed version, via dpkg-query."""
    out = command_output(["dpkg-query", "-W", "-f=${Status} ${Version}", package])
    parts = out.split()
    if len(parts) == 4 and parts[2] == "installed":
        return parts[3]
    return NOT_INSTALLED
