"""Packets no one should send: mutated DNS queries (`fuzz_packets`) and their sender
(`send_packets`), for `python3 -m bench fuzz` (docs/method/fuzz.md).

The generator is pure: the same well-formed queries, count and seed give the same packets in
the same order, so a crash found by a run is found again by the same command. It takes the
suite's own queries (zonedata/derive.py over the coverage set: every owner and type, hostile
labels, a 255-octet name) and turns each into one packet of one mutation kind, the kinds taken
in turn so that every kind has its share:

  odd-type          qtype 0, meta types (AXFR and IXFR partly over TCP, OPT, TSIG, ...),
                    private and random types
  odd-class         CH, HS, NONE, ANY, 0 and random classes
  edns              EDNS versions, payloads and flags; options valid and malformed (client
                    subnet, cookie, NSID, padding, keepalive, expire, unknown codes), a
                    second OPT record
  compression-loop  question names that point at themselves, loop through two pointers, point
                    into the header or past the end
  long-name         names over 255 octets, labels over 63 (the reserved label types) or past
                    the end of the packet, and the deepest legal name (127 labels)
  binary-label      legal names with labels of any octets (NUL, '.', '\\', '*', 0xFF, ...):
                    these reach the driver
  truncated         a query cut anywhere, inside the header too
  header            random flags, opcode and rcode bits, section counts that lie
  opcode            NOTIFY, UPDATE (adding a record), IQUERY, STATUS and unassigned opcodes
  random-bytes      random octets of any length
  bit-flip          a query with one to eight bits flipped

A DLZ driver sees only what named has parsed; the kinds named refuses early test named, the
legal but odd ones (types, classes, binary and deepest labels, EDNS) reach the driver.

Besides the packets, `fuzz_updates` makes RFC 2136 UPDATE messages for a zone that takes them
(also pure: the same zone, count and seed give the same messages), and `send_updates` signs
each with the run's TSIG key as it sends it (a signature is good for minutes only) over TCP:
adds of records of many types at existing names, new names (deep ones, binary labels,
wildcards, below a wildcard), deletes of records, RRsets and whole names, replacements, and
prerequisites, so that what a signed update reaches (named's update code, the driver's
transaction, its empty non-terminal markers, its record text) is exercised too.
"""

from __future__ import annotations

import random
import select
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import dns.edns
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.tsig
import dns.update

from base.update_access import TsigKey
from zonedata.derive import Query
from zonedata.model import Zone

KINDS: tuple[str, ...] = ("odd-type", "odd-class", "edns", "compression-loop", "long-name",
                          "binary-label", "truncated", "header", "opcode", "random-bytes",
                          "bit-flip")


@dataclass(frozen=True)
class Packet:
    """One packet to send: its mutation kind, its octets, and whether it goes over TCP."""

    kind: str
    wire: bytes
    tcp: bool = False


Mutation = Callable[[Query, random.Random], Packet]


def fuzz_packets(queries: Sequence[Query], count: int, seed: int) -> list[Packet]:
    """count packets built from queries: packet i is of kind KINDS[i % len(KINDS)], made from
    a query and random choices drawn from one random.Random(seed)."""
    if not queries:
        raise ValueError("fuzz_packets needs well-formed queries to start from")
    rng = random.Random(seed)
    return [_MUTATIONS[KINDS[i % len(KINDS)]](rng.choice(queries), rng) for i in range(count)]


# --- well-formed starting points ---------------------------------------------------------------


def _message(query: Query, rng: random.Random, *, rdtype: int | str | None = None,
             rdclass: int = dns.rdataclass.IN, **edns: object) -> dns.message.Message:
    """The query as a message without RD, with a random id; EDNS when edns is given."""
    qname, qtype = query
    return dns.message.make_query(qname, rdtype if rdtype is not None else qtype,
                                  rdclass=rdclass, id=rng.getrandbits(16), flags=0, **edns)


def _wire(query: Query, rng: random.Random) -> bytes:
    """The query as a resolver sends it: EDNS0, 1232 octets, the DO bit half the time."""
    return _rendered(_message(query, rng, use_edns=0, payload=1232,
                              want_dnssec=rng.random() < 0.5))


