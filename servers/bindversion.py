"""Which BIND the suite runs: Debian 12's own 9.18, or Debian 13's 9.20 from a root of its own.

The one place that knows what differs between them: the command that runs a BIND program
(named, rndc, named-checkconf, named -v), and where the drivers built for it are.

BIND 9.20 lives in a Debian 13 root that `make deps BIND=9.20` makes with mmdebstrap under
.roots/trixie. Its programs run in a private mount namespace (unshare) in which the root's /usr
and /etc are mounted over the host's: named 9.20, its libraries and the drivers' client
libraries are Debian 13's, while every other path (the repository, run directories, the
databases' unix sockets under them) stays the host's, so a named.conf written for 9.18 is
valid unchanged. In that namespace the drivers built for 9.20 (build/bind-9.20/<d>/) are also
mounted over drivers/, and build/bind-9.20/asan/ over build/asan/, so the paths in every
driver's dlz clause load the build made against the root's libraries. The namespace, and
with it every mount, ends with its last process: nothing is left mounted on exit, Ctrl-C or
failure.

The choice is DLZBENCH_BIND (9.18 when unset), which `--bind` and `make ... BIND=` set; child
processes inherit it.

`python3 -m servers.bindversion 9.20 COMMAND...` runs COMMAND with BIND 9.20's /usr and /etc
(without the drivers' mounts): the Makefile builds the drivers for 9.20 with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from base.errors import UserError
from base.paths import DRIVERS_DIR, REPO_ROOT
from base.process import dropping_to_service_user
from base.versions import NOT_INSTALLED, command_output

ENV = "DLZBENCH_BIND"
DEFAULT = "9.18"

_DRIVERS = DRIVERS_DIR
_ASAN = REPO_ROOT / "build" / "asan"
# The Makefile writes this file into a root once mmdebstrap has made it completely.
_ROOT_STAMP = ".dlzbench-root"

# $1 root, $2 mount the driver builds (1/0; only when they are built: native BIND 9.20 runs
# without them), $3 drivers build, $4 drivers/, $5 ASan build, $6 build/asan; then the
# command. `mount` is the host's for the first mount, the root's after.
_ENTER = """
root=$1 with_drivers=$2 built=$3 drivers=$4 asan_built=$5 asan=$6
shift 6
mount --bind "$root/usr" /usr
mount --bind "$root/etc" /etc
if [ "$with_drivers" = 1 ] && [ -d "$built" ]; then
    mount --bind "$built" "$drivers"
    if [ -d "$asan_built" ]; then
        mkdir -p "$asan"
        mount --bind "$asan_built" "$asan"
    fi
fi
exec "$@"
"""


@dataclass(frozen=True)
class Bind:
    """One BIND the suite can run: `version` is "9.18" or "9.20"."""

    version: str
    root: Path | None  # a Debian root whose /usr and /etc replace the host's; None: the host's
    drivers: Path  # the drivers built for this BIND: <drivers>/<d>/dlz_<d>.so
    asan: Path  # their AddressSanitizer builds
    lock_file: bool  # named.conf has the lock-file option (9.20 removed it)

    def command(self, argv: Sequence[str], *, with_drivers: bool = True,
                as_service_user: bool = False) -> list[str]:
        """argv as run with this BIND's programs and libraries (and its driver builds).

        From a root, the mount namespace needs root to make, so a process that is to run as
        the service user (named) drops to it once inside (setpriv, the root's own) rather
        than by named's own -u, which would leave named root until it had read its
        configuration and loaded the drivers; it is then started with
        ManagedProcess(as_root=True). On the host's BIND, argv is the process itself,
        started as the service user."""
        if self.root is None:
            return list(argv)
        inside = dropping_to_service_user(argv) if as_service_user else argv
        return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-ec",
                _ENTER, "enter-bind-root", str(self.root), "1" if with_drivers else "0",
                str(self.drivers), str(_DRIVERS), str(self.asan), str(_ASAN), *inside]

    @property
    def rndc(self) -> list[str]:
        return self.command(["/usr/sbin/rndc"], with_drivers=False)

    @property
    def checkconf(self) -> list[str]:
        return self.command(["/usr/bin/named-checkconf"], with_drivers=False)

    @property
    def compilezone(self) -> list[str]:
        return self.command(["/usr/bin/named-compilezone"], with_drivers=False)

    def version_line(self) -> str:
        """`named -v`'s line, e.g. "BIND 9.20.30-1~deb13u1-Debian (Stable Release) <id:>"."""
        argv = self.command(["/usr/sbin/named", "-v"], with_drivers=False)
        try:
            out = subprocess.run(argv, capture_output=True, text=True, check=True,
                                 timeout=30).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise UserError(f"BIND {self.version}: `named -v` failed: {exc}") from exc
        return out.strip()


_HOST = Bind("9.18", None, _DRIVERS, _ASAN, lock_file=True)
_TRIXIE = Bind("9.20", REPO_ROOT / ".roots" / "trixie", REPO_ROOT / "build" / "bind-9.20",
               REPO_ROOT / "build" / "bind-9.20" / "asan", lock_file=False)
BINDS = {b.version: b for b in (_HOST, _TRIXIE)}


def select(version: str, *, need_drivers: bool = True) -> Bind:
    """The BIND named by version, checked to be installed (and its drivers built)."""
    bind = BINDS.get(version)
    if bind is None:
        raise UserError(f"BIND {version!r} (--bind or {ENV}): this suite runs 9.18 (Debian 12's "
                        f"own) or 9.20 (Debian 13's, installed by `make deps BIND=9.20`)")
    if bind.root is not None and not (bind.root / _ROOT_STAMP).is_file():
        raise UserError(f"BIND {version} is not installed here: `make deps BIND={version}` "
                        f"makes its Debian root {bind.root}")
    if need_drivers and bind.root is not None and not bind.drivers.is_dir():
        raise UserError(f"no drivers are built for BIND {version} ({bind.drivers}): "
                        f"run `make build BIND={version}`")
    return bind


def selected(*, need_drivers: bool = True) -> Bind:
    """The BIND this process runs: DLZBENCH_BIND, else 9.18."""
    return select(os.environ.get(ENV) or DEFAULT, need_drivers=need_drivers)


def choose(version: str | None) -> Bind:
    """--bind's value (None: not given) checked, and made the choice of this process and its
    children."""
    if version is None:
        return selected()
    bind = select(version)
    os.environ[ENV] = bind.version
    return bind


def version_text(version: str | None = None) -> str:
    """`named -v`'s line of BIND `version` (None: the one this process runs), for a run's
    metadata; NOT_INSTALLED when that BIND is not."""
    try:
        bind = selected(need_drivers=False) if version is None else \
            select(version, need_drivers=False)
    except UserError:
        return NOT_INSTALLED
    return command_output(bind.command(["/usr/sbin/named", "-v"], with_drivers=False))


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python3 -m servers.bindversion VERSION COMMAND...", file=sys.stderr)
        return 2
    try:
        bind = select(argv[0], need_drivers=False)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return subprocess.run(bind.command(argv[1:], with_drivers=False), check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
