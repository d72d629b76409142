"""Added round-trip time between named and its database: a private toxiproxy with a latency toxic.

This kernel has no netem qdisc, so the delay comes from Shopify's toxiproxy (built by `make deps`
into .tools/bin), a TCP proxy in front of the database's TCP port. Its latency toxic delays every
chunk of data flowing one way by a whole number of milliseconds (its `latency` attribute is an
integer), so an RTT of X ms is one toxic of ceil(X/2) ms on the upstream stream (client to
database) and one of floor(X/2) ms on the downstream stream (database to client). A remote
database at 0.2 or 0.5 ms is therefore out of its reach: only whole milliseconds are accepted,
rather than rounding the request into something else.

What the proxy actually adds is measured from the client's side, ping-style, by
bench/measure/latency.py.

Its control API has no authentication, and toxiproxy 2.12 listens for it on a TCP port only
(-host, -port: no unix socket, which file permissions could close): whoever reaches it can
repoint the proxy's upstream (named's database connection) or add toxics. So the proxy runs on
the database's host (base.netns: a network namespace only root enters), as the servers' user
like the database server beside it: its control API on that namespace's loopback, which no
process outside the namespace reaches and the suite reaches from inside (DatabaseHost.connect),
and the proxy itself on the namespace's veth address, where named reaches it. A database on
this host's loopback has no proxy: one in a namespace of its own could not reach it.
"""

from __future__ import annotations

import http.client
import json
import math
import re
from pathlib import Path
from typing import Any

from base.errors import UserError
from base.netns import DatabaseHost
from base.process import REPO_ROOT, ManagedProcess, free_port

TOXIPROXY = REPO_ROOT / ".tools" / "bin" / "toxiproxy-server"
RTT_MAX_MS = 5
_START_TIMEOUT = 15.0
_RTT_PATTERN = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*(ms)?\s*")


def parse_db_rtt(text: str) -> int:
    """A --db-rtt value ("0", "1", "2ms", ...) in milliseconds; 0 means no proxy at all."""
    match = _RTT_PATTERN.fullmatch(text)
    if not match:
        raise UserError(f"--db-rtt {text!r}: expected milliseconds, e.g. 1 or 2ms")
    value = float(match.group(1))
    if value == 0:
        return 0
    if not 0 < value <= RTT_MAX_MS:
        raise UserError(f"--db-rtt {text}: must be 0 (no added round trip) or 1 to "
                        f"{RTT_MAX_MS} ms")
    if value != int(value):
        raise UserError(f"--db-rtt {text}: toxiproxy adds latency in whole milliseconds only; "
                        f"use 0 or a whole number from 1 to {RTT_MAX_MS}")
    return int(value)


def split_rtt(rtt_ms: int) -> tuple[int, int]:
    """(upstream, downstream) latency toxics in ms adding up to rtt_ms."""
    upstream = math.ceil(rtt_ms / 2)
    return upstream, rtt_ms - upstream


class LatencyProxy:
    """One private toxiproxy on db_host forwarding to upstream there with rtt_ms added.

    `with LatencyProxy(run_dir, db_host, host, port, rtt_ms) as proxy:` starts it and always
    stops it; clients connect to proxy.listen_host:proxy.listen_port (db_host's address)
    instead of host:port.
    """

    # Inside db_host: its loopback, where only what runs in the namespace reaches the API.
    api_host = "127.0.0.1"

    def __init__(self, run_dir: Path, db_host: DatabaseHost, upstream_host: str,
                 upstream_port: int, rtt_ms: int) -> None:
        if not TOXIPROXY.is_file():
            raise UserError(f"{TOXIPROXY} is missing; `make deps` builds it")
        if not 0 < rtt_ms <= RTT_MAX_MS:
            raise UserError(f"added round trip of {rtt_ms} ms is outside 1-{RTT_MAX_MS} ms")
        self.run_dir = Path(run_dir)
        self.db_host = db_host
        self.upstream = f"{upstream_host}:{upstream_port}"
        self.rtt_ms = rtt_ms
        self.listen_host = db_host.address
        self.api_port, self.listen_port = _two_ports_besides(upstream_port)
        self.log_path = self.run_dir / "toxiproxy.log"
        self._proc: ManagedProcess | None = None

    def start(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        argv = [str(TOXIPROXY), "-host", self.api_host, "-port", str(self.api_port)]
        # Started as root to enter the namespace, then the servers' user (setpriv).
        self._proc = ManagedProcess("toxiproxy",
                                    self.db_host.command(argv, as_service_user=True),
                                    self.log_path, cwd=self.run_dir, as_root=True)
        try:
            self._proc.start()
            self._proc.wait_ready(self._answers, _START_TIMEOUT)
            self._create_proxy()
        except BaseException:
            self.stop()
            raise

    def _create_proxy(self) -> None:
        self._api("POST", "/proxies", {"name": "db", "enabled": True, "upstream": self.upstream,
                                       "listen": f"{self.listen_host}:{self.listen_port}"})
        for stream, latency in zip(("upstream", "downstream"), split_rtt(self.rtt_ms), strict=True):
            if latency:
                self._api("POST", "/proxies/db/toxics", {
                    "name": f"rtt-{stream}", "type": "latency", "stream": stream,
                    "toxicity": 1.0, "attributes": {"latency": latency, "jitter": 0}})

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.stop(timeout=10)

    def version(self) -> str:
        return f"toxiproxy {self._api('GET', '/version')['version']}"

    def toxics(self) -> list[dict[str, Any]]:
        """The toxics as toxiproxy reports them (what it was actually told to do)."""
        return self._api("GET", "/proxies/db/toxics")

    def pids(self) -> list[int]:
        return self._proc.pids() if self._proc is not None else []

    def _answers(self) -> bool:
        try:
            self._api("GET", "/version")
        except UserError:
            return False
        return True

    def _api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One request to the control API, over a connection made inside the namespace."""
        conn = http.client.HTTPConnection(self.api_host, self.api_port, timeout=5)
        try:
            conn.sock = self.db_host.connect(self.api_host, self.api_port, timeout=5)
            conn.request(method, path, json.dumps(body) if body is not None else None,
                         {"Content-Type": "application/json"})
            response = conn.getresponse()
            data = response.read()
            if response.status >= 300:
                raise UserError(f"toxiproxy API {method} {path} failed: HTTP {response.status} "
                                f"{data.decode(errors='replace').strip()}")
            return json.loads(data or b"null")
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise UserError(f"toxiproxy API {method} {path} failed: {exc}") from exc
        finally:
            conn.close()

    def __enter__(self) -> LatencyProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _two_ports_besides(taken: int) -> tuple[int, int]:
    """Two free ports, neither `taken` (the database's, on the same address; it may be a
    server's the suite did not start). free_port reserves each port it hands out, so the two
    are distinct."""
    ports: list[int] = []
    while len(ports) < 2:
        port = free_port()
        if port != taken:
            ports.append(port)
    return ports[0], ports[1]