def _rendered(msg: dns.message.Message) -> bytes:
    """msg's octets; a payload of 0 in its own OPT record does not limit them."""
    return msg.to_wire(max_size=65535)


def _header(qid: int, flags: int = 0, qd: int = 1, an: int = 0, ns: int = 0,
            ar: int = 0) -> bytes:
    return struct.pack("!6H", qid, flags, qd, an, ns, ar)


def _question_tail(rng: random.Random) -> bytes:
    return struct.pack("!HH", rng.choice((1, 6, 16, 255)), dns.rdataclass.IN)


# --- the mutations -----------------------------------------------------------------------------

_META_TYPES = (0, 41, 249, 250, 251, 252, 253, 254, 255, 65535)
_ZONE_TRANSFERS = (251, 252)  # IXFR, AXFR


def _odd_type(query: Query, rng: random.Random) -> Packet:
    rdtype = rng.choice((*_META_TYPES, rng.randrange(65280, 65535), rng.randrange(65536)))
    tcp = rdtype in _ZONE_TRANSFERS and rng.random() < 0.7
    return Packet("odd-type", _rendered(_message(query, rng, rdtype=rdtype)), tcp)


def _odd_class(query: Query, rng: random.Random) -> Packet:
    rdclass = rng.choice((0, 2, 3, 4, 254, 255, rng.randrange(256, 65536)))
    return Packet("odd-class", _rendered(_message(query, rng, rdclass=rdclass)))


def _edns_option(rng: random.Random) -> dns.edns.Option:
    ecs, cookie = dns.edns.OptionType.ECS, dns.edns.OptionType.COOKIE
    choice = rng.randrange(9)
    if choice == 0:
        if rng.random() < 0.5:
            address = socket.inet_ntop(socket.AF_INET, rng.randbytes(4))
            return dns.edns.ECSOption(address, rng.randrange(33), rng.randrange(33))
        address = socket.inet_ntop(socket.AF_INET6, rng.randbytes(16))
        return dns.edns.ECSOption(address, rng.randrange(129), rng.randrange(129))
    if choice == 1:  # a client subnet of any length
        return dns.edns.GenericOption(ecs, rng.randbytes(rng.randrange(24)))
    if choice == 2:
        server = rng.randbytes(rng.choice((0, 8, 16, 32)))
        return dns.edns.CookieOption(rng.randbytes(8), server)
    if choice == 3:  # a cookie of a length no cookie has
        return dns.edns.GenericOption(cookie, rng.randbytes(rng.choice((0, 1, 7, 9, 41, 64))))
    if choice == 4:  # NSID, empty or not
        return dns.edns.GenericOption(dns.edns.OptionType.NSID, rng.randbytes(rng.choice((0, 4))))
    if choice == 5:
        return dns.edns.GenericOption(dns.edns.OptionType.PADDING,
                                      bytes(rng.randrange(0, 300)))
    if choice == 6:  # keepalive: empty in a query, a timeout from a server only
        return dns.edns.GenericOption(dns.edns.OptionType.KEEPALIVE,
                                      rng.randbytes(rng.choice((0, 1, 2, 3))))
    if choice == 7:
        return dns.edns.GenericOption(dns.edns.OptionType.EXPIRE,
                                      rng.randbytes(rng.choice((0, 3, 4))))
    return dns.edns.GenericOption(rng.randrange(65536), rng.randbytes(rng.randrange(64)))


# A second OPT record at the root: payload 1232, no options (RFC 6891: FORMERR).
_SECOND_OPT = b"\x00" + struct.pack("!HHIH", 41, 1232, 0, 0)


def _edns(query: Query, rng: random.Random) -> Packet:
    options = [_edns_option(rng) for _ in range(rng.randrange(1, 5))]
    msg = _message(query, rng, use_edns=rng.choice((0, 0, 0, 1, 255)),
                   payload=rng.choice((0, 1, 511, 512, 1232, 4096, 65535)),
                   ednsflags=rng.getrandbits(16), options=options)
    wire = _rendered(msg)
    if rng.random() < 0.25:
        arcount = struct.unpack("!H", wire[10:12])[0] + 1
        wire = wire[:10] + struct.pack("!H", arcount) + wire[12:] + _SECOND_OPT
    return Packet("edns", wire)


