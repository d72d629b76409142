"""Real traffic as a dnsperf query file: from a BIND query log, a packet capture, or a dnsperf file.

The format is told by content, not by name: a pcap or pcapng file by its magic number, a query
log by the shape of its lines (BIND 9.18's `query:` message, lib/ns/query.c log_query, after
ns_client_log's `client @0x... ADDR#PORT (QNAME): [view V: ]` prefix and whatever the logging
channel puts before it), else a dnsperf file (`NAME TYPE` lines).

Every packet or line that does not become a query is counted under the reason it was dropped,
and the derived file starts with `;` comment lines (dnsperf and the prober skip them) naming its
source, the count kept and the count dropped per reason.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rdataclass
import dns.rdatatype
import dpkt

from base.errors import UserError
from zonedata.queries import dnsperf_safe, query_text

# Why a packet or line was not kept.
NOT_DNS = "not DNS"
NOT_QUERY = "not a query"
MALFORMED = "malformed"
NOT_IN = "not class IN"
TRANSFER = "zone transfer"
UNKNOWN_TYPE = "type unknown to dnsperf"
UNSENDABLE = "name dnsperf cannot send"
OUTSIDE = "outside loaded zones"

_PCAP_MAGICS = {bytes.fromhex(m) for m in ("a1b2c3d4", "d4c3b2a1", "a1b23c4d", "4d3cb2a1")}
_PCAPNG_MAGIC = bytes.fromhex("0a0d0d0a")
# `query: NAME CLASS TYPE FLAGS (ADDR)`: the flags start with + or - (recursion desired).
_QUERYLOG = re.compile(r"\bquery: (\S+) (\S+) (\S+) [+-]\S* \(")
_DNS_PORT = 53
# Link types (pcap LINKTYPE_* and dpkt's DLT_* values) whose frames start with the IP header.
_RAW_IP_LINKS = {dpkt.pcap.DLT_RAW, 14, 101, dpkt.pcap.DLT_IPV4, dpkt.pcap.DLT_IPV6}

Query = tuple[str, str]


@dataclass
class Traffic:
    """What a derived query file holds and what was left out of it."""

    source: Path
    format: str
    kept: int = 0
    dropped: Counter[str] = field(default_factory=Counter)

    def header(self) -> str:
        lines = [f"source: {self.source} ({self.format})", f"kept: {self.kept}",
                 *(f"dropped {reason}: {count}" for reason, count in sorted(self.dropped.items()))]
        return "".join(f"; {line}\n" for line in lines)

    def dropped_text(self) -> str:
        return ", ".join(f"{count} {reason}" for reason, count in sorted(self.dropped.items()))

    def summary(self) -> str:
        dropped = self.dropped_text()
        return (f"{self.source} ({self.format}): {self.kept} queries kept"
                + (f"; dropped {dropped}" if dropped else ""))

    def as_dict(self) -> dict:
        return {"source": str(self.source), "format": self.format, "kept": self.kept,
                "dropped": dict(sorted(self.dropped.items()))}


def derive_query_file(source: Path, out: Path,
                      zones: Iterable[dns.name.Name] | None = None) -> Traffic:
    """Write out from source's queries (only those at or under one of `zones`, if given)."""
    kind = detect_format(source)
    traffic = Traffic(source, kind)
    origins = None if zones is None else set(zones)
    body = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(body, "w", encoding="ascii") as lines:
            for item in _READERS[kind](source):
                reason = item if isinstance(item, str) else _outside(item[0], origins)
                if reason:
                    traffic.dropped[reason] += 1
                    continue
                lines.write(f"{item[0]} {item[1]}\n")
                traffic.kept += 1
        if traffic.kept == 0:
            raise UserError(f"{source}: no usable DNS queries in this {kind} file "
                            f"({traffic.dropped_text() or 'it holds none'})")
        with open(out, "w", encoding="ascii") as final, open(body, encoding="ascii") as lines:
            final.write(traffic.header())
            shutil.copyfileobj(lines, final)
    finally:
        body.unlink(missing_ok=True)
    return traffic


def detect_format(source: Path) -> str:
    """'pcap', 'pcapng', 'querylog' or 'dnsperf', from the file's first bytes and lines."""
    try:
        with open(source, "rb") as file:
            head = file.read(4)
            file.seek(0)
            first = _first_line(file)
    except OSError as exc:
        raise UserError(f"{source}: cannot read query source: {exc}") from exc
    if head in _PCAP_MAGICS:
        return "pcap"
    if head == _PCAPNG_MAGIC:
        return "pcapng"
    if first is None:
        raise UserError(f"{source}: empty: no queries to read")
    if _QUERYLOG.search(first):
        return "querylog"
    if len(first.split()) == 2:
        return "dnsperf"
    raise UserError(f"{source}: neither a pcap/pcapng capture, a BIND query log (`query:` "
                    f"lines) nor a dnsperf query file (NAME TYPE): first line {first[:80]!r}")


def _first_line(file: BinaryIO) -> str | None:
    """The first line that is not blank nor a comment, as text (None if there is none)."""
    for raw in file:
        line = raw.decode("utf-8", errors="replace").strip()
        if line and not line.startswith((";", "#")):
            return line
    return None


def _outside(name: str, origins: set[dns.name.Name] | None) -> str:
    """OUTSIDE if origins are given and no origin is name or one of its ancestors."""
    if origins is None:
        return ""
    current = dns.name.from_text(name)
    while True:
        if current in origins:
            return ""
        if current == dns.name.root:
            return OUTSIDE
        current = current.parent()


