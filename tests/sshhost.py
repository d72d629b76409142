"""For tests of `--load-from`: a "load host" made of a network namespace (base/netns.py) with
a private sshd in it, started for the test and stopped after it.

The sshd is Debian's (openssh-server), run with a configuration, host key, authorized key and
pid file of its own in a private directory, listening only on the namespace's address: the
system's sshd, /etc/ssh and ~/.ssh are never read or touched. Its sessions get TMPDIR set to a
directory of the test's (SetEnv), so what a run leaves in the load host's temporary area can be
seen. The client side is a private ssh configuration file (`--ssh-config`): the test's key,
and a known_hosts holding this sshd's host key only.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from base.netns import IP, DatabaseHost
from base.process import ManagedProcess, free_port

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "/usr/bin/ssh-keygen"
# sshd's privilege-separation directory; Debian's service makes it at start, so a machine that
# never started the system's sshd lacks it.
PRIVSEP_DIR = Path("/run/sshd")


class SshLoadHost:
    """A namespace with its sshd; `with` makes both and always removes both."""

    def __init__(self) -> None:
        self.namespace = DatabaseHost()
        self.directory = Path(tempfile.mkdtemp(prefix="dlzb-ssh-", dir="/tmp"))
        self.remote_tmp = self.directory / "remote-tmp"
        self.ssh_config = self.directory / "ssh_config"
        self.port = free_port()
        self._sshd: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"ssh://root@{self.namespace.address}:{self.port}"

    @property
    def server_address(self) -> str:
        """The address of this machine the namespace reaches (its side of the veth pair)."""
        return self.namespace.peer_address

    def reach(self, address: str) -> None:
        """Route address (one of this machine's, on another namespace's pair) through this
        namespace's pair, so this load host reaches a server listening there."""
        subprocess.run([IP, "-n", self.namespace.name, "route", "add", f"{address}/32",
                        "dev", self.namespace.inner_interface], check=True)

    def __enter__(self) -> SshLoadHost:
        try:
            self.namespace.create()
            self._start_sshd()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sshd is not None:
            self._sshd.stop()
            self._sshd = None
        self.namespace.remove()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _start_sshd(self) -> None:
        d = self.directory
        self.remote_tmp.mkdir()
        for key in ("host_key", "client_key"):
            subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", "dlzbench-test",
                            "-f", str(d / key)], check=True)
        (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
        host_key = (d / "host_key.pub").read_text().split()
        (d / "known_hosts").write_text(
            f"[{self.namespace.address}]:{self.port} {host_key[0]} {host_key[1]}\n")
        (d / "sshd_config").write_text(
            f"ListenAddress {self.namespace.address}:{self.port}\n"
            f"HostKey {d / 'host_key'}\n"
            f"PidFile {d / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {d / 'authorized_keys'}\n"
            "UsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\nStrictModes no\nPrintMotd no\n"
            "AllowTcpForwarding no\nX11Forwarding no\nMaxSessions 50\nMaxStartups 50\n"
            f"SetEnv TMPDIR={self.remote_tmp}\n"
            "Subsystem sftp internal-sftp\nLogLevel VERBOSE\n")
        self.ssh_config.write_text(
            "Host *\n"
            f"  IdentityFile {d / 'client_key'}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {d / 'known_hosts'}\n  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n")
        PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
        log = d / "sshd.log"
        # As root: it stands for another machine, which the suite's ssh logs into as root.
        self._sshd = ManagedProcess("sshd", self.namespace.command(
            [SSHD, "-D", "-E", str(log), "-f", str(d / "sshd_config")]), d / "sshd.out",
            as_root=True)
        self._sshd.start()
        self._sshd.wait_ready(lambda: "Server listening" in _text(log), timeout=20)


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