def _compression_loop(query: Query, rng: random.Random) -> Packet:
    name = query[0].to_wire()
    assert name is not None
    at = len(_header(0))  # where the question name starts
    names = (
        struct.pack("!H", 0xC000 | at),                              # points at itself
        b"\x03www" + struct.pack("!H", 0xC000 | at),                 # a label, then back
        struct.pack("!HH", 0xC000 | (at + 2), 0xC000 | at),          # two pointers, a loop
        name[:-1] + struct.pack("!H", 0xC000 | at),                  # the name, then back
        struct.pack("!H", 0xC000 | rng.randrange(at)),               # into the header
        struct.pack("!H", 0xC000 | rng.randrange(at + 8, 0x4000)),   # past the end
    )
    wire = _header(rng.getrandbits(16)) + rng.choice(names) + _question_tail(rng)
    return Packet("compression-loop", wire)


def _long_name(query: Query, rng: random.Random) -> Packet:
    choice = rng.randrange(4)
    if choice == 0:  # 127 labels of one octet: 255 octets, the deepest legal name
        name = dns.name.Name((b"a",) * 127 + (b"",))
        return Packet("long-name", _rendered(_message((name, query[1]), rng)))
    if choice == 1:  # over 255 octets in labels of up to 63
        labels = b"".join(bytes([63]) + b"x" * 63 for _ in range(rng.randrange(5, 9)))
        raw = labels + b"\x00"
    elif choice == 2:  # a label length of the reserved types 0x40-0xBF
        raw = bytes([rng.randrange(0x40, 0xC0)]) + rng.randbytes(rng.randrange(64)) + b"\x00"
    else:  # a label running past the end of the packet
        raw = bytes([63]) + b"y" * rng.randrange(62)
        return Packet("long-name", _header(rng.getrandbits(16)) + raw)
    return Packet("long-name", _header(rng.getrandbits(16)) + raw + _question_tail(rng))


def _binary_label_value(rng: random.Random) -> bytes:
    return rng.choice((
        rng.randbytes(rng.randrange(1, 64)), b"*", b"\x00", b".", b"\\", b"@", b"..",
        bytes(range(rng.randrange(1, 64))), bytes([0xFF]) * rng.randrange(1, 64),
        bytes(rng.choice(b"ABCdef019-_") for _ in range(rng.randrange(1, 64))),
    ))


def _binary_label(query: Query, rng: random.Random) -> Packet:
    qname = query[0]
    for _ in range(rng.randrange(1, 4)):
        qname = _with_label(_binary_label_value(rng), qname)
    return Packet("binary-label", _rendered(_message((qname, query[1]), rng)))


def _with_label(label: bytes, name: dns.name.Name) -> dns.name.Name:
    """label added in front of name; where that is too long, in place of name's first label;
    where that is too, name as it was."""
    for rest in (name.labels, name.labels[1:] if len(name) > 1 else None):
        if rest is None:
            break
        try:
            return dns.name.Name((label, *rest))
        except dns.name.NameTooLong:
            continue
    return name


def _truncated(query: Query, rng: random.Random) -> Packet:
    wire = _wire(query, rng)
    return Packet("truncated", wire[:rng.randrange(len(wire))])


def _header_lies(query: Query, rng: random.Random) -> Packet:
    wire = _wire(query, rng)
    fields = list(struct.unpack("!6H", wire[:12]))
    for index in rng.sample(range(1, 6), rng.randrange(1, 3)):  # never the id
        if index == 1:  # the flags: any other bits
            fields[1] ^= rng.randrange(1, 1 << 16)
        else:  # a section count: a lie
            fields[index] = rng.choice([n for n in (0, 2, 3, 255, 65535) if n != fields[index]])
    return Packet("header", struct.pack("!6H", *fields) + wire[12:])


