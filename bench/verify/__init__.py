"""Ask native BIND, the memory driver and each driver the same queries; compare the answers.

This is the one comparison engine: `python3 -m bench verify`, the runner's answer check and
the driver tests all use it.

What is compared. A response is reduced to its rcode, the AA and TC flags, and the answer,
authority and additional sections as sets of RRs with TTLs (`Answer`). Queries carry EDNS0
with a 1232-octet payload, what resolvers have sent since DNS Flag Day 2020, so the sizes are
those real clients see.

Truncation. A DLZ driver never sees the transport: BIND renders its rows into a UDP or TCP
response like any other database's, so whether a response fits a UDP payload is a property
of BIND's rendering, not of the data. And the rendering differs between the two paths: a
native zone renders owner names as the zone file spells them, a DLZ answer as the query
spelled them, and BIND compresses case-sensitively, so a mixed-case query for a 255-octet
name fits for DLZ and is truncated for native BIND (TC=1, empty sections) with the very same
records. Such a transport-size artifact must not count as a driver difference, while a
truncation that the size does not explain still must. So each side's *complete* answer is
compared (`complete`):
  - a UDP answer with TC=1 is replaced by the TCP answer to the same query, when that TCP
    answer is larger than the UDP payload: the truncation was forced by the size;
  - a UDP answer near the payload limit (more than half of it) is replaced by the TCP answer
    too: near the limit BIND may also leave out additional-section records without setting
    TC, and the other side's rendering may just have fitted;
  - a TC=1 answer whose TCP answer would have fitted the payload stays as it is, TC and empty
    sections included, and so differs from any complete answer: a real TC difference.
`ask` fetches the TCP answer at once in the first two cases, so a reference answer stays
comparable after its server has stopped (the runner keeps native BIND's answers).

Known differences. Seven classes of difference come from BIND's own DLZ path (lib/dns/sdlz.c,
lib/ns/query.c), not from any driver, and eleven more on signed data (DNSSEC material the
path leaves out or changes): they are seen between native BIND and a perfect
in-memory DLZ module (tests/test_memory_driver.py). `classify` names a difference only when
it has exactly the shape the class describes (`BIND_CLASSES`); every other difference belongs
to the driver. Drivers are then compared with the memory driver, which must match them
exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.rrset

from servers import DLZ_CEILING as MEMORY
from servers import REFERENCE as NATIVE
from servers import get_server
from servers.dlz import DLZ_PATH_CLASSES, DLZ_SIGNED_PATH_CLASSES
from servers.dnsserver import DnsServer
from zonedata.derive import Query
from zonedata.model import Zone, empty_nonterminals

Rr = tuple[str, int, str, str]  # owner (lower case), TTL, type, rdata

# The EDNS0 payload queries advertise; named 9.18's max-udp-size is the same by default.
UDP_PAYLOAD = 1232
# The UDP limit of a query without EDNS (RFC 1035).
PLAIN_UDP_LIMIT = 512

# The class of a difference no BIND mechanism explains.
DRIVER = "driver"


# --- answers ---------------------------------------------------------------------------------


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


def _section(rrsets: Iterable[dns.rrset.RRset]) -> frozenset[Rr]:
    out = set()
    for rrset in rrsets:
        if rrset.rdtype == dns.rdatatype.OPT:
            continue
        name = rrset.name.to_text().lower()
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


def ask(named: DnsServer, query: Query, dnssec: bool = False) -> Reply:
    """The UDP answer, with the TCP answer when the UDP one may not be complete; both with the
    DO bit when dnssec."""
    udp = reduce(named.query(query[0], query[1], payload=UDP_PAYLOAD, dnssec=dnssec))
    if not (udp.tc or udp.size > udp.limit // 2):
        return udp, None
    return udp, reduce(named.query(query[0], query[1], tcp=True, payload=UDP_PAYLOAD,
                                   dnssec=dnssec), tcp=True)


def complete(reply: Reply) -> Answer:
    """The answer to compare: see the module docstring on truncation."""
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


def transfer(named: DnsServer, zone: dns.name.Name, source: str | None = None) -> Answer:
    """A full zone transfer reduced to its set of RRs; the rcode says why it failed."""
    try:
        messages = list(dns.query.xfr("127.0.0.1", zone, port=named.port, timeout=30,
                                      lifetime=120, source=source, relativize=False))
    except dns.query.TransferError as exc:
        return replace(_NO_ANSWER, rcode=dns.rcode.to_text(exc.rcode))
    except (dns.exception.DNSException, OSError, EOFError) as exc:
        return replace(_NO_ANSWER, rcode=f"failed: {type(exc).__name__}")
    rrs = frozenset().union(*(_section(m.answer) for m in messages))
    return Answer("NOERROR", True, False, rrs, frozenset(), frozenset(), tcp=True)


# --- the known classes -----------------------------------------------------------------------


@dataclass(frozen=True)
class ZoneFacts:
    """What the classes need to know about the data set."""

    origins: frozenset[dns.name.Name]
    delegations: frozenset[dns.name.Name]
    ents: frozenset[dns.name.Name]
    cnames: frozenset[dns.name.Name]
    # Names that own only NSEC3 records (and their RRSIGs): the hashed names of an NSEC3 chain.
    nsec3_owners: frozenset[dns.name.Name] = frozenset()

    @classmethod
    def of(cls, zones: Iterable[Zone]) -> ZoneFacts:
        origins, delegations, ents, cnames = set(), set(), set(), set()
        nsec3_owners = set()
        for zone in zones:
            origins.add(zone.origin)
            ents.update(empty_nonterminals(zone))
            nsec3_owners.update(nsec3_chain_owners(zone))
            for r in zone.records:
                if r.owner == zone.origin:
                    continue
                if r.rdtype == "NS":
                    delegations.add(r.owner)
                elif r.rdtype == "CNAME":
                    cnames.add(r.owner)
        return cls(frozenset(origins), frozenset(delegations), frozenset(ents),
                   frozenset(cnames), frozenset(nsec3_owners))

    def zone_of(self, name: dns.name.Name) -> dns.name.Name | None:
        """The deepest hosted zone name lies in, or None."""
        while name not in self.origins:
            if name == dns.name.root:
                return None
            name = name.parent()
        return name


def nsec3_chain_owners(zone: Zone) -> set[dns.name.Name]:
    """Owners holding nothing but NSEC3 records and their signatures."""
    types: dict[dns.name.Name, set[str]] = {}
    for r in zone.records:
        types.setdefault(r.owner, set()).add(r.rdtype)
    return {owner for owner, present in types.items()
            if "NSEC3" in present and present <= {"NSEC3", "RRSIG"}}


# A DLZ driver's known classes (DlzNamed.known_classes()), the default of the two below.
DLZ_CLASSES = (*DLZ_PATH_CLASSES, *DLZ_SIGNED_PATH_CLASSES)


def classify(query: Query, native: Answer, other: Answer, facts: ZoneFacts,
             classes: Iterable[str] = DLZ_CLASSES) -> str:
    """The known class(es) a difference from native BIND belongs to, else DRIVER.

    `classes` are KNOWN_CLASSES names (a server's known_classes()): a BIND DLZ-path class
    names a difference when the difference has exactly its shape; another server's
    behaviours are normalisations, and a difference belongs to those (joined with "+") that
    take it away entirely, applied in the server's order.

    With the DO bit, a difference of one of the unsigned-path classes' shapes once native's
    DNSSEC records are taken away (a cross-zone chain, say) is counted in that class: that
    the DLZ answer also lacks the signatures and proofs is what every DLZ answer does.
    """
    qname, rdtype = query
    known = [KNOWN_CLASSES[name] for name in classes]
    bind_classes = [cls for cls in known if isinstance(cls, BindClass)]
    for cls in bind_classes:
        if cls.matches(qname, rdtype, native, other, facts):
            return cls.name
    stripped = without_dnssec_material(native)
    if stripped != native:
        for cls in bind_classes:
            if cls.name in UNSIGNED_PATH_CLASSES and cls.matches(qname, rdtype, stripped,
                                                                 other, facts):
                return cls.name
    applied: list[str] = []
    for cls in known:
        if not isinstance(cls, ServerBehaviour):
            continue
        pair = cls.normalize(qname, rdtype, native, other, facts)
        if pair is not None and pair != (native, other):
            native, other = pair
            applied.append(cls.name)
            if native == other:
                return "+".join(applied)
    return DRIVER


def classify_transfer(zone: dns.name.Name, native: Answer, other: Answer,
                      classes: Iterable[str] = DLZ_CLASSES) -> str:
    """A zone transfer's difference: the root zone's (DLZ refuses it), a signed zone's RRSIGs
    at one name sharing the lowest TTL (DLZ), and another server's behaviours."""
    classes = list(classes)
    refused = other.rcode != "NOERROR" and not other.answer
    if "root-zone" in classes and zone == dns.name.root and refused:
        return "root-zone"
    if "rrsig-ttl" in classes and _has_type(native.answer, "RRSIG") and replace(
            native, answer=merged_rrsig_ttls(native.answer)) == other:
        return "rrsig-ttl"
    return classify((zone, "AXFR"), native, other, ZoneFacts.of(()), [
        name for name in classes if isinstance(KNOWN_CLASSES[name], ServerBehaviour)])


def _owner(qname: dns.name.Name) -> str:
    return qname.to_text().lower()


def _is_referral(a: Answer, qname: dns.name.Name) -> bool:
    return (a.rcode == "NOERROR" and not a.aa and not a.answer and bool(a.authority)
            and all(rr[0] == _owner(qname) and rr[2] in ("NS", "DS") for rr in a.authority))


def _is_child_nodata(a: Answer, qname: dns.name.Name) -> bool:
    return (a.rcode == "NOERROR" and a.aa and not a.answer
            and all(rr[0] == _owner(qname) and rr[2] == "SOA" for rr in a.authority))


def _is_bare(a: Answer, rcode: str) -> bool:
    return a.rcode == rcode and not (a.aa or a.answer or a.authority or a.additional)


def _ds_parent_side(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
                    facts: ZoneFacts) -> bool:
    return rdtype in ("DS", "NSEC") and qname in facts.delegations and (
        _is_referral(dlz, qname) or (qname in facts.origins and _is_child_nodata(dlz, qname)))


def _soa_nxdomain_ttl(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
                      facts: ZoneFacts) -> bool:
    return (rdtype == "SOA" and native.rcode == "NXDOMAIN"
            and all(rr[1] == 0 for rr in native.authority if rr[2] == "SOA")
            and native == dlz.soa_ttl_zeroed())


def _any_at_ent(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
                facts: ZoneFacts) -> bool:
    return (rdtype == "ANY" and qname in facts.ents and _is_bare(dlz, "SERVFAIL")
            and native.rcode == "NOERROR" and not native.answer)


def _any_at_delegation(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
                       facts: ZoneFacts) -> bool:
    return (rdtype == "ANY" and qname in facts.delegations and _is_referral(native, qname)
            and dlz.rcode == "NOERROR" and not dlz.aa and not dlz.authority
            and not dlz.additional
            and dlz.answer == {rr for rr in native.authority if rr[2] == "NS"})


def _nsec_at_cname(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
                   facts: ZoneFacts) -> bool:
    return (rdtype == "NSEC" and qname in facts.cnames and not native.answer
            and {rr[2] for rr in dlz.answer if rr[0] == _owner(qname)} == {"CNAME"})


def _chain_ends(a: Answer) -> set[dns.name.Name]:
    """Targets of the answer's CNAMEs that the answer does not itself continue."""
    owners = {dns.name.from_text(rr[0]) for rr in a.answer}
    targets = {dns.name.from_text(rr[3]) for rr in a.answer if rr[2] == "CNAME"}
    return targets - owners


def _cross_zone_chain(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
                      facts: ZoneFacts) -> bool:
    """Native stopped at a CNAME into another zone; DLZ only added that zone's records."""
    ends = _chain_ends(native)
    if len(ends) != 1 or not native.answer <= dlz.answer:
        return False
    target_zone = facts.zone_of(next(iter(ends)))
    if target_zone is None or target_zone == facts.zone_of(qname):
        return False
    extra = ((dlz.answer - native.answer) | (dlz.authority - native.authority)
             | (dlz.additional - native.additional))
    return (dlz.aa == native.aa and dlz.rcode in (native.rcode, "NXDOMAIN")
            and all(dns.name.from_text(rr[0]).is_subdomain(target_zone) for rr in extra))


def _root_zone(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
               facts: ZoneFacts) -> bool:
    return facts.zone_of(qname) == dns.name.root and _is_bare(dlz, "REFUSED")


# --- DNSSEC: what BIND's DLZ path leaves out of a signed zone's answers ------------------------

# BIND's DNSSEC types (DNS_RDATATYPEATTR_DNSSEC in lib/dns/rdata/generic/*.c, 9.18).
DNSSEC_TYPES = frozenset({"DNSKEY", "DS", "NSEC", "NSEC3", "NSEC3PARAM", "RRSIG"})
_DENIAL_TYPES = frozenset({"NSEC", "NSEC3"})


def _has_type(rrs: frozenset[Rr], *types: str) -> bool:
    return any(rr[2] in types for rr in rrs)


def _drop(rrs: frozenset[Rr], types: Iterable[str]) -> frozenset[Rr]:
    kinds = set(types)
    return frozenset(rr for rr in rrs if rr[2] not in kinds)


def without_dnssec_material(a: Answer, answer_types: Iterable[str] = ("RRSIG",),
                            authority_types: Iterable[str] = ("RRSIG", *_DENIAL_TYPES)
                            ) -> Answer:
    """The answer less its signatures (every section) and its denial proofs (authority)."""
    return replace(a, answer=_drop(a.answer, answer_types),
                   authority=_drop(a.authority, authority_types),
                   additional=_drop(a.additional, ("RRSIG",)))


def merged_rrsig_ttls(rrs: frozenset[Rr]) -> frozenset[Rr]:
    """Every RRSIG at a name with the lowest TTL of the RRSIGs at that name."""
    lowest: dict[str, int] = {}
    for owner, ttl, rdtype, _ in rrs:
        if rdtype == "RRSIG":
            lowest[owner] = min(ttl, lowest.get(owner, ttl))
    return frozenset((owner, lowest[owner] if rdtype == "RRSIG" else ttl, rdtype, data)
                     for owner, ttl, rdtype, data in rrs)


def _is_negative(a: Answer) -> bool:
    return not a.answer and _has_type(a.authority, "SOA")


def _is_wildcard_answer(a: Answer) -> bool:
    """An RRSIG's labels field below its owner's label count: the answer came from a wildcard
    (RFC 4035 section 5.3.2)."""
    for owner, _, rdtype, data in a.answer:
        if rdtype == "RRSIG":
            name = dns.name.from_text(owner)
            # Neither the root label nor a leading `*` (a query for the wildcard itself)
            # counts.
            labels = len(name) - 1 - (name.labels[0] == b"*")
            if int(data.split()[2]) < labels:
                return True
    return False


def _equal_unsigned(native: Answer, dlz: Answer, *, answer: Iterable[str] = ("RRSIG",),
                    authority: Iterable[str] = ("RRSIG", *_DENIAL_TYPES)) -> bool:
    """Native had DNSSEC material, and DLZ answered exactly native less it."""
    stripped = without_dnssec_material(native, answer, authority)
    return stripped != native and stripped == dlz


def _nsec3_owner(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
                 facts: ZoneFacts) -> bool:
    return qname in facts.nsec3_owners and native.rcode == "NXDOMAIN" and dlz.rcode == "NOERROR"


def _rrsig_ttl(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
               facts: ZoneFacts) -> bool:
    merged = replace(native, answer=merged_rrsig_ttls(native.answer))
    return (rdtype == "RRSIG" and _has_type(native.answer, "RRSIG")
            and without_dnssec_material(merged, answer_types=()) == dlz)


# What a parent zone signs at a delegation point (the NS RRset there is not signed; NSEC3
# records live at hashed owners).
_PARENT_SIDE_SIGNED = frozenset({"DS", "NSEC"})


def _rrsig_at_delegation(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
                         facts: ZoneFacts) -> bool:
    if rdtype != "RRSIG" or qname not in facts.delegations or not _is_referral(
            without_dnssec_material(native, authority_types=("RRSIG", "DS", *_DENIAL_TYPES)),
            qname):
        return False
    apex = facts.zone_of(qname.parent())
    return (apex is not None and dlz.rcode == "NOERROR" and not dlz.aa and bool(dlz.answer)
            and all(rr[0] == _owner(qname) and rr[2] == "RRSIG"
                    and rr[3].split()[0] in _PARENT_SIDE_SIGNED for rr in dlz.answer)
            and bool(dlz.authority)
            and all(rr[0] == _owner(apex) and rr[2] == "NS" for rr in dlz.authority)
            and all(rr[2] in ("A", "AAAA") for rr in dlz.additional))


def _any_hides_dnssec(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
                      facts: ZoneFacts) -> bool:
    return rdtype == "ANY" and _equal_unsigned(native, dlz, answer=DNSSEC_TYPES)


def _dnssec_type_unsigned(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
                          facts: ZoneFacts) -> bool:
    return (rdtype in DNSSEC_TYPES - {"RRSIG"} and bool(native.answer)
            and _equal_unsigned(native, dlz))


def _unsigned_wildcard(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
                       facts: ZoneFacts) -> bool:
    return _is_wildcard_answer(native) and _equal_unsigned(native, dlz)


def _unsigned_answer(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
                     facts: ZoneFacts) -> bool:
    return bool(native.answer) and _equal_unsigned(native, dlz)


def _negative_no_proof(rcode: str) -> Shape:
    def shape(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
              facts: ZoneFacts) -> bool:
        if native.rcode != rcode or not _is_negative(native):
            return False
        # An SOA query's NXDOMAIN also has the soa-nxdomain-ttl difference.
        return _equal_unsigned(native, dlz) or (
            rdtype == "SOA" and _equal_unsigned(native, dlz.soa_ttl_zeroed()))
    return shape


def _referral_without(proof: str) -> Shape:
    """A referral whose DS RRset ("DS") or whose proof of no DS ("NSEC") DLZ left out."""
    def shape(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
              facts: ZoneFacts) -> bool:
        if native.aa or native.answer or not _has_type(native.authority, "NS"):
            return False
        has_ds = _has_type(native.authority, "DS")
        if has_ds != (proof == "DS"):
            return False
        return _equal_unsigned(native, dlz, authority=("RRSIG", "DS", *_DENIAL_TYPES))
    return shape


Shape = Callable[[dns.name.Name, str, Answer, Answer, ZoneFacts], bool]


@dataclass(frozen=True)
class BindClass:
    """A difference BIND's DLZ path makes with a perfect driver, and its exact shape."""

    name: str
    summary: str    # what differs, in one line
    mechanism: str  # where in BIND 9.18 it comes from
    matches: Shape  # (qname, qtype, native answer, DLZ answer, facts) -> has this shape

    def describe(self) -> str:
        return f"{self.summary} ({self.mechanism})"


# In the order classify tries them.
BIND_CLASSES: dict[str, BindClass] = {c.name: c for c in (
    BindClass(
        "root-zone",
        "names in the root zone: DLZ answers REFUSED (and refuses the transfer)",
        "dlz.c dns_dlzfindzone() never asks a DLZ driver for the root zone",
        _root_zone),
    BindClass(
        "ds-parent-side",
        "DS or NSEC at a delegation point: DLZ gives the referral (or, when the child zone is "
        "hosted too, the child's NODATA); native BIND answers from the parent side",
        "sdlz.c find() stops at the NS RRset for every type, and query.c asks DLZ for the "
        "deepest zone without the DNS_GETDB_NOEXACT step to the parent",
        _ds_parent_side),
    BindClass(
        "soa-nxdomain-ttl",
        "NXDOMAIN to an SOA query: native BIND sets the authority SOA's TTL to 0, DLZ keeps "
        "it (NODATA is identical)",
        "query.c zeroes the SOA TTL for an SOA query's negative answer only with the zone "
        "option zero-no-soa-ttl, and a DLZ answer has no dns_zone_t",
        _soa_nxdomain_ttl),
    BindClass(
        "any-at-ent",
        "ANY at an empty non-terminal: DLZ answers SERVFAIL, native BIND NODATA",
        "sdlz.c find() returns success for a node without rdatasets when the type is ANY, "
        "and query.c answers SERVFAIL when an ANY answer then finds no rdataset",
        _any_at_ent),
    BindClass(
        "any-at-delegation",
        "ANY at a delegation point: DLZ puts the NS RRset in the answer section, without AA "
        "and without glue; native BIND gives the referral",
        "sdlz.c find() returns DNS_R_ZONECUT with the NS RRset, which query.c answers as "
        "ANY data instead of a referral",
        _any_at_delegation),
    BindClass(
        "nsec-at-cname",
        "NSEC at a CNAME owner: DLZ follows the CNAME, native BIND answers NODATA",
        "sdlz.c find() answers a CNAME for every type but CNAME, while native's rbtdb lets "
        "NSEC coexist with a CNAME",
        _nsec_at_cname),
    BindClass(
        "cross-zone-chain",
        "a CNAME or DNAME into another hosted zone: DLZ follows the chain into that zone, "
        "native BIND stops at the zone boundary",
        "query.c query_validatezonedb() limits a chain to the zone of the first name, a "
        "check it skips for DLZ databases",
        _cross_zone_chain),
    # Signed zones. sdlz.c's issecure() is false for every DLZ zone and its findrdataset()
    # never fills sigrdataset (it answers ISC_R_NOTIMPLEMENTED for type RRSIG), so query.c
    # asks it for no signature (qctx_prepare_buffers, query_addns, query_addsoa) and adds no
    # proof; the DNSSEC records themselves are served as plain data.
    BindClass(
        "nsec3-owner",
        "a hashed NSEC3 owner name: DLZ answers it as an existing name (NOERROR, the NSEC3 "
        "record to an NSEC3 query), native BIND NXDOMAIN",
        "native zones keep NSEC3 records in a tree of their own outside the zone's names "
        "(rbtdb.c, RFC 5155's rule for queries at NSEC3 owner names); sdlz.c has no NSEC3 "
        "tree (no findnsec3node, no getnsec3parameters) and getnodedata() finds the name",
        _nsec3_owner),
    BindClass(
        "rrsig-ttl",
        "RRSIG query (or a transfer of a signed zone): the same RRSIGs, every one at a name "
        "with the lowest TTL of them; no signature over the rest",
        "sdlz.c dns_sdlz_putrr() keeps one rdatalist per type, not per covered type, and "
        "lowers its TTL to the smallest record's; query.c answers RRSIG as ANY "
        "(query_respond_any) from sdlz's allrdatasets()",
        _rrsig_ttl),
    BindClass(
        "rrsig-at-delegation",
        "RRSIG at a delegation point: DLZ answers the parent side's signatures there (over "
        "its NSEC and DS) without AA, with the zone's own NS RRset in the authority section; "
        "native BIND gives the referral",
        "query.c asks for type ANY when the query is for RRSIG, sdlz.c find() returns "
        "DNS_R_ZONECUT for ANY at a zone cut, and query_respond_any() answers the node's "
        "RRSIGs; query_addauth() then adds the apex NS (query_addns)",
        _rrsig_at_delegation),
    BindClass(
        "any-hides-dnssec",
        "ANY at a signed name: DLZ leaves out DNSKEY, DS, NSEC, NSEC3, NSEC3PARAM and RRSIG",
        "query.c query_respond_any() hides DNSSEC-type rdatasets of a zone database that is "
        "not secure (a zone 'transitioning to secure'), and sdlz.c issecure() returns false",
        _any_hides_dnssec),
    BindClass(
        "dnssec-type-unsigned",
        "DNSKEY, DS, NSEC, NSEC3 or NSEC3PARAM asked for: DLZ serves the records without their "
        "RRSIG (a validator cannot use an unsigned DNSKEY RRset)",
        "sdlz.c findrdataset() finds the type like any other and never fills sigrdataset",
        _dnssec_type_unsigned),
    BindClass(
        "unsigned-wildcard",
        "a wildcard answer with DO: DLZ sends the expanded records without RRSIG and without "
        "the NSEC/NSEC3 proof that no closer name exists",
        "query.c query_addauth() adds the wildcard proof only if dns_db_issecure(), which "
        "sdlz.c answers false; findrdataset() never fills sigrdataset",
        _unsigned_wildcard),
    BindClass(
        "unsigned-answer",
        "a positive answer with DO: DLZ sends the same records without an RRSIG in any "
        "section (and, after a CNAME, without the target's denial proof)",
        "sdlz.c findrdataset() leaves sigrdataset unused and issecure() is false, so "
        "query.c asks for no signature (qctx_prepare_buffers, query_addns, query_addsoa)",
        _unsigned_answer),
    BindClass(
        "nodata-no-proof",
        "NODATA with DO: DLZ sends the SOA without RRSIG and without the NSEC/NSEC3 record "
        "that proves the type absent",
        "sdlz.c findext() returns DNS_R_NXRRSET with no NSEC rdataset, so query.c "
        "query_nodata() has no proof to add (query_addnxrrsetnsec)",
        _negative_no_proof("NOERROR")),
    BindClass(
        "nxdomain-no-proof",
        "NXDOMAIN with DO: DLZ sends the SOA without RRSIG and without the NSEC/NSEC3 records "
        "that prove the name and its wildcard absent",
        "sdlz.c findext() returns DNS_R_NXDOMAIN with no NSEC rdataset and cannot find NSEC3 "
        "records; query.c query_nxdomain() adds a proof only if find returned one, and "
        "query_addwildcardproof() finds none",
        _negative_no_proof("NXDOMAIN")),
    BindClass(
        "referral-no-ds",
        "a referral to a signed child with DO: DLZ leaves out the DS RRset and its RRSIG",
        "query.c query_addds() adds the DS only when both the DS rdataset and its signature "
        "are found, and sdlz.c findrdataset() never returns a signature",
        _referral_without("DS")),
    BindClass(
        "referral-no-proof",
        "an insecure referral with DO: DLZ leaves out the NSEC/NSEC3 proof that the "
        "delegation has no DS",
        "query.c query_addds() falls back to the NSEC only when it and its signature are "
        "found (NSEC3 needs findnsec3node, which sdlz lacks)",
        _referral_without("NSEC")),
)}

# The classes of an unsigned data set, also judged on a signed one less its DNSSEC records.
UNSIGNED_PATH_CLASSES = frozenset(DLZ_PATH_CLASSES)


# --- other servers' known differences --------------------------------------------------------
#
# Another server's differences from native BIND are behaviours of that server, several of
# which can meet in one answer (a positive answer without the authority NS RRset, whose
# rdata names also come back in lower case). So each is a normalisation: it removes exactly
# its own effect from a (native, other) pair when the pair has its shape, and a difference
# belongs to the classes whose normalisations, applied in the server's order, make the two
# answers equal ("knot-minimal-authority+knot-rdata-name-case"); anything left is DRIVER.

# Types whose rdata text holds only names and numbers, so lower-casing it folds the names.
_NAME_RDATA_TYPES = frozenset({"NS", "CNAME", "DNAME", "PTR", "MX", "SRV", "SOA"})
# Types whose last rdata field is a name the server may add addresses for (additional data).
_TARGET_TYPES = frozenset({"NS", "MX", "SRV"})

Pair = tuple[Answer, Answer]
Normalize = Callable[[dns.name.Name, str, Answer, Answer, ZoneFacts], Pair | None]


@dataclass(frozen=True)
class ServerBehaviour:
    """A difference another server makes from native BIND on the same data, as a
    normalisation (None: the pair does not have its shape)."""

    name: str
    summary: str
    mechanism: str
    normalize: Normalize

    def describe(self) -> str:
        return f"{self.summary} ({self.mechanism})"


def _fold_rr(rr: Rr) -> Rr:
    return (rr[0], rr[1], rr[2], rr[3].lower()) if rr[2] in _NAME_RDATA_TYPES else rr


def _folded(a: Answer) -> Answer:
    return replace(a, answer=frozenset(map(_fold_rr, a.answer)),
                   authority=frozenset(map(_fold_rr, a.authority)),
                   additional=frozenset(map(_fold_rr, a.additional)))


def _rdata_name_case(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                     facts: ZoneFacts) -> Pair | None:
    return _folded(native), _folded(other)


def _covered(rr: Rr) -> str:
    """The type an RR goes with: an RRSIG's covered type, any other RR's own (with DO a
    signed RRset comes with its signatures, and a behaviour moves or drops them together)."""
    return rr[3].split()[0] if rr[2] == "RRSIG" else rr[2]


def _targets(rrs: Iterable[Rr]) -> set[str]:
    """Names at the end of NS, MX and SRV rdata (what additional addresses are for)."""
    return {rr[3].split()[-1].lower() for rr in rrs if rr[2] in _TARGET_TYPES}


def _one_rrset(answer: frozenset[Rr]) -> bool:
    """One name's RRset with its signatures, or that name's RRSIG RRset alone."""
    types = {rr[2] for rr in answer} - {"RRSIG"}
    if len({rr[0] for rr in answer}) != 1:
        return False
    return len(types) == 1 and all(_covered(rr) in types for rr in answer) or (
        not types and bool(answer))


def _only_addresses_of(additional: frozenset[Rr], names: set[str]) -> bool:
    return all(_covered(rr) in ("A", "AAAA") and rr[0] in names for rr in additional)


def _minimal_authority(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                       facts: ZoneFacts) -> Pair | None:
    """A positive answer without the zone's NS RRset (and its signatures) in the authority
    section, and without the additional addresses that were there only for it; anything
    else in the authority section (a wildcard answer's NSEC proof) stays."""
    ns = frozenset(rr for rr in native.authority if _covered(rr) == "NS")
    if not (native.rcode == other.rcode == "NOERROR" and native.answer and ns
            and other.authority == native.authority - ns):
        return None
    ns_only = _targets(ns) - _targets(native.answer)
    return replace(native, authority=native.authority - ns, additional=frozenset(
        rr for rr in native.additional if rr[0] not in ns_only)), other


def _any_one_rrset(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                   facts: ZoneFacts) -> Pair | None:
    """ANY answered with one of the name's RRsets, no authority section, and additional
    addresses of that RRset's targets only."""
    if not (rdtype == "ANY" and _one_rrset(other.answer) and other.answer <= native.answer
            and native.rcode == other.rcode == "NOERROR" and native.aa == other.aa
            and not other.authority
            and _only_addresses_of(other.additional, _targets(other.answer))):
        return None
    return other, other


def _nsec_referral(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                   facts: ZoneFacts) -> Pair | None:
    """NSEC at a delegation point answered with the referral (NS, and the DS or the NSEC
    that proves none, with signatures) instead of the parent side's NSEC record."""
    owner = _owner(qname)
    if not (rdtype == "NSEC" and qname in facts.delegations and native.answer
            and not other.aa and not other.answer
            and any(rr[2] == "NS" for rr in other.authority)
            and all(rr[0] == owner for rr in other.authority)
            and _only_addresses_of(other.additional, _targets(other.authority))):
        return None
    return other, other


def _rrsig_one_rrset(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                     facts: ZoneFacts) -> Pair | None:
    """RRSIG answered with the signatures over one of the name's RRsets, no authority or
    additional section."""
    if not (rdtype == "RRSIG" and native.rcode == other.rcode == "NOERROR"
            and native.aa == other.aa and other.answer and other.answer <= native.answer
            and all(rr[2] == "RRSIG" for rr in other.answer) and _one_rrset(
                frozenset((rr[0], rr[1], _covered(rr), rr[3]) for rr in other.answer))
            and not other.authority and not other.additional):
        return None
    return other, other


def _any_to_tcp(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                facts: ZoneFacts) -> Pair | None:
    """ANY over UDP answered with an empty truncated response."""
    if rdtype == "ANY" and other.tc and not (other.answer or other.authority
                                             or other.additional):
        return other, other
    return None


# The octets PowerDNS accepts in a query name without 8bit-dns (its packet handler's check).
_PDNS_NAME_OCTETS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                              b"0123456789-_*./@ \\:")


