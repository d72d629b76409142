"""Which class a difference belongs to (`classify`), and every server's answers to the same
queries judged side by side (`compare_servers`), counted per server (`Comparison`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import dns.name

from bench.verify.answers import Answer, Reply, SharedQuery, compare_answers, transfer
from bench.verify.bind_classes import (
    BIND_CLASSES,
    UNSIGNED_PATH_CLASSES,
    BindClass,
    ZoneFacts,
    has_type,
    merged_rrsig_ttls,
    without_dnssec_material,
)
from bench.verify.other_classes import OTHER_CLASSES, ServerBehaviour
from servers import (
    DLZ_CEILING,
    DLZ_PATH_CLASSES,
    DLZ_SIGNED_PATH_CLASSES,
    REFERENCE,
    DnsServer,
    get_server,
)
from zonedata.derive import Query
from zonedata.model import Zone

# The class of a difference no known class explains: the server's own, a wrong answer.
UNEXPLAINED = "unexplained"


# --- classifying -----------------------------------------------------------------------------

# Every known class by the name a server lists it under (ServerKind.known_classes()).
KNOWN_CLASSES: dict[str, BindClass | ServerBehaviour] = {**BIND_CLASSES, **OTHER_CLASSES}

# A DLZ driver's known classes (DlzNamed.known_classes()), the default of the two below.
DLZ_CLASSES = (*DLZ_PATH_CLASSES, *DLZ_SIGNED_PATH_CLASSES)


def classify(query: Query, native: Answer, other: Answer, facts: ZoneFacts,
             classes: Iterable[str] = DLZ_CLASSES) -> str:
    """The known class(es) a difference from native BIND belongs to, else UNEXPLAINED.

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
    return UNEXPLAINED


def classify_transfer(zone: dns.name.Name, native: Answer, other: Answer,
                      classes: Iterable[str] = DLZ_CLASSES) -> str:
    """A zone transfer's difference: the root zone's (DLZ refuses it), a signed zone's RRSIGs
    at one name sharing the lowest TTL (DLZ), and another server's behaviours."""
    classes = list(classes)
    refused = other.rcode != "NOERROR" and not other.answer
    if "root-zone" in classes and zone == dns.name.root and refused:
        return "root-zone"
    if "rrsig-ttl" in classes and has_type(native.answer, "RRSIG") and replace(
            native, answer=merged_rrsig_ttls(native.answer)) == other:
        return "rrsig-ttl"
    return classify((zone, "AXFR"), native, other, ZoneFacts.of(()), [
        name for name in classes if isinstance(KNOWN_CLASSES[name], ServerBehaviour)])


# --- counting --------------------------------------------------------------------------------


@dataclass
class Comparison:
    """How one server's answers compare with native BIND's: identical, by class, or not."""

    server: str
    total: int = 0
    identical: int = 0
    classes: dict[str, int] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)

    @property
    def unexplained(self) -> int:
        return self.classes.get(UNEXPLAINED, 0)

    def add(self, cls: str | None, detail: str = "") -> None:
        """One answer: cls None when identical, a class name, or UNEXPLAINED with its detail."""
        self.total += 1
        if cls is None:
            self.identical += 1
            return
        self.classes[cls] = self.classes.get(cls, 0) + 1
        if cls == UNEXPLAINED and len(self.differences) < 200:
            self.differences.append(detail)

    def summary(self) -> str:
        extra = ", ".join(f"{n} {c}" for c, n in sorted(self.classes.items()) if c != UNEXPLAINED)
        line = f"{self.server}: {self.identical}/{self.total} identical"
        if self.unexplained:
            line += f", {self.unexplained} UNEXPLAINED DIFFERENCES"
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
REFERENCE_SERVERS = (REFERENCE, DLZ_CEILING)


def references_for(names: Iterable[str]) -> list[str]:
    """The servers a comparison of `names` needs besides them: native BIND, and the server
    each must answer exactly as (the memory driver for a DLZ driver)."""
    needed = [REFERENCE, *(get_server(name).same_answers_as for name in names)]
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
    judged = {name: name for name in servers if name != REFERENCE}
    followers = {name: leader for name in judged
                 if (leader := get_server(name).same_answers_as) not in (None, name)}
    leaders = [name for name in judged if name not in followers]
    results = {name: Comparison(name) for name in judged}
    with ThreadPoolExecutor(max_workers=len(servers)) as pool:
        for query in queries:
            replies = _ask_all(pool, servers, query, dnssec)
            verdicts = {}
            for name in leaders:
                diff = compare_answers(query, replies[REFERENCE], replies[name])
                verdicts[name] = (None if diff is None else classify(
                    query, *diff, facts, get_server(name).known_classes()), detail(query, diff))
                results[name].add(*verdicts[name])
            for name, leader in followers.items():
                _judge_follower(results[name], leader, query, verdicts[leader],
                                compare_answers(query, replies[leader], replies[name]))
    if transfers:
        for zone in zones:
            query = (zone.origin, "AXFR")
            native_rrs = transfer(servers[REFERENCE], zone.origin)
            leader_rrs = {name: transfer(servers[name], zone.origin) for name in leaders}
            verdicts = {}
            for name in leaders:
                diff = _differs(native_rrs, leader_rrs[name])
                verdicts[name] = (None if diff is None else classify_transfer(
                    zone.origin, *diff, get_server(name).known_classes()), detail(query, diff))
                results[name].add(*verdicts[name])
            for name, leader in followers.items():
                _judge_follower(results[name], leader, query, verdicts[leader],
                                _differs(leader_rrs[leader], transfer(servers[name], zone.origin)))
    return results


def _ask_all(pool: ThreadPoolExecutor, servers: Mapping[str, DnsServer], query: Query,
             dnssec: bool) -> dict[str, Reply]:
    """The query asked of every server at once, each server still one query at a time and in
    the same order: the client waits on the servers together instead of in turn. Measured on
    the signed coverage set through native BIND, the memory driver and 9 DLZ drivers (2 vCPUs,
    tests/test_signed.py): 84 s -> 48 s with the DO bit, 77 s -> 40 s without. The servers
    share the query's message and each distinct reply's one parse (SharedQuery): the
    signed comparisons 30 s -> 21 s with DO, 28 s -> 16 s without."""
    shared = SharedQuery(query, dnssec)
    asked = {name: pool.submit(shared.ask, server) for name, server in servers.items()}
    return {name: reply.result() for name, reply in asked.items()}


def _judge_follower(result: Comparison, leader: str, query: Query,
                    leader_judged: tuple[str | None, str],
                    diff_from_leader: tuple[Answer, Answer] | None) -> None:
    """A server that answered as its leader (a DLZ driver's: the memory driver) did is judged
    as the leader was."""
    if diff_from_leader is None:
        result.add(*leader_judged)
    else:
        result.add(UNEXPLAINED, detail(query, diff_from_leader)
                   + f"\n    (expected: {leader}'s answer)")


def _differs(expected: Answer, got: Answer) -> tuple[Answer, Answer] | None:
    return None if expected == got else (expected, got)
