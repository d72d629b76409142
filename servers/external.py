"""A DNS server the suite did not start: `run --target HOST:PORT --server-label NAME`.

It is measured from outside, over its address, the way every server is: latency, QPS and
offered-load steps. Nothing that needs its processes or its data is: there is no start to
time, no process here whose CPU and memory could be accounted (it may run on another
machine), and no store the suite loaded, so neither update visibility nor a comparison with
native BIND over the same store. Starting and stopping it do nothing: it runs before the
measurement and after it.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from pathlib import Path

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode

from base.errors import UserError
from servers.dnsserver import DnsServer, address_family, is_authoritative, non_recursive_query

# The reachability check: a target elsewhere is a network away and UDP may lose a datagram,
# so a few tries of a few seconds each before "does not answer".
_CHECK_TRIES = 3
_CHECK_TIMEOUT = 2.0

_HOST_PORT = re.compile(r"\[(?P<v6>[^\]]+)\]:(?P<v6port>\d+)|(?P<host>[^:\[\]]+):(?P<port>\d+)")


@dataclass(frozen=True)
class Target:
    """Where the server the suite did not start answers, and the name its results go under."""

    label: str
    given: str   # HOST:PORT as the user wrote it
    host: str    # the address queries go to (HOST itself, or what its name resolved to)
    port: int

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def as_dict(self) -> dict[str, str | int]:
        return {"label": self.label, "target": self.given, "address": self.host,
                "port": self.port}

    def server(self, run_dir: Path, *, threads: int) -> ExternalServer:
        return ExternalServer(self, run_dir, threads=threads)

    def check_serves(self, origin: dns.name.Name) -> None:
        """One SOA query for origin (with retries); a UserError naming the address when
        nothing answers or the answer is not an authoritative one for that zone."""
        response = self._ask(non_recursive_query(origin, "SOA"), origin)
        if not is_authoritative(response):
            aa = "" if response.flags & dns.flags.AA else " without authority (no AA)"
            raise UserError(f"--target {self.given}: {origin} SOA answered "
                            f"{dns.rcode.to_text(response.rcode())}{aa}: the server there does "
                            "not serve the data set's zones (give the data it serves with "
                            "--zones, --named-conf or --generate)")

    def _ask(self, query: dns.message.Message, origin: dns.name.Name) -> dns.message.Message:
        for _ in range(_CHECK_TRIES):
            # Connected, so that "nothing listens there" comes back at once as a refusal;
            # non-blocking, as dnspython requires of a socket it is given.
            with socket.socket(address_family(self.host), socket.SOCK_DGRAM) as sock:
                sock.setblocking(False)
                try:
                    sock.connect((self.host, self.port))
                    return dns.query.udp(query, self.host, port=self.port,
                                         timeout=_CHECK_TIMEOUT, sock=sock)
                except dns.exception.Timeout:
                    continue
                except (OSError, dns.exception.DNSException) as exc:
                    raise UserError(f"--target {self.given}: no answer to {origin} SOA from "
                                    f"{self.address}: {_reason(exc)}") from exc
        raise UserError(f"--target {self.given}: no answer to {origin} SOA from {self.address} "
                        f"in {_CHECK_TRIES} tries of {_CHECK_TIMEOUT:g} s (is a DNS server "
                        "running there?)")


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__


def parse_target(text: str, label: str) -> Target:
    """HOST:PORT ([ADDRESS]:PORT for IPv6) -> a Target; a name is resolved here, once."""
    match = _HOST_PORT.fullmatch(text.strip())
    if match is None:
        raise UserError(f"--target {text!r}: not HOST:PORT (e.g. 192.0.2.1:53, "
                        "ns1.example.org:53, [2001:db8::1]:53)")
    host = match["v6"] or match["host"]
    port = int(match["v6port"] or match["port"])
    if not 1 <= port <= 65535:
        raise UserError(f"--target {text}: port {port} is not between 1 and 65535")
    return Target(label, text.strip(), _address_of(host, text), port)


def _address_of(host: str, text: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise UserError(f"--target {text}: cannot resolve {host}: {_reason(exc)}") from exc
    return str(found[0][4][0])


class ExternalServer(DnsServer):
    """The DnsServer the runner measures at a Target: queries go to its address; start and
    stop do nothing; it has no process here (pids() is empty, never accounted)."""

    program = "target"
    ready_line = re.compile(b"(?!)")  # never read: it is running before the suite looks

    def __init__(self, target: Target, run_dir: Path, *, threads: int) -> None:
        super().__init__(run_dir, threads=threads, port=target.port)
        self.host = target.host
        self.target = target

    def argv(self) -> list[str]:
        raise UserError(f"{self.target.label} at {self.target.address} was not started by the "
                        "suite: there is no command to run it")

    def reload(self) -> None:
        raise UserError(f"{self.target.label} at {self.target.address}: the suite cannot make a "
                        "server it did not start read its data again")

    def start(self) -> None:
        """Nothing to start: the server runs already."""

    def wait_running(self, timeout: float | None = None) -> None:
        """Nothing to wait for (the runner checks that it serves every zone)."""

    def running(self) -> bool:
        return True

    def stop(self) -> None:
        """Nothing to stop: it is not the suite's."""

    def pids(self) -> list[int]:
        return []

    def check_serves(self, origin: dns.name.Name) -> None:
        self.target.check_serves(origin)