def _servfail_8bit(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                   facts: ZoneFacts) -> Pair | None:
    """SERVFAIL, nothing else, for a query name with an octet PowerDNS refuses."""
    odd = any(octet not in _PDNS_NAME_OCTETS for label in qname.labels for octet in label)
    if odd and other.rcode == "SERVFAIL" and not (other.answer or other.authority
                                                   or other.additional):
        return other, other
    return None


def _dname_not_processed(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                         facts: ZoneFacts) -> Pair | None:
    """Below a DNAME: NXDOMAIN with the zone's SOA instead of the DNAME and its CNAME."""
    dnames = [dns.name.from_text(rr[0]) for rr in native.answer if rr[2] == "DNAME"]
    zone = facts.zone_of(qname)
    if not (zone is not None and any(qname.is_subdomain(d) and qname != d for d in dnames)
            and other.rcode == "NXDOMAIN" and not other.answer and other.authority
            and all(rr[2] == "SOA" and rr[0] == _owner(zone) for rr in other.authority)):
        return None
    return other, other


def _when(shape: Shape) -> Normalize:
    """A BIND-class shape (a predicate on the pair) as a normalisation."""
    def normalize(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                  facts: ZoneFacts) -> Pair | None:
        return (other, other) if shape(qname, rdtype, native, other, facts) else None
    return normalize