def _opcode(query: Query, rng: random.Random) -> Packet:
    qname, _ = query
    opcode = rng.choice((1, 2, 3, 4, 5, rng.randrange(6, 16)))
    if opcode == dns.opcode.UPDATE:
        update = dns.update.UpdateMessage(qname, id=rng.getrandbits(16))
        update.add(_with_label(b"fuzz", qname), 300, "A", "192.0.2.99")
        return Packet("opcode", _rendered(update))
    msg = _message((qname, "SOA" if opcode == dns.opcode.NOTIFY else query[1]), rng)
    msg.set_opcode(opcode)
    if opcode == dns.opcode.NOTIFY:
        msg.flags |= dns.flags.AA
    return Packet("opcode", _rendered(msg))


def _random_bytes(query: Query, rng: random.Random) -> Packet:
    size = rng.choice((0, 1, 5, 11, 12, 13, rng.randrange(14, 600)))
    return Packet("random-bytes", rng.randbytes(size))


def _bit_flip(query: Query, rng: random.Random) -> Packet:
    wire = bytearray(_wire(query, rng))
    for _ in range(rng.randrange(1, 9)):
        bit = rng.randrange(len(wire) * 8)
        wire[bit // 8] ^= 0x80 >> (bit % 8)
    return Packet("bit-flip", bytes(wire))


_MUTATIONS: dict[str, Mutation] = {
    "odd-type": _odd_type, "odd-class": _odd_class, "edns": _edns,
    "compression-loop": _compression_loop, "long-name": _long_name,
    "binary-label": _binary_label, "truncated": _truncated, "header": _header_lies,
    "opcode": _opcode, "random-bytes": _random_bytes, "bit-flip": _bit_flip,
}
assert tuple(_MUTATIONS) == KINDS


# --- sending -----------------------------------------------------------------------------------

# UDP packets sent before the replies are read and the server is looked at: small enough that
# the server's receive buffer never drops one, and that a crash is pinned to few packets.
BATCH = 32
# The silence that ends a batch's replies: a server that drops a packet sends nothing back.
QUIET_S = 0.02
# How long after the last packet the server is looked at once more.
AFTER_S = 0.5
# A TCP exchange (a zone transfer included) ends when the server closes or is this quiet.
TCP_QUIET_S = 0.3


@dataclass
class Crash:
    """The server was found dead (or silent: `how`) after packets first..last (indexes,
    inclusive), of these kinds."""

    first: int
    last: int
    kinds: list[str] = field(default_factory=list)
    how: str = "died"


@dataclass
class FuzzOutcome:
    sent: int = 0
    answered: int = 0  # UDP replies, and TCP exchanges the server answered
    seconds: float = 0.0
    crash: Crash | None = None


def send_packets(packets: Sequence[Packet], host: str, port: int,
                 alive: Callable[[], bool]) -> FuzzOutcome:
    """Every packet to the server at host:port in order, UDP ones in batches of BATCH, each
    TCP one on a connection of its own; `alive()` is asked after each batch and each TCP
    packet, and the first time it says no, sending stops with the crash's packets named."""
    outcome = FuzzOutcome()
    start = time.monotonic()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as udp:
        udp.connect((host, port))
        index = checked_to = 0
        suspects = range(0)
        while index < len(packets):
            if packets[index].tcp:
                outcome.answered += _exchange_tcp(packets[index], host, port)
                batch = [index]
            else:
                batch = _udp_batch(packets, index)
                outcome.answered += _send_udp(udp, [packets[i] for i in batch])
            outcome.sent += len(batch)
            index = batch[-1] + 1
            # A server dies a moment after the packet that killed it: the batch before is
            # named too.
            suspects = range(checked_to, index)
            if not alive():
                break
            checked_to = batch[0]
    outcome.seconds = time.monotonic() - start
    if outcome.sent and not _still_alive(alive):
        outcome.crash = Crash(suspects[0], suspects[-1], [packets[i].kind for i in suspects])
    return outcome


def _still_alive(alive: Callable[[], bool]) -> bool:
    """alive() now and once more a moment later (a dying server may still be exiting)."""
    if not alive():
        return False
    time.sleep(AFTER_S)
    return alive()


def _udp_batch(packets: Sequence[Packet], start: int) -> list[int]:
    """Indexes of up to BATCH consecutive UDP packets from start."""
    batch = []
    for index in range(start, min(start + BATCH, len(packets))):
        if packets[index].tcp:
            break
        batch.append(index)
    return batch


def _send_udp(udp: socket.socket, batch: list[Packet]) -> int:
    """Send the batch, then read replies until QUIET_S passes without one; replies read."""
    for packet in batch:
        try:
            udp.send(packet.wire)
        except OSError:  # ICMP refusal of an earlier packet, surfacing here
            pass
    replies = 0
    while select.select([udp], [], [], QUIET_S)[0]:
        try:
            udp.recv(65535)
        except OSError:  # the port was closed: the server is gone, as alive() will say
            break
        replies += 1
    return replies


def _exchange_tcp(packet: Packet, host: str, port: int) -> int:
    """1 if the server sent anything back on the packet's own connection, else 0."""
    try:
        with socket.create_connection((host, port), timeout=2) as tcp:
            tcp.sendall(struct.pack("!H", len(packet.wire)) + packet.wire)
            got = 0
            while select.select([tcp], [], [], TCP_QUIET_S)[0]:
                chunk = tcp.recv(65535)
                if not chunk:
                    break
                got += len(chunk)
            return 1 if got else 0
    except OSError:
        return 0


# --- signed updates ----------------------------------------------------------------------------

# Record texts an update adds, names relative to the zone ("@" the apex): every type the
# stores keep text of in a form of their own (binary tails, LOC, an unknown type), and the ones
# that change a zone's shape (NS: a delegation; CNAME and DNAME beside other data).
_UPDATE_RDATA: tuple[tuple[str, str], ...] = (
    ("A", "192.0.2.{n}"), ("AAAA", "2001:db8::{n:x}"), ("TXT", '"fuzz {n}" "a\\"b\\\\c" "\\000"'),
    ("TXT", '"' + "x" * 255 + '"'), ("MX", "{n} mail.@"), ("CNAME", "target{n}.@"),
    ("DNAME", "dname{n}.@"), ("NS", "ns{n}.@"), ("PTR", "ptr{n}.@"),
    ("SRV", "0 {n} 5060 sip.@"), ("CAA", '0 issue "ca{n}.example"'),
    ("HINFO", '"cpu {n}" "os"'), ("NAPTR", '100 {n} "u" "E2U+sip" "!^.*$!sip:x@example!" .'),
    ("DS", "{n} 8 2 " + "ab" * 32), ("SSHFP", "1 2 " + "CD" * 32),
    ("TLSA", "3 1 1 " + "0f" * 32), ("LOC", "52 22 23.500 N 4 53 32.000 E -{n}.50m 1m 10000m 10m"),
    ("TYPE65280", "\\# 4 0a0b0c{n:02x}"), ("SOA", "ns.@ admin.@ {n} 3600 600 86400 300"),
)


def fuzz_updates(zone: Zone, count: int, seed: int) -> list[dns.update.UpdateMessage]:
    """count UPDATE messages to zone (unsigned: send_updates signs them), each of one to four
    changes, sometimes with a prerequisite, drawn from one random.Random(seed) over zone's
    owners and the names the messages before added."""
    rng = random.Random(seed)
    owners = sorted({record.owner for record in zone.records})
    added: list[tuple[dns.name.Name, str, str]] = []
    messages = []
    for index in range(count):
        message = dns.update.UpdateMessage(zone.origin, id=index & 0xFFFF)
        if rng.random() < 0.15:
            _prerequisite(message, rng.choice(owners), rng)
        for _ in range(rng.randrange(1, 5)):
            _change(message, zone.origin, owners, added, rng)
        messages.append(message)
    return messages


def _prerequisite(message: dns.update.UpdateMessage, name: dns.name.Name,
                  rng: random.Random) -> None:
    choice = rng.randrange(3)
    if choice == 0:
        message.present(name)
    elif choice == 1:
        message.absent(name)
    else:
        message.present(name, rng.choice(("A", "TXT", "MX")))


def _update_name(origin: dns.name.Name, owners: list[dns.name.Name],
                 rng: random.Random) -> dns.name.Name:
    """An existing owner, a new name below one (of one to three labels, some binary), or a
    wildcard at one."""
    base = rng.choice(owners)
    choice = rng.randrange(5)
    if choice == 0:
        return base
    if choice == 1:
        return _with_label(b"*", base)
    labels = [rng.choice((b"fz", b"n%d" % rng.randrange(50), b"*", _binary_label_value(rng)))
              for _ in range(rng.randrange(1, 4))]
    name = base
    for label in labels:
        name = _with_label(label, name)
    return name if name.is_subdomain(origin) else base


def _change(message: dns.update.UpdateMessage, origin: dns.name.Name,
            owners: list[dns.name.Name], added: list[tuple[dns.name.Name, str, str]],
            rng: random.Random) -> None:
    """One change: an add (or a replacement) of a record of any type, or a delete of a record,
    an RRset or a whole name."""
    choice = rng.randrange(10)
    if choice >= 6 or not added:
        name = _update_name(origin, owners, rng)
        rdtype, template = rng.choice(_UPDATE_RDATA)
        text = template.format(n=rng.randrange(1, 250)).replace("@", origin.to_text())
        ttl = rng.choice((0, 1, 300, 3600, 86400, 2147483647))
        if choice == 9:
            message.replace(name, ttl, rdtype, text)
        else:
            message.add(name, ttl, rdtype, text)
        added.append((name, rdtype, text))
    elif choice <= 2:
        name, rdtype, text = rng.choice(added)
        message.delete(name, rdtype, text)
    elif choice <= 4:
        name, rdtype, _ = rng.choice(added)
        message.delete(name, rdtype)
    else:
        message.delete(rng.choice([name for name, _, _ in added] + owners))


@dataclass
class UpdatesOutcome:
    """The signed updates through one server: how many went, how each was answered (RCODE,
    or why there was no answer), and the crash, if the server died under them."""

    sent: int = 0
    seconds: float = 0.0
    answers: dict[str, int] = field(default_factory=dict)
    crash: Crash | None = None


# How many messages go between two looks at the server (each is one TCP exchange).
UPDATES_BATCH = 16
UPDATE_TIMEOUT_S = 5.0


def send_updates(messages: Sequence[dns.update.UpdateMessage], key: TsigKey, host: str,
                 port: int, alive: Callable[[], bool]) -> UpdatesOutcome:
    """Every message signed with key and sent over TCP (one connection each, in order: the
    servers compared afterwards applied the same changes in the same order); `alive()` is
    asked after every UPDATES_BATCH, and the first time it says no, sending stops with the
    crash's messages named (kind "update")."""
    outcome = UpdatesOutcome()
    keyring = {dns.name.from_text(key.name): key.dnspython_key()}
    start = time.monotonic()
    for index, message in enumerate(messages):
        message.use_tsig(keyring)
        answer = _update_answer(message, keyring, host, port)
        outcome.answers[answer] = outcome.answers.get(answer, 0) + 1
        outcome.sent += 1
        if (index + 1) % UPDATES_BATCH == 0 or index + 1 == len(messages):
            if not _still_alive(alive):
                first = max(0, index + 1 - 2 * UPDATES_BATCH)
                outcome.crash = Crash(first, index, ["update"] * (index + 1 - first))
                break
    outcome.seconds = time.monotonic() - start
    return outcome


def _update_answer(message: dns.update.UpdateMessage,
                   keyring: dict[dns.name.Name, dns.tsig.Key], host: str, port: int) -> str:
    """The answer's RCODE name, "TSIG error" or "no answer"."""
    try:
        answer = dns.query.tcp(message, host, port=port, timeout=UPDATE_TIMEOUT_S)
    except (dns.tsig.PeerError, dns.message.UnknownTSIGKey, dns.tsig.BadSignature):
        return "TSIG error"
    except (dns.exception.DNSException, OSError, EOFError):
        return "no answer"
    return dns.rcode.to_text(answer.rcode())


def update_queries(messages: Sequence[dns.update.UpdateMessage]) -> list[Query]:
    """The (name, type) of every record the messages add, once each, in order: what to ask
    a server afterwards besides the data set's own queries."""
    seen: dict[Query, None] = {}
    for message in messages:
        for rrset in message.update:
            if rrset.deleting is None:
                seen.setdefault((rrset.name, dns.rdatatype.to_text(rrset.rdtype)), None)
    return list(seen)
