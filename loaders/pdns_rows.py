"""The model as PowerDNS's generic SQL rows (the Debian package's schema: domains, records),
shared by the pdns_pg and pdns_mysql loaders.

PowerDNS looks a name up by its own text form (DNSName::toString: lower case, no final dot,
`.` and `\\` escaped with a backslash, octets outside 0x21-0x7e as \\DDD, the root as `.`),
so the rows hold names in exactly that form. MX and SRV keep their preference in the prio
column, without it in the content; every other content is the model's presentation text,
which PowerDNS parses as a zone file's. Records at or under a delegation are not
authoritative (auth false), as `pdnsutil rectify-zone` would mark them, and each empty
non-terminal has a row of type NULL so that PowerDNS answers it NODATA, not NXDOMAIN.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path

import dns.name

from base.errors import UserError
from loaders.sql import Layout, SqlSession
from zonedata.model import Record, Zone, empty_nonterminals

PG_SCHEMA = Path("/usr/share/pdns-backend-pgsql/schema/schema.pgsql.sql")
MYSQL_SCHEMA = Path("/usr/share/pdns-backend-mysql/schema/schema.mysql.sql")
TABLES = ("domains", "records")

# Types whose first rdata field PowerDNS keeps in the prio column.
_PRIO_TYPES = frozenset({"MX", "SRV"})

# One records row without its domain id: name, type (None: an empty non-terminal), content,
# ttl, prio, auth.
PdnsRow = tuple[str, str | None, str | None, int | None, int, bool]


def pdns_name(name: dns.name.Name) -> str:
    """PowerDNS's text for a name, as its SQL backends store and look it up."""
    if name == dns.name.root:
        return "."
    return ".".join(_label(label) for label in name.labels if label)


def _label(label: bytes) -> str:
    out = []
    for octet in label.lower():
        if octet in b".\\":
            out.append("\\" + chr(octet))
        elif 0x20 < octet < 0x7F:
            out.append(chr(octet))
        else:
            out.append(f"\\{octet:03d}")
    return "".join(out)


def zone_rows(zone: Zone) -> Iterator[PdnsRow]:
    """The zone's records as rows, then one row per empty non-terminal."""
    cuts = {r.owner for r in zone.records if r.rdtype == "NS" and r.owner != zone.origin}
    for record in zone.records:
        prio, content = _split_prio(record)
        yield (pdns_name(record.owner), record.rdtype, content, record.ttl, prio,
               _authoritative(record.owner, record.rdtype, cuts))
    for name in empty_nonterminals(zone):
        yield pdns_name(name), None, None, None, 0, _authoritative(name, "", cuts)


def _split_prio(record: Record) -> tuple[int, str]:
    if record.rdtype not in _PRIO_TYPES:
        return 0, record.rdata
    prio, content = record.rdata.split(" ", 1)
    return int(prio), content


def _authoritative(owner: dns.name.Name, rdtype: str, cuts: set[dns.name.Name]) -> bool:
    """False at a delegation (but its DS) and under it: glue and occluded data."""
    if owner in cuts:
        return rdtype == "DS"
    return not any(owner.is_subdomain(cut) for cut in cuts)


# Read-back: zone name, then a record's name, type, content, ttl, prio (None for a zone
# without records), ordered by zone.
ReadBackRow = tuple[str, str | None, str | None, str | None, int | None, int | None]

READ_BACK = """
SELECT d.name, r.name, r.type, r.content, r.ttl, r.prio
  FROM domains d LEFT JOIN records r ON r.domain_id = d.id AND r.type IS NOT NULL
 ORDER BY d.id
"""


def zones_from_rows(rows: Iterable[ReadBackRow]) -> Iterator[Zone]:
    """Read-back rows, grouped by zone (ordered so), back into the model's Zones."""
    for zone_name, group in itertools.groupby(rows, key=lambda row: row[0]):
        records = [Record(_from_pdns(owner), ttl, rdtype,
                          f"{prio} {content}" if rdtype in _PRIO_TYPES else content)
                   for _, owner, rdtype, content, ttl, prio in group
                   if owner is not None and rdtype is not None and content is not None
                   and ttl is not None]
        yield Zone(_from_pdns(zone_name), records)


def _from_pdns(text: str) -> dns.name.Name:
    return dns.name.root if text == "." else dns.name.from_text(text)


# --- record-level writes (loaders/sql.py's SqlWriter) -----------------------------------------

