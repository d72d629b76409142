"""The RFC 2136 update sender of `bench updates`: a fixed number of concurrent senders, each
over one TCP connection of its own, sending its share of a list of update messages one after
another (the next once the answer to the last has come), every answer's RCODE counted.

The messages of a phase are built and rendered (signed, with TSIG) before the clock starts, so
the phase times the server and the network, not dnspython building messages; what the
sending itself cost is kept (`client_cpu_s`) so that a phase the sender limits can say so.
Each message holds N records: adds of new names (one A record each) in one zone, or the
deletes of exactly those records, so that a phase of adds and one of deletes leave the zone
as it was.

`writes --via update` sends its record changes through UpdateWriter: one message a change,
the way a provisioning system speaking DNS would.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import dns.exception
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.tsig
import dns.update

from base.errors import UserError
from base.update_access import TsigKey
from loaders.writes import ZONE_KINDS, Change, StoreWriter

# The TTL of every added record.
TTL = 300
# What an answer is counted as when no RCODE came back.
TSIG_ERROR = "TSIG error"   # the answer's TSIG did not verify (BADKEY, BADSIG answers)
NO_ANSWER = "no answer"     # time-out, connection closed or refused
NOERROR = "NOERROR"
# The outcomes that mean "this sender may not update this zone".
REFUSALS = ("REFUSED", "NOTAUTH", TSIG_ERROR)
# The first addresses the added records hold (RFC 5737's would give only 256 x 3).
_FIRST_ADDRESS = int(ipaddress.IPv4Address("10.0.0.0"))


def added_name(zone: dns.name.Name, index: int) -> dns.name.Name:
    """The index-th name the sender adds in zone (a label no data set of the suite uses)."""
    return dns.name.Name((f"dlzbench-u{index}".encode(),)).concatenate(zone)


def address(index: int) -> str:
    return str(ipaddress.IPv4Address(_FIRST_ADDRESS + index))


@dataclass(frozen=True)
class Signer:
    """How a message is signed: not at all, or with a TSIG key."""

    key: TsigKey | None = None

    def keyring(self) -> dict[dns.name.Name, dns.tsig.Key] | None:
        if self.key is None:
            return None
        key = self.key.dnspython_key()
        return {key.name: key}


def add_message(zone: dns.name.Name, indexes: Sequence[int], signer: Signer) -> dns.message.Message:
    """One message adding the names of `indexes`, an A record each."""
    message = _update(zone, signer)
    for index in indexes:
        message.add(added_name(zone, index), TTL, "A", address(index))
    return message


def delete_message(zone: dns.name.Name, indexes: Sequence[int],
                   signer: Signer) -> dns.message.Message:
    """One message deleting exactly the records add_message added for `indexes`."""
    message = _update(zone, signer)
    for index in indexes:
        message.delete(added_name(zone, index), "A", address(index))
    return message


def _update(zone: dns.name.Name, signer: Signer) -> dns.update.UpdateMessage:
    message = dns.update.UpdateMessage(zone)
    if signer.key is not None:
        message.use_tsig(signer.key.dnspython_key())
    return message


def batches(count: int, size: int, first: int = 0) -> list[list[int]]:
    """`count` names from `first` in messages of `size` (the last one shorter if need be)."""
    indexes = list(range(first, first + count))
    return [indexes[at:at + size] for at in range(0, count, size)]


@dataclass
class Rendered:
    """A message on the wire, with what checking its answer needs."""

    wire: bytes
    mac: bytes | None
    records: int
    keyring: dict[dns.name.Name, dns.tsig.Key] | None


def render(message: dns.message.Message, records: int,
           keyring: dict[dns.name.Name, dns.tsig.Key] | None) -> Rendered:
    wire = message.to_wire()
    return Rendered(wire, message.mac if keyring else None, records, keyring)


@dataclass
class PhaseResult:
    """One phase of messages: how long it took, and how each answer came back."""

    messages: int
    records: int              # records in the messages sent
    seconds: float            # from the first send to the last answer
    client_cpu_s: float       # this process's CPU over the phase (the senders)
    outcomes: dict[str, int] = field(default_factory=dict)  # RCODE (or TSIG_ERROR, ...) -> n

    @property
    def committed(self) -> int:
        """Records in messages answered NOERROR."""
        return self.records if self.all_noerror else 0

    @property
    def all_noerror(self) -> bool:
        return self.outcomes.get(NOERROR, 0) == self.messages

    @property
    def refused(self) -> int:
        return sum(self.outcomes.get(outcome, 0) for outcome in REFUSALS)


def send_phase(host: str, port: int, messages: Sequence[Rendered], senders: int,
               timeout: float = 30.0) -> PhaseResult:
    """Every message sent, `senders` at a time (each sender its share in order, over one
    connection of its own, opened before the clock starts)."""
    senders = max(1, min(senders, len(messages)))
    shares = [list(messages[i::senders]) for i in range(senders)]
    sockets = [_connect(host, port, timeout) for _ in shares]
    counts: list[Counter[str]] = [Counter() for _ in shares]
    start = threading.Barrier(senders + 1)
    threads = [threading.Thread(target=_sender, args=(sock, share, count, start, timeout),
                                name=f"update-sender-{i}", daemon=True)
               for i, (sock, share, count) in enumerate(zip(sockets, shares, counts,
                                                             strict=True))]
    try:
        for thread in threads:
            thread.start()
        cpu_before = time.process_time()
        start.wait()
        began = time.monotonic()
        for thread in threads:
            thread.join()
        seconds = time.monotonic() - began
        cpu = time.process_time() - cpu_before
    finally:
        for sock in sockets:
            sock.close()
    total: Counter[str] = sum(counts, Counter())
    return PhaseResult(len(messages), sum(m.records for m in messages), seconds, cpu,
                       dict(total))


def _connect(host: str, port: int, timeout: float) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _sender(sock: socket.socket, share: Sequence[Rendered], counts: Counter[str],
            start: threading.Barrier, timeout: float) -> None:
    start.wait()
    alive = True
    for message in share:
        if not alive:  # the connection broke: the rest are not answered either
            counts[NO_ANSWER] += 1
            continue
        outcome = ask(sock, message, timeout)
        counts[outcome] += 1
        alive = outcome != NO_ANSWER


def ask(sock: socket.socket, message: Rendered, timeout: float) -> str:
    """One message over the connection; its answer's RCODE name, TSIG_ERROR or NO_ANSWER."""
    expiration = time.time() + timeout
    try:
        dns.query.send_tcp(sock, message.wire, expiration)
        answer, _ = dns.query.receive_tcp(sock, expiration, keyring=message.keyring,
                                          request_mac=message.mac or b"")
    except (dns.tsig.PeerError, dns.message.UnknownTSIGKey, dns.tsig.BadSignature):
        return TSIG_ERROR
    except (dns.exception.Timeout, OSError, EOFError, dns.exception.FormError):
        return NO_ANSWER
    return dns.rcode.to_text(answer.rcode())