def _query(name: dns.name.Name, rdtype: int, rdclass: int) -> Query | str:
    """The dnsperf line's fields for one question, or why it is dropped."""
    if rdclass != dns.rdataclass.IN:
        return NOT_IN
    if rdtype in (dns.rdatatype.AXFR, dns.rdatatype.IXFR):
        return TRANSFER
    type_text = dns.rdatatype.to_text(rdtype)
    if type_text.startswith("TYPE"):
        return UNKNOWN_TYPE
    if not dnsperf_safe(name):
        return UNSENDABLE
    return query_text(name), type_text


def _query_from_text(name: str, rdtype: str, rdclass: str = "IN") -> Query | str:
    try:
        return _query(dns.name.from_text(name), dns.rdatatype.from_text(rdtype),
                      dns.rdataclass.from_text(rdclass))
    except (dns.exception.DNSException, ValueError):
        return MALFORMED


# --- readers: each yields a query or the reason for dropping one packet or line ----------------


def _text_lines(source: Path) -> Iterator[str]:
    try:
        with open(source, encoding="utf-8", errors="replace") as file:
            yield from file
    except OSError as exc:
        raise UserError(f"{source}: cannot read query source: {exc}") from exc


def read_querylog(source: Path) -> Iterator[Query | str]:
    for line in _text_lines(source):
        if not line.strip():
            continue
        found = _QUERYLOG.search(line)
        if found is None:
            yield NOT_QUERY
            continue
        name, rdclass, rdtype = found.groups()
        yield _query_from_text(name, rdtype, rdclass)


def read_dnsperf(source: Path) -> Iterator[Query | str]:
    for line in _text_lines(source):
        fields = line.split()
        if not fields or fields[0].startswith((";", "#")):
            continue
        yield _query_from_text(*fields) if len(fields) == 2 else MALFORMED


def read_capture(source: Path) -> Iterator[Query | str]:
    """Every packet of a pcap or pcapng file: a DNS query over UDP or TCP port 53, or why not."""
    try:
        with open(source, "rb") as file:
            reader = _capture_reader(file)
            frame = _frame_decoder(reader.datalink(), source)
            for _, buf in reader:
                yield _packet_query(frame, buf)
    except (OSError, ValueError, dpkt.dpkt.Error) as exc:
        raise UserError(f"{source}: cannot read packet capture: {exc}") from exc


def _capture_reader(file: BinaryIO) -> dpkt.pcap.Reader | dpkt.pcapng.Reader:
    head = file.read(4)
    file.seek(0)
    return dpkt.pcapng.Reader(file) if head == _PCAPNG_MAGIC else dpkt.pcap.Reader(file)


def _frame_decoder(link: int, source: Path) -> Callable[[bytes], dpkt.Packet]:
    if link == dpkt.pcap.DLT_EN10MB:
        return dpkt.ethernet.Ethernet
    if link == dpkt.pcap.DLT_LINUX_SLL:
        return dpkt.sll.SLL
    if link in (dpkt.pcap.DLT_NULL, dpkt.pcap.DLT_LOOP):
        return dpkt.loopback.Loopback
    if link in _RAW_IP_LINKS:
        return _raw_ip
    raise UserError(f"{source}: link type {link} is not one this reads (Ethernet, Linux "
                    "cooked, loopback, raw IP)")


def _raw_ip(buf: bytes) -> dpkt.Packet:
    return dpkt.ip6.IP6(buf) if buf[:1] and buf[0] >> 4 == 6 else dpkt.ip.IP(buf)


def _packet_query(frame: Callable[[bytes], dpkt.Packet], buf: bytes) -> Query | str:
    try:
        packet = frame(buf)
    except (dpkt.dpkt.Error, ValueError):
        return NOT_DNS
    ip = packet if isinstance(packet, dpkt.ip.IP | dpkt.ip6.IP6) else packet.data
    if not isinstance(ip, dpkt.ip.IP | dpkt.ip6.IP6):
        return NOT_DNS
    payload = _dns_payload(ip.data)
    if payload is None:
        return NOT_DNS
    try:
        message = dns.message.from_wire(payload)
    except (dns.exception.DNSException, ValueError):
        return MALFORMED
    if message.flags & dns.flags.QR or message.opcode() != dns.opcode.QUERY:
        return NOT_QUERY
    if len(message.question) != 1:
        return NOT_QUERY if not message.question else MALFORMED
    question = message.question[0]
    return _query(question.name, question.rdtype, question.rdclass)


def _dns_payload(transport: object) -> bytes | None:
    """The DNS message a UDP datagram or TCP segment to or from port 53 carries, if any.

    A TCP segment is taken when it holds one whole length-prefixed message, as a query
    usually is; a message split over segments is not reassembled (dropped as malformed).
    """
    if isinstance(transport, dpkt.udp.UDP):
        if _DNS_PORT in (transport.sport, transport.dport) and transport.data:
            return bytes(transport.data)
        return None
    if isinstance(transport, dpkt.tcp.TCP) and _DNS_PORT in (transport.sport, transport.dport):
        data = bytes(transport.data)
        if not data:
            return None  # handshake and acknowledgements
        return data[2:] if int.from_bytes(data[:2], "big") == len(data) - 2 else b""
    return None


_READERS: dict[str, Callable[[Path], Iterator[Query | str]]] = {
    "pcap": read_capture, "pcapng": read_capture, "querylog": read_querylog,
    "dnsperf": read_dnsperf,
}