# PowerDNS's layout: rows of type NULL are the markers of empty non-terminals; a record's data
# is its content column (MX's and SRV's first field in prio).
LAYOUT = Layout(
    zone_id="SELECT id FROM domains WHERE name = %s",
    record_rows="SELECT type, content FROM records WHERE domain_id = %s AND name = %s "
                "AND type IS NOT NULL",
    marker_rows="SELECT 1 FROM records WHERE domain_id = %s AND name = %s AND type IS NULL",
    below="SELECT 1 FROM records WHERE domain_id = %s AND RIGHT(name, LENGTH(%s)) = %s "
          "LIMIT 1",
    add_marker="INSERT INTO records (domain_id, name, type, content, ttl, prio, auth) "
               "VALUES (%s, %s, NULL, NULL, NULL, 0, %s)",
    drop_marker="DELETE FROM records WHERE domain_id = %s AND name = %s AND type IS NULL",
    drop_record="DELETE FROM records WHERE domain_id = %s AND name = %s AND type = %s "
                "AND content = %s",
    drop_zone=("DELETE FROM records WHERE domain_id = %s", "DELETE FROM domains WHERE id = %s"),
    spell=pdns_name, data=lambda record: _split_prio(record)[1])

_INSERT = ("INSERT INTO records (domain_id, name, type, content, ttl, prio, auth) "
           "VALUES (%s, %s, %s, %s, %s, %s, %s)")


def insert_record(session: SqlSession, domain_id: int, record: Record) -> None:
    """A record's row, authoritative unless a delegation above it makes it glue."""
    if record.rdtype == "NS" and _apex(session, domain_id) != record.owner:
        raise UserError(f"{record.owner} NS: a delegation written as rows would need the auth "
                        "column of every name below it set again (pdnsutil rectify-zone): "
                        "not taken")
    prio, content = _split_prio(record)
    auth = _authoritative(record.owner, record.rdtype, _cuts_above(session, domain_id,
                                                                   record.owner))
    session.run(_INSERT, (domain_id, pdns_name(record.owner), record.rdtype, content,
                          record.ttl, prio, auth))


def marker_values(session: SqlSession, domain_id: int, name: dns.name.Name) -> tuple:
    """A marker's auth: false under a delegation, as rectify-zone marks it."""
    return (_authoritative(name, "", _cuts_above(session, domain_id, name)),)


def _apex(session: SqlSession, domain_id: int) -> dns.name.Name:
    rows, _ = session.run("SELECT name FROM domains WHERE id = %s", (domain_id,))
    return _from_pdns(rows[0][0])


def _cuts_above(session: SqlSession, domain_id: int, owner: dns.name.Name) -> set[dns.name.Name]:
    """The delegations (NS below the apex) at owner or above it."""
    apex = _apex(session, domain_id)
    chain = []
    name = owner
    while name != apex and len(name) > len(apex):
        chain.append(name)
        name = name.parent()
    if not chain:
        return set()
    rows, _ = session.run("SELECT name FROM records WHERE domain_id = %s AND type = 'NS' AND "
                          f"name IN ({', '.join(['%s'] * len(chain))})",
                          (domain_id, *(pdns_name(n) for n in chain)))
    return {_from_pdns(name) for (name,) in rows}


# --- taking RFC 2136 updates (`bench updates`) -------------------------------------------------

# How PowerDNS 4.7 changes an updated zone's SOA serial (SOA-EDIT-DNSUPDATE domain metadata):
# INCREASE adds one per update message that changed the zone, as native BIND does
# (serial-update-method increment, its default). Without the metadata PowerDNS uses DEFAULT,
# which moves a serial below today's YYYYMMDD01 up to it (rfc2136handler.cc, increaseSerial).
SOA_EDIT_DNSUPDATE = "INCREASE"

# (statement, parameters): parameters in %s style, which psycopg and MySQLdb both take.
Statement = tuple[str, tuple[object, ...]]


def update_statements(key_name: str, algorithm: str, secret: str,
                      open_zones: Iterable[dns.name.Name],
                      keyed_zones: Iterable[dns.name.Name]) -> list[Statement]:
    """The rows that let PowerDNS take updates: the TSIG key (tsigkeys), and per updated zone
    its serial policy and, for a keyed zone, the key it requires (TSIG-ALLOW-DNSUPDATE; an
    unsigned or otherwise signed update is then REFUSED). Written anew each time."""
    kinds = ("TSIG-ALLOW-DNSUPDATE", "SOA-EDIT-DNSUPDATE")
    statements: list[Statement] = [
        ("DELETE FROM tsigkeys WHERE name = %s", (key_name,)),
        ("INSERT INTO tsigkeys (name, algorithm, secret) VALUES (%s, %s, %s)",
         (key_name, algorithm, secret))]
    zones = [(zone, False) for zone in open_zones] + [(zone, True) for zone in keyed_zones]
    for zone, keyed in zones:
        domain = "(SELECT id FROM domains WHERE name = %s)"
        name = pdns_name(zone)
        statements.append((f"DELETE FROM domainmetadata WHERE domain_id = {domain} "
                           "AND kind IN (%s, %s)", (name, *kinds)))
        metadata = [("SOA-EDIT-DNSUPDATE", SOA_EDIT_DNSUPDATE)]
        if keyed:
            metadata.append(("TSIG-ALLOW-DNSUPDATE", key_name))
        for kind, content in metadata:
            statements.append(("INSERT INTO domainmetadata (domain_id, kind, content) "
                               "SELECT id, %s, %s FROM domains WHERE name = %s",
                               (kind, content, name)))
    return statements