def _extra_target_addresses(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                            facts: ZoneFacts) -> Pair | None:
    """Additional addresses of the answer's NS, MX or SRV targets that native BIND leaves
    out."""
    extra = other.additional - native.additional
    if extra and _only_addresses_of(extra, _targets(other.answer)):
        return native, replace(other, additional=other.additional - extra)
    return None


def _split_at_nul(name: str) -> str:
    """An owner as the lmdb backend gives it back: each label with a NUL octet split there,
    its parts in reverse order."""
    labels: list[bytes] = []
    for label in dns.name.from_text(name).labels:
        labels.extend(reversed(label.split(b"\0")) if b"\0" in label else [label])
    return dns.name.Name(labels).to_text().lower()


def _nul_label_split(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                     facts: ZoneFacts) -> Pair | None:
    """Native's owners as the lmdb backend spells back a NUL inside a label."""
    rrs = native.answer | native.authority | native.additional
    if not any("\\000" in rr[0] for rr in rrs):
        return None
    return replace(native, answer=_nul_split(native.answer),
                   authority=_nul_split(native.authority),
                   additional=_nul_split(native.additional)), other


def _nul_split(rrs: frozenset[Rr]) -> frozenset[Rr]:
    return frozenset((_split_at_nul(rr[0]), rr[1], rr[2], rr[3]) for rr in rrs)


