"""Answers as compared: a response reduced to its rcode, flags and sections (`Answer`), asked
over UDP with the TCP answer beside it when needed (`ask`), and the complete answer that is
compared (`complete`; the package docstring explains truncation)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.rrset

from servers import DnsServer, non_recursive_query
from zonedata.derive import Query

Rr = tuple[str, int, str, str]  # owner (lower case), TTL, type, rdata

# The EDNS0 payload queries advertise; named 9.18's max-udp-size is the same by default.
UDP_PAYLOAD = 1232
# The UDP limit of a query without EDNS (RFC 1035).
PLAIN_UDP_LIMIT = 512


@dataclass(frozen=True)
class Answer:
    """A response reduced to what is compared (`size` and `tcp` are not compared)."""

    rcode: str
    aa: bool
    tc: bool
    answer: frozenset[Rr]
    authority: frozenset[Rr]
    additional: frozenset[Rr]
    size: int = field(default=0, compare=False)   # octets on the wire
    limit: int = field(default=0, compare=False)  # the UDP size it was rendered for
    tcp: bool = field(default=False, compare=False)

    def describe(self) -> str:
        def rrs(s: frozenset[Rr]) -> str:
            return "; ".join(" ".join(map(str, rr)) for rr in sorted(s)) or "-"
        over = " (over TCP)" if self.tcp else ""
        return (f"{self.rcode} aa={int(self.aa)} tc={int(self.tc)}{over} | ANSWER "
                f"{rrs(self.answer)} | AUTHORITY {rrs(self.authority)} | ADDITIONAL "
                f"{rrs(self.additional)}")

    def soa_ttl_zeroed(self) -> Answer:
        """The same answer with every authority SOA's TTL set to 0."""
        return replace(self, authority=frozenset((n, 0 if t == "SOA" else ttl, t, d)
                                                 for n, ttl, t, d in self.authority))


# The UDP answer, and the TCP answer when the UDP one was truncated or near the limit.
Reply = tuple[Answer, Answer | None]

_NO_ANSWER = Answer("(no answer)", False, False, frozenset(), frozenset(), frozenset())


def rr_owner(name: dns.name.Name) -> str:
    """A name as an Rr spells its owner: in lower case, since names compare case-insensitively
    and a DLZ answer spells an owner as the query did."""
    return name.to_text().lower()


def _section(rrsets: Iterable[dns.rrset.RRset]) -> frozenset[Rr]:
    out = set()
    for rrset in rrsets:
        if rrset.rdtype == dns.rdatatype.OPT:
            continue
        name = rr_owner(rrset.name)
        rdtype = dns.rdatatype.to_text(rrset.rdtype)
        for rd in rrset:
            out.add((name, rrset.ttl, rdtype, rd.to_text()))
    return frozenset(out)


def reduce(msg: dns.message.Message, tcp: bool = False) -> Answer:
    return Answer(dns.rcode.to_text(msg.rcode()), bool(msg.flags & dns.flags.AA),
                  bool(msg.flags & dns.flags.TC), _section(msg.answer),
                  _section(msg.authority), _section(msg.additional),
                  len(msg.wire or b""), _udp_limit(msg), tcp)


def _udp_limit(response: dns.message.Message) -> int:
    """512 octets without EDNS, else the smaller of the payloads both sides advertised."""
    return PLAIN_UDP_LIMIT if response.edns < 0 else min(UDP_PAYLOAD, response.payload)


class SharedQuery:
    """One query as several servers are asked it over UDP (and TCP): its message rendered
    once, and each distinct reply parsed and reduced once.

    Parsing is what a comparison spends its CPU on (dnspython: about 1 ms for a signed
    answer), and the DLZ drivers' replies are mostly byte for byte the memory driver's, the
    same BIND DLZ path rendering the same rows: every server is sent the same message (the
    same ID, each over a socket of its own), so a reply equal to one already reduced is that
    Answer. Safe from several threads (compare.py asks every server at once)."""

    def __init__(self, query: Query, dnssec: bool = False) -> None:
        self.message = non_recursive_query(query[0], query[1], UDP_PAYLOAD, dnssec)
        self.wire = self.message.to_wire()
        self._answers: dict[tuple[bytes, bool], Answer] = {}
        self._lock = threading.Lock()

    def ask(self, server: DnsServer) -> Reply:
        """The UDP answer, with the TCP answer when the UDP one may not be complete."""
        udp = self._answer(server.exchange(self.wire), tcp=False)
        if not (udp.tc or udp.size > udp.limit // 2):
            return udp, None
        return udp, self._answer(server.exchange(self.wire, tcp=True), tcp=True)

    def _answer(self, reply: bytes, tcp: bool) -> Answer:
        """The reply reduced, parsed only if no server gave the same reply before."""
        with self._lock:  # one parse of a reply however many servers sent it at once
            answer = self._answers.get((reply, tcp))
            if answer is None:
                response = dns.message.from_wire(reply)
                if not self.message.is_response(response):
                    raise dns.query.BadResponse
                answer = self._answers[reply, tcp] = reduce(response, tcp)
        return answer


def ask(server: DnsServer, query: Query, dnssec: bool = False, transport: str = "udp") -> Reply:
    """The UDP answer, with the TCP answer when the UDP one may not be complete; both with the
    DO bit when dnssec. Over another transport (base/transports.py: tcp, tcp-new, dot) its one
    answer, which no datagram limit truncates."""
    if transport != "udp":
        stream = server.query(query[0], query[1], tcp=transport != "dot", tls=transport == "dot",
                              payload=UDP_PAYLOAD, dnssec=dnssec)
        return reduce(stream, tcp=True), None
    return SharedQuery(query, dnssec).ask(server)


def complete(reply: Reply) -> Answer:
    """The answer to compare: see the package docstring (bench/verify/__init__.py) on
    truncation."""
    udp, tcp = reply
    if tcp is None:
        return udp
    if udp.tc and tcp.size <= udp.limit:
        return udp  # truncated though everything fitted: not the size, keep it as it is
    return tcp


def compare_answers(query: Query, reference: Reply, other: Reply) -> tuple[Answer, Answer] | None:
    """None when the complete answers are identical, else (reference's, other's)."""
    expected, got = complete(reference), complete(other)
    return None if expected == got else (expected, got)


def transfer(server: DnsServer, zone: dns.name.Name, source: str | None = None) -> Answer:
    """A full zone transfer reduced to its set of RRs; the rcode says why it failed."""
    try:
        messages = list(dns.query.xfr("127.0.0.1", zone, port=server.port, timeout=30,
                                      lifetime=120, source=source, relativize=False))
    except dns.query.TransferError as exc:
        return replace(_NO_ANSWER, rcode=dns.rcode.to_text(exc.rcode))
    except (dns.exception.DNSException, OSError, EOFError) as exc:
        return replace(_NO_ANSWER, rcode=f"failed: {type(exc).__name__}")
    rrs = frozenset().union(*(_section(m.answer) for m in messages))
    return Answer("NOERROR", True, False, rrs, frozenset(), frozenset(), tcp=True)
