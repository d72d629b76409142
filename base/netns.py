"""A private network namespace standing for "the database host", joined to this one by a veth pair.

`with DatabaseHost() as host:` creates the namespace, one veth pair with a /30 from 198.18.0.0/15
(the range RFC 2544 sets aside for benchmarking; nothing in it is routed off this machine, and the
pair has no route anywhere but to itself), and brings loopback up inside. A server started with
`host.command(argv)` runs inside it and is reached from here at `host.address`; this side of the
pair is `host.peer_address`, the address its clients come from. A service listening on the
namespace's own loopback is reached by no process outside it; `host.connect(...)` makes a
connection from inside (entering a namespace needs root). The latency proxy's control API
(base/latency_proxy.py) listens there so that only the suite reaches it.

Names and addresses are unique per instance, so two runs at once never collide: the namespace
name carries the owner's pid and a random tag, the /30 is picked at random among those no
interface on this machine uses, and both are chosen under one lock file so two runs cannot pick
the same free block at the same moment. Everything is removed when the block ends, on an
exception, on Ctrl-C and on SIGTERM (base.process turns it into KeyboardInterrupt);
a namespace left by a run that was killed outright is removed by the next one (its owner pid is
in its name).
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import ipaddress
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from base.errors import UserError
from base.process import _install_signal_handlers, dropping_to_service_user

IP = "/usr/sbin/ip"
BENCHMARK_NET = ipaddress.ip_network("198.18.0.0/15")
NAME_PREFIX = "dlzb-"
_LOCK_PATH = Path("/run/dlzbench-netns.lock")
_NETNS_DIR = Path("/run/netns")
# Signals held while the namespace is being made or removed, so that neither is left half done;
# a signal that arrives meanwhile is delivered (and unwinds as usual) right after.
_HELD = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
_LIVE: dict[str, DatabaseHost] = {}
# setns(2)'s flag for a network namespace (Python 3.11 has no os.setns).
_CLONE_NEWNET = 0x40000000
_LIBC = ctypes.CDLL(None, use_errno=True)


class DatabaseHost:
    """One network namespace with a veth pair to this one; a context manager that removes it."""

    def __init__(self) -> None:
        tag = secrets.token_hex(3)
        self.name = f"{NAME_PREFIX}{os.getpid()}-{tag}"
        # Interface names hold at most 15 bytes; the tag keeps them apart between instances.
        self.host_interface = f"dlzb{tag}h"
        self.inner_interface = f"dlzb{tag}n"
        self.peer_address = ""  # this side of the pair, set when created
        self.address = ""  # inside the namespace, where its servers listen
        self._created = False

    # --- use ----------------------------------------------------------------------------------

    def prefix(self) -> list[str]:
        """The argv prefix that runs a command inside the namespace."""
        return [IP, "netns", "exec", self.name]

    def command(self, argv: Sequence[str], *, as_service_user: bool = False) -> list[str]:
        """argv run inside the namespace; as the service user if as_service_user.

        Entering a namespace needs root, so a server (every one runs as the service user:
        base.process) drops to that user inside it instead of being started as it; the
        process is then started with ManagedProcess(as_root=True).
        """
        drop = dropping_to_service_user if as_service_user else list
        return [*self.prefix(), *drop(argv)]

    def connect(self, address: str, port: int, timeout: float) -> socket.socket:
        """A TCP connection to address:port made from inside the namespace: to a service on
        its loopback, which nothing outside reaches. A socket stays in the namespace it was
        made in, wherever it is used; setns() moves only the thread calling it, so a thread
        of its own enters the namespace, connects and ends (it needs CAP_SYS_ADMIN: root)."""
        outcome: list[socket.socket | OSError] = []

        def inside() -> None:
            try:
                self._enter()
                outcome.append(socket.create_connection((address, port), timeout))
            except OSError as exc:
                outcome.append(exc)

        thread = threading.Thread(target=inside, name=f"connect in {self.name}")
        thread.start()
        thread.join()
        if isinstance(outcome[0], OSError):
            raise outcome[0]
        return outcome[0]

    def _enter(self) -> None:
        """This thread into the namespace."""
        with open(_NETNS_DIR / self.name, "rb") as namespace:
            if _LIBC.setns(namespace.fileno(), _CLONE_NEWNET) != 0:
                error = ctypes.get_errno()
                raise OSError(error, f"setns into {self.name}: {os.strerror(error)}")

    def pids(self) -> list[int]:
        """Processes running inside the namespace."""
        out = _ip("netns", "pids", self.name, check=False)
        return [int(word) for word in out.split()]

    # --- life cycle ---------------------------------------------------------------------------

    def create(self) -> None:
        _install_signal_handlers()
        try:
            with _signals_held(), _allocation_lock():
                remove_stale()
                self._create()
        except BaseException:
            self.remove()
            raise

    def _create(self) -> None:
        network = _free_block()
        host_ip, inner_ip = list(network.hosts())
        _ip("netns", "add", self.name)
        self._created = True
        _LIVE[self.name] = self
        _ip("link", "add", self.host_interface, "type", "veth",
            "peer", "name", self.inner_interface, "netns", self.name)
        _ip("addr", "add", f"{host_ip}/{network.prefixlen}", "dev", self.host_interface)
        _ip("link", "set", self.host_interface, "up")
        inside = ["-n", self.name]
        _ip(*inside, "addr", "add", f"{inner_ip}/{network.prefixlen}", "dev", self.inner_interface)
        _ip(*inside, "link", "set", self.inner_interface, "up")
        _ip(*inside, "link", "set", "lo", "up")
        self.peer_address, self.address = str(host_ip), str(inner_ip)

    def remove(self) -> None:
        """Stop whatever still runs inside, then delete the pair and the namespace (idempotent)."""
        if not self._created:
            return
        with _signals_held():
            _remove_namespace(self.name, self.host_interface)
            self._created = False
            _LIVE.pop(self.name, None)

    def __enter__(self) -> DatabaseHost:
        self.create()
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def exists(name: str) -> bool:
    return (_NETNS_DIR / name).exists()


def interface_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def remove_stale() -> None:
    """Remove namespaces of ours whose owner process is gone (it was killed with SIGKILL)."""
    if not _NETNS_DIR.is_dir():
        return
    for entry in _NETNS_DIR.iterdir():
        owner = _owner_pid(entry.name)
        if owner is not None and not Path(f"/proc/{owner}").exists():
            tag = entry.name.rsplit("-", 1)[1]
            _remove_namespace(entry.name, f"dlzb{tag}h")


def _owner_pid(name: str) -> int | None:
    parts = name.split("-")
    if len(parts) == 3 and f"{parts[0]}-" == NAME_PREFIX and parts[1].isdigit():
        return int(parts[1])
    return None


def _remove_namespace(name: str, host_interface: str) -> None:
    # A namespace lives on while a process holds it, and its veth with it: kill those first
    # (they are ours: the servers this run started in it, normally stopped already).
    for word in _ip("netns", "pids", name, check=False).split():
        try:
            os.kill(int(word), signal.SIGKILL)
        except ProcessLookupError:
            pass
    # Deleting one end of a veth pair deletes both.
    if interface_exists(host_interface):
        _ip("link", "del", host_interface, check=False)
    if exists(name):
        _ip("netns", "del", name, check=False)


def _free_block() -> ipaddress.IPv4Network:
    """A random /30 of 198.18.0.0/15 that no address on this machine falls in."""
    used = _addresses_in_use()
    blocks = BENCHMARK_NET.num_addresses // 4
    for _ in range(200):
        index = random.randrange(blocks)
        network = ipaddress.ip_network(f"{BENCHMARK_NET.network_address + 4 * index}/30")
        if not any(address in network for address in used):
            return network  # type: ignore[return-value]
    raise UserError("no free /30 left in 198.18.0.0/15 for a database namespace")


def _addresses_in_use() -> list[ipaddress.IPv4Address]:
    """IPv4 addresses on this namespace's interfaces and on those of our other namespaces."""
    listings = [_ip("-j", "-4", "addr", "show")]
    if _NETNS_DIR.is_dir():
        listings += [_ip("-n", e.name, "-j", "-4", "addr", "show", check=False)
                     for e in _NETNS_DIR.iterdir() if e.name.startswith(NAME_PREFIX)]
    found = []
    for text in listings:
        for link in json.loads(text or "[]"):
            for info in link.get("addr_info", []):
                found.append(ipaddress.IPv4Address(info["local"]))
    return found


def _ip(*args: str, check: bool = True) -> str:
    try:
        done = subprocess.run([IP, *args], capture_output=True, text=True, check=False,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"ip {' '.join(args)} failed: {exc}") from exc
    if check and done.returncode != 0:
        raise UserError(f"ip {' '.join(args)} failed (exit {done.returncode}): "
                        f"{done.stderr.strip()} (a database namespace needs root and iproute2)")
    return done.stdout


@contextmanager
def _allocation_lock() -> Iterator[None]:
    with open(_LOCK_PATH, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def _signals_held() -> Iterator[None]:
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _remove_all() -> None:
    for host in list(_LIVE.values()):
        host.remove()


atexit.register(_remove_all)
