"""After RFC 2136 updates (`bench updates`): each server's answers for the changed names against
native BIND's, which got the same messages, and whether a zone is back as it began.

The servers apply the same messages but need not count the SOA serial alike: native BIND adds
one per update message, PowerDNS as its SOA-EDIT-DNSUPDATE says (INCREASE: the same), Knot
once per batch of the updates it had queued when it ran (so fewer under concurrent senders).
Answers are therefore compared with every SOA serial masked, and each server's serials are
kept beside the comparison; a difference that remains is classified by the server's known
classes like any other (bench/verify/compare.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import dns.exception
import dns.name
import dns.rcode

from bench.verify.answers import Answer, Rr, ask, complete, transfer
from bench.verify.bind_classes import ZoneFacts
from bench.verify.compare import Comparison, classify, detail
from servers import REFERENCE, DnsServer, get_server
from zonedata.derive import Query
from zonedata.model import Zone


def _masked_rr(rr: Rr) -> Rr:
    owner, ttl, rdtype, rdata = rr
    if rdtype != "SOA":
        return rr
    fields = rdata.split()
    fields[2] = "0"  # mname rname SERIAL refresh retry expire minimum
    return owner, ttl, rdtype, " ".join(fields)


def serial_masked(answer: Answer) -> Answer:
    """The answer with every SOA record's serial set to 0."""
    def mask(rrs: frozenset[Rr]) -> frozenset[Rr]:
        return frozenset(_masked_rr(rr) for rr in rrs)
    return replace(answer, answer=mask(answer.answer), authority=mask(answer.authority),
                   additional=mask(answer.additional))


def compare_with_native(servers: Mapping[str, DnsServer], queries: Sequence[Query],
                        zones: Sequence[Zone]) -> dict[str, Comparison]:
    """Every query asked of every server; each server's answer (SOA serials masked) against
    native BIND's, a difference classified by the server's known classes."""
    facts = ZoneFacts.of(zones)
    results = {name: Comparison(name) for name in servers if name != REFERENCE}
    for query in queries:
        native = serial_masked(complete(ask(servers[REFERENCE], query)))
        for name, result in results.items():
            got = serial_masked(complete(ask(servers[name], query)))
            if got == native:
                result.add(None)
                continue
            result.add(classify(query, native, got, facts, get_server(name).known_classes()),
                       detail(query, (native, got)))
    return results


def zone_state(server: DnsServer, zone: dns.name.Name) -> Answer:
    """The zone as a full transfer gives it, its SOA serial masked: what must be the same
    before adds and after the deletes that undo them."""
    return serial_masked(transfer(server, zone))


def soa_serial(server: DnsServer, zone: dns.name.Name) -> int | None:
    """The zone's SOA serial as the server answers it now (None: no SOA answered)."""
    try:
        response = server.query(zone, "SOA", tcp=True)
    except (dns.exception.DNSException, OSError, EOFError):
        return None
    for rrset in response.answer:
        for rdata in rrset:
            serial = getattr(rdata, "serial", None)
            if serial is not None:
                return int(serial)
    return None


def still_present(server: DnsServer, names: Sequence[dns.name.Name]) -> list[dns.name.Name]:
    """Those of `names` the server does not answer NXDOMAIN for (they should not exist)."""
    return [name for name in names if server.query(name, "A").rcode() != dns.rcode.NXDOMAIN]
