"""Other servers' known differences from native BIND: PowerDNS's, NSD's and Knot DNS's
(`OTHER_CLASSES`).

Another server's differences from native BIND are behaviours of that server, several of
which can meet in one answer (a positive answer without the authority NS RRset, whose
rdata names also come back in lower case). So each is a normalisation: it removes exactly
its own effect from a (native, other) pair when the pair has its shape, and a difference
belongs to the classes whose normalisations, applied in the server's order, make the two
answers equal ("knot-minimal-authority+knot-rdata-name-case"); anything left is UNEXPLAINED.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import dns.name

from bench.verify.answers import Answer, Rr, rr_owner
from bench.verify.bind_classes import BIND_CLASSES, Shape, ZoneFacts

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
    owner = rr_owner(qname)
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
            and all(rr[2] == "SOA" and rr[0] == rr_owner(zone) for rr in other.authority)):
        return None
    return other, other


def _soa_ttls_zeroed(rrs: frozenset[Rr]) -> frozenset[Rr]:
    """The SOA and the RRSIGs over it with TTL 0 (as native BIND's query_addsoa() sets both)."""
    return frozenset((rr[0], 0, rr[2], rr[3]) if _covered(rr) == "SOA" else rr for rr in rrs)


def _soa_nxdomain_ttl(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                      facts: ZoneFacts) -> Pair | None:
    """NXDOMAIN to an SOA query whose authority SOA (and its RRSIG) native BIND sent with TTL
    0: the other server's with its TTL set to 0."""
    soa = [rr for rr in native.authority if rr[2] == "SOA"]
    if not (rdtype == "SOA" and native.rcode == other.rcode == "NXDOMAIN" and soa
            and all(rr[1] == 0 for rr in native.authority if _covered(rr) == "SOA")):
        return None
    return native, replace(other, authority=_soa_ttls_zeroed(other.authority))


def _nsec_cname_followed(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                         facts: ZoneFacts) -> Pair | None:
    """NSEC at a CNAME owner answered with the CNAME (and what follows it), where native BIND
    answers NODATA (an unsigned zone) or the owner's own NSEC record (a signed one)."""
    owner = rr_owner(qname)
    if not (rdtype == "NSEC" and qname in facts.cnames
            and any(rr[0] == owner and rr[2] == "CNAME" for rr in other.answer)
            and all(rr[0] == owner and _covered(rr) == "NSEC" for rr in native.answer)):
        return None
    return other, other


def _rrsig_refused(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                   facts: ZoneFacts) -> Pair | None:
    """A query for type RRSIG answered REFUSED, nothing else."""
    if rdtype == "RRSIG" and other.rcode == "REFUSED" and not (
            other.answer or other.authority or other.additional):
        return other, other
    return None


def _stored_nsec_dropped(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                         facts: ZoneFacts) -> Pair | None:
    """No NSEC record served: a transfer without the zone's NSEC records (and their RRSIGs),
    and NSEC at a name that has one answered NODATA (the zone's SOA alone)."""
    if rdtype == "AXFR":
        return replace(native, answer=frozenset(
            rr for rr in native.answer if _covered(rr) != "NSEC")), other
    zone = facts.zone_of(qname)
    if not (rdtype == "NSEC" and zone is not None and native.answer
            and all(_covered(rr) == "NSEC" for rr in native.answer)
            and other.rcode == "NOERROR" and other.aa and not other.answer
            and other.authority and all(rr[0] == rr_owner(zone) and rr[2] == "SOA"
                                        for rr in other.authority)):
        return None
    return other, other


# What PowerDNS leaves out of a transfer of a zone it neither signs nor serves PRESIGNED.
_PDNS_UNSIGNED_AXFR_DROPS = frozenset({"RRSIG", "DNSKEY", "CDNSKEY", "CDS"})


def _axfr_unsigned(qname: dns.name.Name, rdtype: str, native: Answer, other: Answer,
                   facts: ZoneFacts) -> Pair | None:
    """A transfer without the zone's RRSIG and DNSKEY records."""
    if rdtype != "AXFR":
        return None
    return replace(native, answer=frozenset(
        rr for rr in native.answer if rr[2] not in _PDNS_UNSIGNED_AXFR_DROPS)), other


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
_SOA_NXDOMAIN = "NXDOMAIN to an SOA query (a name that does not exist): the authority SOA " \
                "has the TTL of any negative answer, the smaller of its TTL and MINIMUM; " \
                "native BIND sets it to 0 for an SOA query (query.c query_nxdomain(), " \
                "zone option zero-no-soa-ttl, default yes)"
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
        _when(BIND_CLASSES["nsec-at-cname"].matches)),
    ServerBehaviour(
        "nsd-cross-zone-chain",
        "a CNAME (here one synthesised from a DNAME) into another hosted zone is followed "
        "into it; native BIND stops at the zone boundary",
        "NSD follows a CNAME into any zone it serves, the root zone included, and answers "
        "from it (NXDOMAIN with the root's SOA)",
        _when(BIND_CLASSES["cross-zone-chain"].matches)),
    ServerBehaviour(
        "nsd-root-glue", _ROOT_GLUE,
        "NSD adds the addresses of every NS target it holds; BIND's mechanism not traced",
        _extra_target_addresses),
    ServerBehaviour(
        "nsd-soa-nxdomain-ttl", _SOA_NXDOMAIN,
        "NSD answers every negative answer with the zone's soa_nx_rrset, the SOA with its "
        "TTL lowered to MINIMUM when that is smaller (zonec.c apex_rrset_checks(), query.c "
        "answer_soa()); it has no SOA-query exception",
        _soa_nxdomain_ttl),
    ServerBehaviour(
        "nsd-nsec-at-delegation", _NSEC_REFERRAL,
        "NSD refers an NSEC query at a zone cut to the child, as for a child-side type",
        _nsec_referral),
    ServerBehaviour(
        "knot-rdata-name-case", _NAME_CASE,
        "Knot stores names in lower case when it loads a zone and compresses names "
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
        "knot-soa-nxdomain-ttl", _SOA_NXDOMAIN,
        "Knot puts the authority SOA of every negative answer with KNOT_PF_SOAMINTTL "
        "(nameserver/internet.c put_authority_soa()), written as MIN(MINIMUM, TTL) "
        "(libknot/packet/rrset-wire.c); it has no SOA-query exception",
        _soa_nxdomain_ttl),
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
        "pdns-soa-nxdomain-ttl", _SOA_NXDOMAIN,
        "PowerDNS gives every negative answer's SOA the TTL SOAData::getNegativeTTL(), "
        "min(TTL, MINIMUM) (packethandler.cc makeNXDomain(), dnsbackend.hh); it has no "
        "SOA-query exception",
        _soa_nxdomain_ttl),
    ServerBehaviour(
        "pdns-nsec-at-cname",
        "NSEC at a CNAME owner: the CNAME is followed; native BIND answers NODATA (an "
        "unsigned zone) or the owner's NSEC record (a signed one)",
        "PowerDNS answers NSEC ahead of a CNAME only from a zone it signs or serves "
        "PRESIGNED (packethandler.cc doQuestion(), the d_dnssec NSEC branch); otherwise NSEC "
        "is a type like any other and the CNAME is followed",
        _nsec_cname_followed),
    # PowerDNS over a signed zone's records as plain data (its stores set no PRESIGNED), asked
    # without the DO bit.
    ServerBehaviour(
        "pdns-nsec-at-delegation", _NSEC_REFERRAL,
        "PowerDNS tries a referral before looking at the name's records for every type but DS "
        "(packethandler.cc doQuestion(), tryReferral()); NSEC goes to its own chain only in "
        "a zone it signs or serves PRESIGNED",
        _nsec_referral),
    ServerBehaviour(
        "pdns-rrsig-refused",
        "a query for type RRSIG is answered REFUSED; native BIND gives the signatures at the "
        "name",
        "PowerDNS refuses every direct RRSIG query (packethandler.cc doQuestion(): \"Direct "
        "RRSIG query\", RCode::Refused)",
        _rrsig_refused),
    ServerBehaviour(
        "pdns-axfr-unsigned",
        "a zone transfer without the zone's RRSIG and DNSKEY records",
        "for a zone that is not PRESIGNED, PowerDNS skips stored RRSIG, DNSKEY, CDNSKEY and "
        "CDS records in a transfer (tcpreceiver.cc TCPNameserver::doAXFR(); it would add "
        "its own keys and signatures to a zone it signs)",
        _axfr_unsigned),
    ServerBehaviour(
        "pdns-bind-no-nsec",
        "no NSEC record is served: NSEC at a name that has one is answered NODATA, and a "
        "transfer lacks the NSEC records",
        "PowerDNS's bind backend drops NSEC, NSEC3 and NSEC3PARAM records when it reads a "
        "zone file (bindbackend2.cc Bind2Backend::parseZoneFile(): \"we synthesise NSECs on "
        "demand\")",
        _stored_nsec_dropped),
)}
