"""A private DNS server process: what the runner, `serve`, `verify`, `startup`, `capacity`,
`tune` and `scale` use of any server they measure (named, PowerDNS, NSD, Knot).

A subclass writes its own configuration into its run directory and says how to exec the
server, which log line means "every zone is loaded" and how to make it read a store update;
starting, the readiness wait, querying, CPU and memory accounting (pids) and stopping are
the same for every server and live here.
"""

from __future__ import annotations

import re
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, NoReturn, Self

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode

from base.errors import UserError
from base.process import ManagedProcess, free_port, give_to_service_user, run_checked
from base.transports import TlsFiles

_ENTER_TIMEOUT = 120.0
_STOP_TIMEOUT = 15.0
# Per-try timeout while polling: short, so a lost datagram costs little, yet long enough for
# a server that has to ask its database before answering.
_POLL_TRY_TIMEOUT = 0.5
# Pause between tries when nothing listens yet (the refusal comes back at once).
_POLL_PAUSE = 0.002


def non_recursive_query(qname: str | dns.name.Name, rdtype: str,
                        payload: int | None = None, dnssec: bool = False) -> dns.message.Message:
    """A query without RD (every server here is authoritative only); with EDNS0 advertising
    payload octets when given, and the DO bit when dnssec (which needs EDNS0)."""
    if dnssec and payload is None:
        raise ValueError("the DO bit needs EDNS0: give a payload")
    query = dns.message.make_query(qname, rdtype, use_edns=None if payload is None else 0,
                                   payload=payload, want_dnssec=dnssec)
    query.flags &= ~dns.flags.RD
    return query


# The most a process may ask for its socket receive buffer (SO_RCVBUF is capped at it). The
# suite sizes every server's UDP receive buffer to it and does not change it: on this machine
# it is 4 MiB against a 208 KiB default (rmem_default), and a setting of the machine's is not
# the suite's to raise.
RMEM_MAX = Path("/proc/sys/net/core/rmem_max")


def kernel_rmem_max() -> int | None:
    try:
        return int(RMEM_MAX.read_text())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class ReceiveBuffer:
    """A server's UDP receive-buffer setting: its option's name (None: it has none), the bytes
    given to it (None: not set), the kernel's rmem_max when it was chosen, and a note."""

    option: str | None
    bytes: int | None
    rmem_max: int | None
    note: str = ""

    @classmethod
    def sized_to_rmem_max(cls, option: str, note: str = "") -> ReceiveBuffer:
        limit = kernel_rmem_max()
        return cls(option, limit, limit, note)

    @classmethod
    def none(cls, note: str) -> ReceiveBuffer:
        return cls(None, None, kernel_rmem_max(), note)

    def record(self) -> dict:
        return {"option": self.option, "bytes": self.bytes, "rmem_max": self.rmem_max,
                "note": self.note}


def address_family(host: str) -> socket.AddressFamily:
    """The socket family of an IPv4 or IPv6 address."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _remaining(deadline: float) -> float:
    """Seconds left until deadline (time.monotonic()); dnspython's Timeout when none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise dns.exception.Timeout
    return left


def _is_reply_to(reply: bytes, query: bytes) -> bool:
    """Whether a message carries the query's ID and the QR bit (the question is the parser's
    to check)."""
    return len(reply) >= 12 and reply[:2] == query[:2] and bool(reply[2] & 0x80)


def _udp_exchange(host: str, port: int, query: bytes, deadline: float) -> bytes:
    """A datagram from elsewhere, or one that is no reply to this query (a late one to an
    earlier query that had this socket's port), is ignored: the wait goes on to the deadline."""
    with socket.socket(address_family(host), socket.SOCK_DGRAM) as sock:
        sock.sendto(query, (host, port))
        while True:
            sock.settimeout(_remaining(deadline))
            reply, source = sock.recvfrom(65535)
            if source[:2] == (host, port) and _is_reply_to(reply, query):
                return reply


