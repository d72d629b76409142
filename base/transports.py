"""The transports a query can travel over, and the per-run TLS key and certificate for DoT.

  udp      one datagram per query (the default of every measurement);
  tcp      DNS over TCP (RFC 7766), queries pipelined over connections kept open;
  tcp-new  DNS over TCP with a new connection for every query (its handshake counted);
  dot      DNS over TLS (RFC 7858) on a port of its own, over connections kept open.

docs/method/transports.md says which server speaks which, and where each figure comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from base.process import give_to_service_user, run_checked

TRANSPORTS = ("udp", "tcp", "tcp-new", "dot")
OPENSSL = "/usr/bin/openssl"


@dataclass(frozen=True)
class TlsFiles:
    """A private key and a self-signed certificate for it (PEM files, the key mode 0600)."""

    key: Path
    cert: Path


def self_signed(directory: Path) -> TlsFiles:
    """A new P-256 key and a certificate for it, valid one day, in `directory`: made for each
    run, never reused, and trusted by no one (the suite's clients do not verify it: what is
    measured is the cost of TLS, not a chain of trust)."""
    directory.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(directory / "dot.key", directory / "dot.crt")
    run_checked([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                 "-subj", "/CN=dlzbench.invalid", "-keyout", str(files.key),
                 "-out", str(files.cert)], what="openssl req (the DoT certificate)")
    files.key.chmod(0o600)
    give_to_service_user(files.key)  # the servers read it, as that user
    return files