_NAME_CASE = "names inside rdata come back in lower case, or spelled as the query name " \
             "they were compressed against (names compare case-insensitively)"
_MINIMAL = "positive answers carry no NS RRset in the authority section, nor the " \
           "additional addresses that would go with it"
_ANY_ONE = "ANY is answered with one RRset of the name, without authority section"
_NSEC_CNAME = "NSEC at a CNAME owner (an unsigned zone): the CNAME is followed; native " \
              "BIND answers NODATA"
_NSEC_REFERRAL = "NSEC at a delegation point of a signed zone: the referral (NS, DS or the " \
                 "NSEC proving none); native BIND answers the parent side's NSEC record"
_ROOT_GLUE = "the root zone's NS (or ANY) answer adds the NS target's addresses, which " \
             "native BIND 9.18 leaves out of its additional section"

OTHER_CLASSES: dict[str, ServerBehaviour] = {c.name: c for c in (
    ServerBehaviour(
        "nsd-rdata-name-case", _NAME_CASE,
        "NSD compresses names case-insensitively, so a name sharing a suffix with the query "
        "takes the query's spelling, and keeps one spelling per name in its domain table",
        _rdata_name_case),
    ServerBehaviour(
        "nsd-any-one-rrset", _ANY_ONE,
        "NSD answers ANY with a single RRset (RFC 8482) and adds no NS RRset to it",
        _any_one_rrset),
    ServerBehaviour(
        "nsd-nsec-at-cname", _NSEC_CNAME,
        "NSD treats NSEC in an unsigned zone as an absent type and follows the CNAME",
        _when(_nsec_at_cname)),
    ServerBehaviour(
        "nsd-cross-zone-chain",
        "a CNAME (here one synthesised from a DNAME) into another hosted zone is followed "
        "into it; native BIND stops at the zone boundary",
        "NSD follows a CNAME into any zone it serves, the root zone included, and answers "
        "from it (NXDOMAIN with the root's SOA)",
        _when(_cross_zone_chain)),
    ServerBehaviour(
        "nsd-root-glue", _ROOT_GLUE,
        "NSD adds the addresses of every NS target it holds; BIND's mechanism not traced",
        _extra_target_addresses),
    ServerBehaviour(
        "nsd-nsec-at-delegation", _NSEC_REFERRAL,
        "NSD refers an NSEC query at a zone cut to the child, as for a child-side type",
        _nsec_referral),
    ServerBehaviour(
        "knot-rdata-name-case", _NAME_CASE,
        "Knot loaders names in lower case when it loads a zone and compresses names "
        "case-insensitively against the query name",
        _rdata_name_case),
    ServerBehaviour(
        "knot-minimal-authority", _MINIMAL,
        "Knot DNS answers minimally: the authority section holds NS only for a referral",
        _minimal_authority),
    ServerBehaviour(
        "knot-any-one-rrset", _ANY_ONE,
        "Knot DNS answers ANY over UDP with a single RRset (RFC 8482)",
        _any_one_rrset),
    ServerBehaviour(
        "knot-root-glue", _ROOT_GLUE,
        "Knot adds the addresses of every NS target it holds; BIND's mechanism not traced",
        _extra_target_addresses),
    ServerBehaviour(
        "knot-rrsig-one-rrset",
        "RRSIG is answered with the signatures over one of the name's RRsets, without "
        "authority section; native BIND gives every signature at the name",
        "Knot DNS minimises a query for type RRSIG as it does ANY (seen on the signed "
        "coverage set; Knot's code not traced)",
        _rrsig_one_rrset),
    ServerBehaviour(
        "knot-nsec-at-delegation", _NSEC_REFERRAL,
        "Knot refers an NSEC query at a zone cut to the child, as for a child-side type",
        _nsec_referral),
    ServerBehaviour(
        "pdns-8bit-dns",
        "a query name with an octet outside letters, digits and -_*./@ \\: (e.g. ' \" % ( "
        "$ ; or binary) is answered SERVFAIL, whatever the data",
        "PowerDNS refuses such names unless 8bit-dns=yes (default no)",
        _servfail_8bit),
    ServerBehaviour(
        "pdns-rdata-name-case", _NAME_CASE,
        "PowerDNS compresses names case-insensitively, so the SOA of a negative answer "
        "takes the query name's spelling; the lmdb backend also keeps names inside rdata "
        "in lower case",
        _rdata_name_case),
    ServerBehaviour(
        "pdns-any-to-tcp",
        "ANY over UDP: an empty truncated response (the TCP answer is not compared)",
        "any-to-tcp=yes, PowerDNS's default, sends every ANY query to TCP",
        _any_to_tcp),
    ServerBehaviour(
        "pdns-minimal-authority", _MINIMAL,
        "PowerDNS 4 adds the NS RRset to the authority section of referrals only",
        _minimal_authority),
    ServerBehaviour(
        "pdns-dname-off",
        "a name below a DNAME: NXDOMAIN with the zone's SOA; native BIND synthesises the "
        "CNAME",
        "dname-processing=no, PowerDNS 4.7's default: a DNAME is served as data only",
        _dname_not_processed),
    ServerBehaviour(
        "pdns-lmdb-nul-label",
        "an owner name with a NUL octet inside a label comes back split there (nul\\000byte "
        "as byte.nul); seen in transfers, the queries themselves are pdns-8bit-dns",
        "the lmdb backend keys records by the name's labels reversed and joined with NUL "
        "octets, so a NUL inside a label reads back as a label boundary",
        _nul_label_split),
    ServerBehaviour(
        "pdns-root-glue", _ROOT_GLUE,
        "PowerDNS adds the addresses of every NS target it holds; BIND's mechanism not traced",
        _extra_target_addresses),
    ServerBehaviour(
        "pdns-nsec-at-cname", _NSEC_CNAME,
        "PowerDNS treats NSEC in an unsigned zone as an absent type and follows the CNAME",
        _when(_nsec_at_cname)),
)}

