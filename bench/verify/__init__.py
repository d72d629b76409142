"""Ask native BIND and every other server the same queries; compare the answers.

This is the one comparison engine: `python3 -m bench verify`, the runner's answer check and
the driver tests all use it. Its modules, each importing only those above it:
  answers.py        a response reduced to what is compared (`Answer`), asked of a server
                    (`ask`) and made complete (`complete`);
  bind_classes.py   BIND's own DLZ-path differences (`BIND_CLASSES`) and the facts about the
                    data set their shapes use (`ZoneFacts`);
  other_classes.py  PowerDNS's, NSD's and Knot DNS's known differences (`OTHER_CLASSES`);
  compare.py        the class a difference belongs to (`classify`), and every server's
                    answers side by side (`compare_servers`);
  updated_answers.py  the answers after RFC 2136 updates against native BIND's, SOA serials
                    masked (`compare_with_native`).
The queries asked come from the zones themselves (zonedata/derive.py).

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
records. Such a transport-size artifact must not count as an unexplained difference, while a
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
it has exactly the shape the class describes (`BIND_CLASSES`); every other difference is
unexplained, the server's own. DLZ drivers are then compared with the memory driver, which
must match them exactly.
"""