def _read_exactly(sock: socket.socket, size: int, deadline: float) -> bytes:
    data = b""
    while len(data) < size:
        sock.settimeout(_remaining(deadline))
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("the server closed the connection before the whole reply")
        data += chunk
    return data


def _tcp_exchange(host: str, port: int, query: bytes, deadline: float) -> bytes:
    with socket.socket(address_family(host), socket.SOCK_STREAM) as sock:
        sock.settimeout(_remaining(deadline))
        sock.connect((host, port))
        sock.sendall(len(query).to_bytes(2, "big") + query)
        reply = _read_exactly(sock, int.from_bytes(_read_exactly(sock, 2, deadline), "big"),
                              deadline)
    if not _is_reply_to(reply, query):
        raise dns.query.BadResponse
    return reply


def is_authoritative(response: dns.message.Message) -> bool:
    return bool(response.flags & dns.flags.AA) and response.rcode() in (
        dns.rcode.NOERROR, dns.rcode.NXDOMAIN)


# The IPv4 address the suite's own servers listen on: loopback, unless their load comes from
# other hosts (`--load-from`), which reach them at an address of this machine (`--listen`).
_listen_address = "127.0.0.1"


def set_listen_address(address: str) -> None:
    """Every server started from now on listens on address (IPv4, one of this machine's)."""
    global _listen_address
    _listen_address = address