KNOWN_CLASSES: dict[str, BindClass | ServerBehaviour] = {**BIND_CLASSES, **OTHER_CLASSES}


# --- counting --------------------------------------------------------------------------------


@dataclass
class Comparison:
    """How one server's answers compare with native BIND's: identical, by class, or not."""

    driver: str
    total: int = 0
    identical: int = 0
    classes: dict[str, int] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)

    @property
    def driver_differences(self) -> int:
        return self.classes.get(DRIVER, 0)

    def add(self, cls: str | None, detail: str = "") -> None:
        """One answer: cls None when identical, a class name, or DRIVER with its detail."""
        self.total += 1
        if cls is None:
            self.identical += 1
            return
        self.classes[cls] = self.classes.get(cls, 0) + 1
        if cls == DRIVER and len(self.differences) < 200:
            self.differences.append(detail)

    def summary(self) -> str:
        extra = ", ".join(f"{n} {c}" for c, n in sorted(self.classes.items()) if c != DRIVER)
        line = f"{self.driver}: {self.identical}/{self.total} identical"
        if self.driver_differences:
            line += f", {self.driver_differences} DRIVER DIFFERENCES"
        return line + (f" (known classes: {extra})" if extra else "")


def detail(query: Query, diff: tuple[Answer, Answer] | None) -> str:
    """A difference as printed: the query, then the expected and the received answer."""
    if diff is None:
        return ""
    expected, got = diff
    return (f"{query[0]} {query[1]}\n    expected {expected.describe()}\n"
            f"    got      {got.describe()}")