def ask_once(host: str, port: int, message: dns.message.Message, records: int,
             signer: Signer, timeout: float = 10.0) -> str:
    """One message over a connection of its own: the outcome (as ask)."""
    rendered = render(message, records, signer.keyring())
    with _connect(host, port, timeout) as sock:
        return ask(sock, rendered, timeout)


def change_message(change: Change, signer: Signer) -> dns.message.Message:
    """One UPDATE message making a record change: the old rdata deleted (delete, change),
    the new one added (add, change); zones are not RFC 2136's to add or delete."""
    if change.kind in ZONE_KINDS:
        raise UserError(f"{change.text()}: RFC 2136 updates records, not zones")
    message = _update(change.zone, signer)
    if change.removed is not None:
        message.delete(change.removed.owner, change.removed.rdtype, change.removed.rdata)
    if change.added is not None:
        added = change.added
        message.add(added.owner, added.ttl, added.rdtype, added.rdata)
    return message


class UpdateWriter(StoreWriter):
    """Record changes as RFC 2136 UPDATE messages over one TCP connection to the server,
    which writes its store itself; an answer other than NOERROR is a UserError."""

    def __init__(self, host: str, port: int, signer: Signer | None = None,
                 timeout: float = 10.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.signer = signer or Signer()
        self.sock = _connect(host, port, timeout)

    def apply(self, change: Change) -> None:
        rendered = render(change_message(change, self.signer), 1, self.signer.keyring())
        outcome = ask(self.sock, rendered, self.timeout)
        if outcome == NO_ANSWER:
            # The server closed an idle connection (named's tcp-idle-timeout): once more on
            # a new one. Sending a change twice is safe: RFC 2136 adds and deletes of one
            # rdata are idempotent.
            self.sock.close()
            self.sock = _connect(self.host, self.port, self.timeout)
            outcome = ask(self.sock, rendered, self.timeout)
        if outcome != NOERROR:
            raise UserError(f"{change.text()}: the server answered {outcome}")

    def close(self) -> None:
        self.sock.close()
