"""Added round-trip time between named and its database: a private toxiproxy with a latency toxic.

This kernel has no netem qdisc, so the delay comes from Shopify's toxiproxy (built by `make deps`
into .tools/bin), a TCP proxy on this host's loopback in front of the database's TCP port.
Its latency toxic delays every chunk of data flowing one way by a whole number of milliseconds
(its `latency` attribute is an integer), so an RTT of X ms is one toxic of ceil(X/2) ms on the
upstream stream (client to database) and one of floor(X/2) ms on the downstream stream
(database to client). A remote database at 0.2 or 0.5 ms is therefore out of its reach: only
whole milliseconds are accepted, rather than rounding the request into something else.

What the proxy actually adds is measured from the client's side, ping-style, by
bench/measure/latency.py.

Its control API has no authentication, and toxiproxy 2.12 listens for it on a TCP port only
(-host, -port: no unix socket, which file permissions could close): on 127.0.0.1 at a random
port, any local user can reach it while the proxy runs, and could repoint the proxy's upstream
(named's database connection) or add toxics. Nothing here restricts it: no packet filter is
installed to match the connecting user, and a network namespace of its own would keep the
proxy from the database on this namespace's loopback. docs/method/tune.md says so.
"""

from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from base.errors import UserError
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
    """One private toxiproxy forwarding listen_host:listen_port to upstream with rtt_ms added.

    `with LatencyProxy(run_dir, host, port, rtt_ms) as proxy:` starts it and always stops it;
    clients connect to proxy.listen_host:proxy.listen_port instead of host:port.
    """

    listen_host = "127.0.0.1"

    def __init__(self, run_dir: Path, upstream_host: str, upstream_port: int,
                 rtt_ms: int) -> None:
        if not TOXIPROXY.is_file():
            raise UserError(f"{TOXIPROXY} is missing; `make deps` builds it")
        if not 0 < rtt_ms <= RTT_MAX_MS:
            raise UserError(f"added round trip of {rtt_ms} ms is outside 1-{RTT_MAX_MS} ms")
        self.run_dir = Path(run_dir)
        self.upstream = f"{upstream_host}:{upstream_port}"
        self.rtt_ms = rtt_ms
        self.api_port = free_port()
        self.listen_port = free_port()
        self.log_path = self.run_dir / "toxiproxy.log"
        self._proc: ManagedProcess | None = None

    def start(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        argv = [str(TOXIPROXY), "-host", "127.0.0.1", "-port", str(self.api_port)]
        self._proc = ManagedProcess("toxiproxy", argv, self.log_path, cwd=self.run_dir)
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
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.api_port}{path}", data=data,
                                         method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return json.loads(response.read() or b"null")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise UserError(f"toxiproxy API {method} {path} failed: {exc}") from exc

    def __enter__(self) -> LatencyProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