# --- every server side by side ----------------------------------------------------------------

# The two references: native BIND, and the memory driver (a perfect DLZ module).
REFERENCE = (NATIVE, MEMORY)


def references_for(names: Iterable[str]) -> list[str]:
    """The servers a comparison of `names` needs besides them: native BIND, and the server
    each must answer exactly as (the memory driver for a DLZ driver)."""
    needed = [NATIVE, *(get_server(name).same_answers_as for name in names)]
    return [name for name in dict.fromkeys(needed) if name is not None]


def compare_servers(servers: Mapping[str, DnsServer], queries: Sequence[Query],
                    zones: Sequence[Zone], *, transfers: bool = True,
                    dnssec: bool = False) -> dict[str, Comparison]:
    """Every query (and every zone's transfer) against every server; a Comparison each.

    servers holds native BIND and the servers to judge. A server's differences from native
    BIND are classified by its own known classes (ServerKind), except for a server that
    must answer exactly as another (a DLZ driver: as the memory driver, BIND's DLZ path with
    a perfect driver, which is in `servers` too): any difference from that one is its own,
    and otherwise it is counted as that one's answer is (identical to native, or in a class).
    dnssec sets the DO bit on every query.
    """
    facts = ZoneFacts.of(zones)
    judged = {name: name for name in servers if name != NATIVE}
    followers = {name: leader for name in judged
                 if (leader := get_server(name).same_answers_as) not in (None, name)}
    leaders = [name for name in judged if name not in followers]
    results = {name: Comparison(name) for name in judged}
    for query in queries:
        native = ask(servers[NATIVE], query, dnssec)
        replies = {name: ask(servers[name], query, dnssec) for name in leaders}
        verdicts = {}
        for name in leaders:
            diff = compare_answers(query, native, replies[name])
            verdicts[name] = (None if diff is None else classify(
                query, *diff, facts, get_server(name).known_classes()), detail(query, diff))
            results[name].add(*verdicts[name])
        for name, leader in followers.items():
            _judge_driver(results[name], leader, query, verdicts[leader],
                          compare_answers(query, replies[leader],
                                          ask(servers[name], query, dnssec)))
    if transfers:
        for zone in zones:
            query = (zone.origin, "AXFR")
            native_rrs = transfer(servers[NATIVE], zone.origin)
            leader_rrs = {name: transfer(servers[name], zone.origin) for name in leaders}
            verdicts = {}
            for name in leaders:
                diff = _differs(native_rrs, leader_rrs[name])
                verdicts[name] = (None if diff is None else classify_transfer(
                    zone.origin, *diff, get_server(name).known_classes()), detail(query, diff))
                results[name].add(*verdicts[name])
            for name, leader in followers.items():
                _judge_driver(results[name], leader, query, verdicts[leader],
                              _differs(leader_rrs[leader], transfer(servers[name], zone.origin)))
    return results


def _judge_driver(result: Comparison, leader: str, query: Query,
                  leader_judged: tuple[str | None, str],
                  diff_from_leader: tuple[Answer, Answer] | None) -> None:
    """A driver that answered as its leader (the memory driver) did is judged as it was."""
    if diff_from_leader is None:
        result.add(*leader_judged)
    else:
        result.add(DRIVER, detail(query, diff_from_leader)
                   + f"\n    (expected: the {leader} driver's answer)")


def _differs(expected: Answer, got: Answer) -> tuple[Answer, Answer] | None:
    return None if expected == got else (expected, got)