class DnsServer(ABC):
    """One private DNS server; `with server:` starts it, waits until every zone has loaded,
    and always stops it."""

    # The program, as messages name it ("named", "nsd", ...).
    program: ClassVar[str] = ""
    # Logged once every zone has loaded (or failed to); None: the server has nothing to
    # load, it is running once it has logged `ready_line`.
    ready_line: ClassVar[re.Pattern[bytes]]
    # Logged once per zone loaded, for `startup`'s "how far it got" (None: loads none).
    zone_loaded_line: ClassVar[re.Pattern[bytes] | None] = None
    # Logged when a zone fails to load (None: the server logs no such line). A zone that
    # fails never answers, and waiting for it costs the whole startup timeout (an hour for
    # `scale`): a 100,000-record zone with an over-long RRset did.
    zone_failed_line: ClassVar[re.Pattern[bytes] | None] = None
    # The generated configuration file, in the run directory.
    conf_path: Path
    # Its UDP receive-buffer setting, as its configuration gives it (subclasses set it).
    receive_buffer: ReceiveBuffer = ReceiveBuffer(None, None, None, "not the suite's server")

    def __init__(self, run_dir: Path, *, threads: int = 1, port: int | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.threads = threads
        # Where it answers: our own servers on loopback (or the address set_listen_address
        # gave); a server the suite did not start (servers/external.py) wherever it runs.
        self.host = _listen_address
        self.port = port or free_port()
        # Where it answers DNS over TLS (None: it does not; serve_tls gives it a port).
        self.tls_port: int | None = None
        self.env = dict(env) if env is not None else None
        self.start_timeout = _ENTER_TIMEOUT
        self.stop_timeout = _STOP_TIMEOUT
        self.log_path = self.run_dir / f"{self.program}.log"
        self._proc: ManagedProcess | None = None
        self._log_start = 0
        self._scanned_to = 0

    def other_free_port(self) -> int:
        """A free port that is not this server's DNS port (a control channel's)."""
        while (port := free_port()) == self.port:
            pass
        return port

    # --- what differs between servers ---------------------------------------------------------

    @abstractmethod
    def argv(self) -> list[str]:
        """The command that runs the server in the foreground over its generated config."""

    def check_config(self) -> None:
        """The server's own config checker, run before it starts, so that a config error fails
        start() itself (default: none)."""
        return None

    @abstractmethod
    def reload(self) -> None:
        """Make the running server read its data again (after a store update the server does
        not see by itself: ServerKind.needs_reload)."""

    def serve_tls(self, files: TlsFiles) -> None:
        """From the next start, answer DNS over TLS on tls_port too, with this key and
        certificate (a server kind that cannot says why first: ServerKind.no_dot)."""
        raise UserError(f"{self.program}: the suite does not serve DNS over TLS with it")

    def run_under(self, wrapper: Sequence[str]) -> None:
        """From the next start, run under the command prefix `wrapper` (Valgrind), with the
        longer start and stop time-outs it needs (a server kind whose process can says so:
        ServerKind.runs_under_wrapper)."""
        raise UserError(f"{self.program}: the suite runs it under no wrapper")

    def requests_received(self) -> int:
        """Requests this process has received so far (tune's processes-against-threads)."""
        raise UserError(f"{self.program} does not report the requests it received "
                        "(tune's processes against threads is for named)")

    # --- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Exec the server and return at once; `exec_time` is then the start of the startup
        clock."""
        if self._proc is not None:
            return
        self.check_config()
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._scanned_to = self._log_start
        # The server runs as the service user (base.process) and writes in its run directory
        # (pid file, journals, its storage, sockets).
        give_to_service_user(self.run_dir, tree=True)
        self._proc = ManagedProcess(self.program, self.argv(), self.log_path,
                                    cwd=self.run_dir, env=self.env,
                                    as_root=self.starts_as_root())
        self._proc.start()

    def starts_as_root(self) -> bool:
        """Whether argv() starts as root, to enter a namespace only root may, and drops to the
        service user itself (base.process.dropping_to_service_user); default: no, it is
        started as that user."""
        return False

    @property
    def exec_time(self) -> float:
        """time.monotonic() just before the server was exec'd."""
        return self._running_proc().exec_time

    def _running_proc(self) -> ManagedProcess:
        if self._proc is None:
            raise UserError(f"{self.program} is not started")
        return self._proc

    def control(self, tool: str, argv: Sequence[str], *args: str) -> str:
        """One command of the server's own control program (`argv`: the program and how it
        reaches this instance's channel: rndc, knotc, nsd-control, pdns_control) to the
        running instance; its output, or a UserError named `tool ARGS`."""
        self._running_proc()
        return run_checked([*argv, *args], f"{tool} {' '.join(args)}", cwd=self.run_dir,
                           timeout=60)

    def running(self) -> bool:
        return self._proc is not None and self._proc.running()

    def wait_answers(self, qname: str, rdtype: str = "SOA", timeout: float = 120.0) -> float:
        """Poll until the server answers qname/rdtype authoritatively; seconds since exec."""
        proc = self._running_proc()
        query = non_recursive_query(qname, rdtype)
        what = f"authoritative answer for {qname}/{rdtype}"
        deadline = time.monotonic() + timeout
        while True:
            response = self._ask_udp(query)
            if response is not None and is_authoritative(response):
                return round(time.monotonic() - proc.exec_time, 3)
            if not proc.running():
                self._fail(f"{self.program} exited before any {what}")
            failed = self._zone_load_failure()
            if failed is not None:
                self._fail(f"no {what}: {failed}")
            if time.monotonic() > deadline:
                self._fail(f"no {what} from {self.program} within {timeout:.0f}s")
            time.sleep(_POLL_PAUSE)

    def answers(self, qname: str, rdtype: str = "SOA") -> bool:
        """One query, no waiting and no stopping: does the server answer it authoritatively
        now?"""
        response = self._ask_udp(non_recursive_query(qname, rdtype))
        return response is not None and is_authoritative(response)

    def _fail(self, problem: str) -> NoReturn:
        tail = self._running_proc().log_tail(30)  # read first: stopping appends shutdown lines
        self.stop()
        raise UserError(f"{problem}; log {self.log_path}:\n{tail}")

    def _ask_udp(self, query: dns.message.Message) -> dns.message.Message | None:
        """One try; None when nothing answered in time.

        A connected socket, so that "nothing listens yet" comes back at once as a refusal
        instead of costing the whole per-try timeout.
        """
        with socket.socket(address_family(self.host), socket.SOCK_DGRAM) as sock:
            sock.settimeout(_POLL_TRY_TIMEOUT)
            try:
                sock.connect((self.host, self.port))
                sock.send(query.to_wire())
                while True:
                    response = dns.message.from_wire(sock.recv(65535))
                    if query.is_response(response):
                        return response
            except (OSError, dns.exception.DNSException):
                return None

    def __enter__(self) -> Self:
        self.start()
        try:
            self.wait_running()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_running(self, timeout: float | None = None) -> None:
        """Until the server logs that it runs with every zone loaded (default:
        start_timeout)."""
        self._running_proc().wait_ready(self.zones_ready, timeout or self.start_timeout)

    def _zone_load_failure(self) -> str | None:
        """The server's first "zone failed to load" line of this start, if any.

        The log is read on from where the last look ended (named logs a line per zone: ~95 MB
        at a million zones), whole lines only.
        """
        if self.zone_failed_line is None or not self.log_path.exists():
            return None
        with open(self.log_path, "rb") as log:
            log.seek(self._scanned_to)
            chunk = log.read()
        whole = chunk[:chunk.rfind(b"\n") + 1]
        self._scanned_to += len(whole)
        found = self.zone_failed_line.search(whole)
        return found.group(0).decode(errors="replace") if found else None

    def new_log(self) -> bytes:
        """What this start of the server has logged so far."""
        with open(self.log_path, "rb") as log:
            log.seek(self._log_start)
            return log.read()

    def zones_ready(self) -> bool:
        """Has this start of the server logged that it runs with all its zones loaded?"""
        return self.ready_line.search(self.new_log()) is not None

    def zones_loaded(self) -> int:
        """Zones the server has logged as loaded so far (0 for one that loads none)."""
        if self.zone_loaded_line is None:
            return 0
        try:
            return len(self.zone_loaded_line.findall(self.log_path.read_bytes()))
        except OSError:
            return 0

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.stop(timeout=self.stop_timeout)

    # --- clients ------------------------------------------------------------------------------

    def query(self, qname: str | dns.name.Name, rdtype: str, *, tcp: bool = False,
              timeout: float = 5.0, payload: int | None = None,
              dnssec: bool = False, tls: bool = False) -> dns.message.Message:
        """One non-recursive query (over TCP when tcp, over TLS to tls_port when tls); with
        EDNS0 advertising `payload` octets when given, and the DO bit when dnssec."""
        query = non_recursive_query(qname, rdtype, payload, dnssec)
        if tls:
            if self.tls_port is None:
                raise UserError(f"{self.program} does not serve DNS over TLS here")
            # The certificate is the run's own self-signed one: not verified (what is
            # measured is TLS's cost, not a chain of trust).
            return dns.query.tls(query, self.host, port=self.tls_port, timeout=timeout,
                                 verify=False)
        send = dns.query.tcp if tcp else dns.query.udp
        return send(query, self.host, port=self.port, timeout=timeout)

    def exchange(self, query: bytes, *, tcp: bool = False, timeout: float = 5.0) -> bytes:
        """The reply to a query in wire form, over UDP (TCP when tcp), as it came off the wire:
        for a caller that asks several servers the same query and parses each distinct reply
        once (bench/verify/answers.py). Failures as `query`'s: dnspython's Timeout, EOFError,
        BadResponse for a TCP message that is no reply to the query."""
        deadline = time.monotonic() + timeout
        try:
            if tcp:
                return _tcp_exchange(self.host, self.port, query, deadline)
            return _udp_exchange(self.host, self.port, query, deadline)
        except TimeoutError:
            raise dns.exception.Timeout from None

    def pids(self) -> list[int]:
        """The server's processes (its workers and helpers too), for CPU and RSS accounting."""
        return self._proc.pids() if self._proc is not None else []

    def main_pid(self) -> int:
        return self._running_proc().pid
