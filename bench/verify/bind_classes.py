"""BIND's own DLZ-path differences: what native BIND and a perfect DLZ driver answer
differently, each class with the exact shape it has (`BIND_CLASSES`) and the mechanism in
BIND 9.18's code that makes it. The package docstring says how they are used."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import dns.name

from bench.verify.answers import Answer, Rr, rr_owner
from servers import DLZ_PATH_CLASSES
from zonedata.model import Zone, empty_nonterminals


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


# (qname, qtype, native answer, DLZ answer, facts) -> whether the pair has a class's shape.
Shape = Callable[[dns.name.Name, str, Answer, Answer, ZoneFacts], bool]


def _is_referral(a: Answer, qname: dns.name.Name) -> bool:
    return (a.rcode == "NOERROR" and not a.aa and not a.answer and bool(a.authority)
            and all(rr[0] == rr_owner(qname) and rr[2] in ("NS", "DS") for rr in a.authority))


def _is_child_nodata(a: Answer, qname: dns.name.Name) -> bool:
    return (a.rcode == "NOERROR" and a.aa and not a.answer
            and all(rr[0] == rr_owner(qname) and rr[2] == "SOA" for rr in a.authority))


def _is_bare(a: Answer, rcode: str) -> bool:
    return a.rcode == rcode and not (a.aa or a.answer or a.authority or a.additional)


def _ds_parent_side(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
                    facts: ZoneFacts) -> bool:
    # A hosted child answers from its own side whether or not the parent still delegates to
    # it (an update may have deleted the delegation: native BIND then answers NXDOMAIN).
    return rdtype in ("DS", "NSEC") and (
        (qname in facts.delegations and _is_referral(dlz, qname))
        or (qname in facts.origins and _is_child_nodata(dlz, qname)))


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
    # Data beside the NS RRset (which the delegation hides from native BIND) comes with it.
    return (rdtype == "ANY" and qname in facts.delegations and _is_referral(native, qname)
            and dlz.rcode == "NOERROR" and not dlz.aa and not dlz.authority
            and not dlz.additional
            and {rr for rr in native.authority if rr[2] == "NS"} <= dlz.answer
            and all(rr[0] == rr_owner(qname) for rr in dlz.answer))


def _nsec_at_cname(qname: dns.name.Name, rdtype: str, native: Answer, dlz: Answer,
                   facts: ZoneFacts) -> bool:
    return (rdtype == "NSEC" and qname in facts.cnames and not native.answer
            and {rr[2] for rr in dlz.answer if rr[0] == rr_owner(qname)} == {"CNAME"})


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


def has_type(rrs: frozenset[Rr], *types: str) -> bool:
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
    return not a.answer and has_type(a.authority, "SOA")


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
    return (rdtype == "RRSIG" and has_type(native.answer, "RRSIG")
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
            and all(rr[0] == rr_owner(qname) and rr[2] == "RRSIG"
                    and rr[3].split()[0] in _PARENT_SIDE_SIGNED for rr in dlz.answer)
            and bool(dlz.authority)
            and all(rr[0] == rr_owner(apex) and rr[2] == "NS" for rr in dlz.authority)
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
        if native.aa or native.answer or not has_type(native.authority, "NS"):
            return False
        has_ds = has_type(native.authority, "DS")
        if has_ds != (proof == "DS"):
            return False
        return _equal_unsigned(native, dlz, authority=("RRSIG", "DS", *_DENIAL_TYPES))
    return shape


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
        "hosted too, the child's NODATA, also once the parent no longer delegates to it); "
        "native BIND answers from the parent side",
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
        "ANY at a delegation point: DLZ puts the NS RRset (and any data beside it, which the "
        "delegation hides) in the answer section, without AA and without glue; native BIND "
        "gives the referral",
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
