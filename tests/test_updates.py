"""RFC 2136 dynamic updates through the DLZ update path, against native BIND.

Native BIND and every writable DLZ driver load the coverage zones and take updates to cov.test
under one UpdatePolicy (servers/updates.py: the key granted every name of the zone, a second
key named knows but grants nothing). Every update message goes to all of them, and then:
  - the names it changed answer as native BIND's do (bench.verify's comparison: a difference
    is allowed only in one of BIND's own DLZ-path classes), the SOA serial included;
  - a failed prerequisite (YXDOMAIN, YXRRSET, NXRRSET, NXDOMAIN) and a refused update (no key,
    a key not granted, an unknown key, a name outside the zone) answer the RCODE native BIND
    answers, and change nothing;
  - a record added two labels below a missing name makes the names between exist (NODATA),
    and deleting it makes them go again, as in native BIND;
  - a store failure in the middle of an update rolls all of it back (SERVFAIL), and an update
    while the store is down is SERVFAIL, nothing half-written.
A writable driver is one row of WRITABLE (and of STORE_FAULTS and STORE_DOWN, how to make its
store fail one write, and fail altogether). bdbhpt's private mode takes no updates, and says so.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.tsig
import dns.update
import pytest

from base.errors import UserError
from base.paths import REPO_ROOT
from base.updates import TsigKey
from bench.measure.serving import LoadedStore, loaded_store
from bench.verify.answers import Answer, ask, compare_answers, complete, transfer
from bench.verify.bind_classes import ZoneFacts
from bench.verify.compare import DRIVER, classify, classify_transfer, detail
from loaders.bdbhpt import read_mode
from servers import get_server
from servers.dlz import DlzNamed, stack_frames_of
from servers.named import Named, asan_environment, valgrind_errors, valgrind_wrapper
from servers.updates import UpdatePolicy
from zonedata.derive import Query
from zonedata.generator import COVERAGE_ORIGIN, coverage_zones
from zonedata.model import Zone, make_record, name_key

ZONE = COVERAGE_ORIGIN
KEY = TsigKey.generate("dlzbench-update")
OTHER_KEY = TsigKey.generate("dlzbench-other")  # known to named, granted nothing
UNKNOWN_KEY = TsigKey.generate("dlzbench-unknown")  # not known to named
POLICY = UpdatePolicy((ZONE,), KEY, (OTHER_KEY,))
# DLZ drivers whose store takes updates.
WRITABLE = ["pg", "memory", "mysql", "bdbhpt-t", "bdbhpt-c"]
THREADS = 2


def _name(relative: str) -> dns.name.Name:
    return dns.name.from_text(relative, ZONE)


@dataclass
class Servers:
    zones: list[Zone]
    stores: dict[str, LoadedStore]
    named: dict[str, Named]


@pytest.fixture(scope="module")
def servers(run_dir: Path) -> Iterator[Servers]:
    zones = coverage_zones()
    with ExitStack() as stack:
        stores, named = {}, {}
        for name in ["native", *WRITABLE]:
            kind = dataclasses.replace(get_server(name), updates=POLICY,
                                       **_server_options(name, run_dir))
            stores[name] = stack.enter_context(
                loaded_store(kind, lambda: iter(zones), run_dir / name))
            named[name] = stack.enter_context(stores[name].named(run_dir / name,
                                                                 threads=THREADS))
        yield Servers(zones, stores, named)


MEMORY_SWITCHES = "memory-switches"


def _server_options(name: str, run_dir: Path) -> dict[str, dict[str, str]]:
    """The memory driver's switches for failing on demand (loaders/memory.py)."""
    if name != "memory":
        return {}
    switches = run_dir / MEMORY_SWITCHES
    switches.mkdir(parents=True, exist_ok=True)
    return {"options": {"outage_file": str(switches / "outage"),
                        "refuse_file": str(switches / "refuse")}}


# --- sending ----------------------------------------------------------------------------------


def update(key: TsigKey | None = KEY, zone: dns.name.Name = ZONE) -> dns.update.UpdateMessage:
    if key is None:
        return dns.update.UpdateMessage(zone)
    return dns.update.UpdateMessage(zone, keyring=key.keyring(),
                                    keyname=dns.name.from_text(key.name))


def send(named: Named, message: dns.message.Message, tcp: bool = True) -> str:
    """The response's RCODE; a TSIG error of the response by its exception's name."""
    how = dns.query.tcp if tcp else dns.query.udp
    try:
        response = how(message, named.host, port=named.port, timeout=10)
    except dns.tsig.PeerError as exc:
        return type(exc).__name__
    return dns.rcode.to_text(response.rcode())


def send_all(servers: Servers, make: Callable[[], dns.message.Message], tcp: bool = True
             ) -> dict[str, str]:
    """The same update (a new message each, signed afresh) to every server: their RCODEs."""
    return {name: send(named, make(), tcp) for name, named in servers.named.items()}


def same_rcodes(rcodes: dict[str, str], expected: str) -> None:
    assert rcodes["native"] == expected, rcodes
    assert all(rcode == rcodes["native"] for rcode in rcodes.values()), rcodes


# --- comparing --------------------------------------------------------------------------------


def answers_differ(servers: Servers, driver: str, queries: list[Query]) -> list[str]:
    """The queries the driver answers otherwise than native BIND, beyond BIND's own DLZ-path
    classes (as `bench verify` judges them)."""
    facts = ZoneFacts.of(servers.zones)
    classes = get_server(driver).known_classes()
    wrong = []
    for query in queries:
        diff = compare_answers(query, ask(servers.named["native"], query),
                               ask(servers.named[driver], query))
        if diff is not None and classify(query, *diff, facts, classes) == DRIVER:
            wrong.append(detail(query, diff))
    return wrong


def assert_as_native(servers: Servers, queries: list[Query]) -> None:
    for driver in WRITABLE:
        wrong = answers_differ(servers, driver, queries)
        assert not wrong, f"{driver}:\n" + "\n".join(wrong)


def answer(named: Named, name: dns.name.Name, rdtype: str) -> Answer:
    return complete(ask(named, (name, rdtype)))


def serials(servers: Servers) -> dict[str, int]:
    out = {}
    for name, named in servers.named.items():
        soa = [rr for rr in answer(named, ZONE, "SOA").answer if rr[2] == "SOA"]
        assert len(soa) == 1, (name, soa)
        out[name] = int(soa[0][3].split()[2])
    return out


@contextmanager
def changes_nothing(servers: Servers, probes: list[Query]) -> Iterator[None]:
    """The block leaves the probes' answers and every SOA serial as they were."""
    before = {name: [answer(n, *q) for q in probes] for name, n in servers.named.items()}
    serial = serials(servers)
    yield
    assert serials(servers) == serial
    for name, named in servers.named.items():
        assert [answer(named, *q) for q in probes] == before[name], name


SENTINEL = _name("sentinel")


def with_sentinel(message: dns.update.UpdateMessage) -> dns.update.UpdateMessage:
    """The message adds a record that must not exist after it failed."""
    message.add(SENTINEL, 300, "TXT", '"must not be written"')
    return message


# --- a successful update ----------------------------------------------------------------------

CHANGED = ["new", "www", "mail", "sip", "sshfp", "loc", "caa", "quoted", "@"]
CHANGED_TYPES = ["A", "AAAA", "TXT", "SSHFP", "LOC", "CAA", "MX", "SOA"]


def add_change_delete() -> dns.message.Message:
    m = update()
    m.add(_name("new"), 300, "A", "192.0.2.150")
    m.add(_name("www"), 300, "TXT", '"added by an update"')
    m.replace(_name("mail"), 1800, "A", "192.0.2.27")  # change: delete the RRset, add
    m.delete(_name("sip"))  # every RRset of the name: NXDOMAIN after
    m.delete(_name("www"), "A", "192.0.2.81")  # one RR
    m.delete(_name("sshfp"), "SSHFP", "1 1 123456789ABCDEF67890123456789ABCDEF67890")
    m.delete(_name("loc"), "LOC")  # an RRset, which named deletes RR by RR
    m.delete(_name("caa"))
    m.add(_name("quoted"), 60, "TXT", r'"semi;colon" "q\"uote" "back\\slash" "\200"')
    m.add(ZONE, 300, "TXT", '"apex, added"')
    return m


def test_add_change_delete_answer_as_native(servers: Servers) -> None:
    before = serials(servers)
    same_rcodes(send_all(servers, add_change_delete), "NOERROR")
    after = serials(servers)
    assert after["native"] == before["native"] + 1, (before, after)
    assert after == {name: after["native"] for name in after}, after
    assert_as_native(servers, [(_name(n) if n != "@" else ZONE, t)
                               for n in CHANGED for t in CHANGED_TYPES])
    for driver in WRITABLE:
        wrong = transfer_differs(servers, driver)
        assert wrong is None, f"{driver}: {wrong}"


def transfer_differs(servers: Servers, driver: str) -> str | None:
    native = transfer(servers.named["native"], ZONE)
    other = transfer(servers.named[driver], ZONE)
    if native == other:
        return None
    classes = get_server(driver).known_classes()
    diff = (native, other)
    return None if classify_transfer(ZONE, *diff, classes) != DRIVER else \
        detail((ZONE, "AXFR"), diff)


def stored_zones(loaded: LoadedStore) -> list[Zone] | None:
    """What the store holds now, as its loader reads it: for bdbhpt the home of the server's
    mode, the only one its updates change (schemas/bdb.md); None for memory, whose updates
    stay in named and never reach its file (schemas/memory.md)."""
    if loaded.loader.name == "memory":
        return None
    if loaded.loader.name == "bdbhpt":
        return read_mode(loaded.target, loaded.server.options["mode"])
    return list(loaded.loader.read_back(loaded.target))


def test_records_are_stored_as_the_loaders_write_them(servers: Servers) -> None:
    """What an update wrote reads back in the loaders' form (zonedata.model.from_rdata)."""
    same_rcodes(send_all(servers, _stored_form_update), "NOERROR")
    expected = {(name_key(r.owner), r.ttl, r.rdtype, r.rdata) for r in STORED_FORM}
    for driver in WRITABLE:
        zones = stored_zones(servers.stores[driver])
        if zones is None:
            continue
        zone = next(z for z in zones if z.origin == ZONE)
        assert expected <= set(zone.canonical()), driver


STORED_FORM = [
    make_record(_name("form"), 300, "TXT", r'"a;b" "q\"x" "\200\001" "it' + "'" + 's"'),
    make_record(_name("form"), 300, "SSHFP", "1 2 " + "AB" * 32),
    # A target sharing no suffix with the zone: dnspython compresses it to nothing, so the
    # case on the wire is this one (a compressed suffix takes the zone name's spelling).
    make_record(_name("form"), 300, "MX", "10 Mail.Example.Net."),
    make_record(_name("form"), 300, "AAAA", "2001:DB8:0:0:0:0:0:1"),
    make_record(_name("form"), 300, "CAA", '0 issue "ca.example.net; x=1"'),
]


def _stored_form_update() -> dns.message.Message:
    m = update()
    for r in STORED_FORM:
        m.add(r.owner, r.ttl, r.rdtype, r.rdata)
    return m


def test_a_lookup_right_after_the_update_sees_it(servers: Servers) -> None:
    """No memo of the driver serves data older than a committed update, the apex (which
    named reads through the update zone without asking findzonedb) included."""
    for i in range(5):
        for driver in WRITABLE:
            answer(servers.named[driver], ZONE, "TXT")  # a memo of the apex's rows
        value = f'"round {i}"'
        same_rcodes(send_all(servers, lambda v=value: _add_apex_txt(v)), "NOERROR")
        for driver in WRITABLE:
            txts = {rr[3] for rr in answer(servers.named[driver], ZONE, "TXT").answer}
            assert value in txts, (driver, txts)


def _add_apex_txt(value: str) -> dns.message.Message:
    m = update()
    m.add(ZONE, 300, "TXT", value)
    return m


# --- empty non-terminals ---------------------------------------------------------------------


ENT_QUERIES = [(_name(n), t) for n in ["x.y.newent", "y.newent", "newent", "q.p", "p",
                                       "a.b.c", "b.c", "c"] for t in ["TXT", "A"]]


def _ent_adds() -> dns.message.Message:
    m = update()
    m.add(_name("x.y.newent"), 300, "TXT", '"two labels below a missing name"')
    m.add(_name("p"), 300, "TXT", '"p"')
    m.add(_name("q.p"), 300, "TXT", '"q.p"')
    return m


def _ent_deletes() -> dns.message.Message:
    m = update()
    m.delete(_name("p"))  # p keeps q.p below it: NODATA
    m.delete(_name("x.y.newent"))  # the last name below newent: all three go
    m.delete(_name("a.b.c"))  # the coverage zone's two ENTs go with it
    return m


def _ent_last_delete() -> dns.message.Message:
    m = update()
    m.delete(_name("q.p"))
    return m


def test_empty_non_terminals_follow_adds_and_deletes(servers: Servers) -> None:
    same_rcodes(send_all(servers, _ent_adds), "NOERROR")
    for name in ["y.newent", "newent"]:
        got = answer(servers.named["native"], _name(name), "TXT")
        assert got.rcode == "NOERROR" and not got.answer, (name, got.describe())
    assert_as_native(servers, ENT_QUERIES)

    same_rcodes(send_all(servers, _ent_deletes), "NOERROR")
    assert answer(servers.named["native"], _name("p"), "TXT").rcode == "NOERROR"
    for name in ["y.newent", "newent", "b.c", "c"]:
        assert answer(servers.named["native"], _name(name), "TXT").rcode == "NXDOMAIN", name
    assert_as_native(servers, ENT_QUERIES)

    same_rcodes(send_all(servers, _ent_last_delete), "NOERROR")
    assert answer(servers.named["native"], _name("p"), "TXT").rcode == "NXDOMAIN"
    assert_as_native(servers, ENT_QUERIES)


# --- updates that change nothing -------------------------------------------------------------

PROBES = [(SENTINEL, "TXT"), (_name("www"), "A"), (_name("txt2"), "TXT")]


def _prereq(kind: str) -> dns.message.Message:
    m = update()
    if kind == "YXDOMAIN":
        m.absent(_name("www"))  # name not in use
    elif kind == "YXRRSET":
        m.absent(_name("www"), "A")  # RRset does not exist
    elif kind == "NXRRSET":
        m.present(_name("www"), "MX")  # RRset exists (value independent)
    elif kind == "NXRRSET-value":
        m.present(_name("www"), "A", "192.0.2.99")  # RRset exists (value dependent)
    elif kind == "NXDOMAIN":
        m.present(_name("no-such-name"))  # name in use
    m.delete(_name("txt2"))
    return with_sentinel(m)


@pytest.mark.parametrize("kind", ["YXDOMAIN", "YXRRSET", "NXRRSET", "NXRRSET-value",
                                  "NXDOMAIN"])
def test_a_failed_prerequisite_changes_nothing(servers: Servers, kind: str) -> None:
    with changes_nothing(servers, PROBES):
        same_rcodes(send_all(servers, lambda: _prereq(kind)), kind.split("-")[0])


def _signed_by(key: TsigKey | None) -> Callable[[], dns.message.Message]:
    def make() -> dns.message.Message:
        m = update(key)
        m.delete(_name("txt2"))
        return with_sentinel(m)
    return make


def _outside_the_zone() -> dns.message.Message:
    m = update()
    m.add(dns.name.from_text("outside.example.net."), 300, "A", "192.0.2.1")
    return with_sentinel(m)


@pytest.mark.parametrize(("case", "make", "tcp", "expected"), [
    ("unsigned over TCP", _signed_by(None), True, "REFUSED"),
    ("unsigned over UDP", _signed_by(None), False, "REFUSED"),
    ("a key not granted", _signed_by(OTHER_KEY), True, "REFUSED"),
    ("a key named does not know", _signed_by(UNKNOWN_KEY), True, "PeerBadKey"),
    ("a name outside the zone", _outside_the_zone, True, "NOTZONE"),
])
def test_a_refused_update_changes_nothing(servers: Servers, case: str,
                                          make: Callable[[], dns.message.Message], tcp: bool,
                                          expected: str) -> None:
    with changes_nothing(servers, PROBES):
        same_rcodes(send_all(servers, make, tcp), expected)


# --- store failures ----------------------------------------------------------------------------

FAIL_TEXT = '"the store refuses this row"'


@contextmanager
def _pg_refuses_a_row(loaded: LoadedStore) -> Iterator[None]:
    """A trigger makes PostgreSQL refuse to insert a record with FAIL_TEXT (an error of the
    store in the middle of the update's transaction)."""
    with loaded.loader.database.connect(loaded.target) as conn:
        conn.execute(f"""
            CREATE FUNCTION dlzbench_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.data = '{FAIL_TEXT}' THEN RAISE EXCEPTION 'refused by the test'; END IF;
                RETURN NEW;
            END $$""")
        conn.execute("CREATE TRIGGER dlzbench_refuse BEFORE INSERT ON records "
                     "FOR EACH ROW EXECUTE FUNCTION dlzbench_refuse()")
        conn.commit()
    try:
        yield
    finally:
        with loaded.loader.database.connect(loaded.target) as conn:
            conn.execute("DROP TRIGGER dlzbench_refuse ON records")
            conn.execute("DROP FUNCTION dlzbench_refuse()")
            conn.commit()


@contextmanager
def _mysql_refuses_a_row(loaded: LoadedStore) -> Iterator[None]:
    """A trigger makes MariaDB refuse to insert a record with FAIL_TEXT."""
    def run(statement: str) -> None:
        conn = loaded.loader.database.connect(loaded.target)
        try:
            conn.cursor().execute(statement)
        finally:
            conn.close()

    run("CREATE TRIGGER dlzbench_refuse BEFORE INSERT ON records FOR EACH ROW "
        f"IF NEW.data = '{FAIL_TEXT}' THEN SIGNAL SQLSTATE '45000' "
        "SET MESSAGE_TEXT = 'refused by the test'; END IF")
    try:
        yield
    finally:
        run("DROP TRIGGER dlzbench_refuse")


@contextmanager
def _memory_refuses_a_row(loaded: LoadedStore) -> Iterator[None]:
    """The memory driver's refuse_file names FAIL_TEXT."""
    refuse = Path(loaded.server.options["refuse_file"])
    refuse.write_text(FAIL_TEXT + "\n")
    try:
        yield
    finally:
        refuse.unlink()


# A transaction of another process that holds the write lock of the zone's owner list (of its
# live generation) in the transactional home until stdin closes: an update that adds a name
# waits for it (lock_timeout_ms) after its first writes, and fails.
HOLD_OWNER_LIST = """
import sys
from berkeleydb import db
from loaders.bdbhpt import DATA_FILE, ENV_FLAGS
env = db.DBEnv()
env.open(sys.argv[1], ENV_FLAGS["transactional"], 0o644)
zones, lists = db.DB(env), db.DB(env)
zones.open(DATA_FILE, "dns_zone", db.DB_UNKNOWN, db.DB_AUTO_COMMIT)
lists.open(DATA_FILE, "dns_xfr", db.DB_UNKNOWN, db.DB_AUTO_COMMIT)
txn = env.txn_begin()
gen = zones.get(sys.argv[2].encode(), txn=txn)
lists.put(gen, lists.get(gen, txn=txn, flags=db.DB_RMW), txn=txn)
print("holding", flush=True)
sys.stdin.read()
txn.abort()
"""


@contextmanager
def _holding(script: str, loaded: LoadedStore) -> Iterator[None]:
    """script run in a process of its own on the transactional home, until the block ends."""
    home = Path(loaded.target) / "transactional"
    holder = subprocess.Popen([sys.executable, "-c", script, str(home), name_key(ZONE)],
                              cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        yield
    finally:
        holder.communicate("")


# How each writable driver's store is made to fail one write of an update. None for bdbhpt-c:
# a concurrent data store has no lock time-out, so another writer's lock makes an update wait
# rather than fail, and its update writes a copy nobody reads before the commit's one put.
STORE_FAULTS = {"pg": _pg_refuses_a_row, "mysql": _mysql_refuses_a_row,
                "memory": _memory_refuses_a_row,
                "bdbhpt-t": lambda loaded: _holding(HOLD_OWNER_LIST, loaded)}


@pytest.mark.parametrize("driver", [d for d in WRITABLE if d in STORE_FAULTS])
def test_a_store_error_mid_update_rolls_all_of_it_back(servers: Servers, driver: str) -> None:
    named = servers.named[driver]

    def failing() -> dns.message.Message:
        m = with_sentinel(update())  # written first, then rolled back
        m.delete(_name("txt2"))
        m.add(_name("refused"), 300, "TXT", FAIL_TEXT)
        return m

    log_start = named.log_path.stat().st_size
    with changes_nothing(servers, PROBES):
        with STORE_FAULTS[driver](servers.stores[driver]):
            assert send(named, failing()) == "SERVFAIL"
    same_rcodes(send_all(servers, lambda: _add_apex_txt('"after the failure"')), "NOERROR")
    # Both said, though a moment apart: the store's reason and the rollback it caused (errors
    # are rate-limited per kind of message, not one a second for the whole driver).
    log = named.log_path.read_bytes()[log_start:].decode(errors="replace")
    lines = [line for line in log.splitlines() if f"dlz_{named_driver(driver)}:" in line]
    assert any("the update is rolled back" in line for line in lines), lines
    if driver in ("pg", "mysql"):
        assert any("refused by the test" in line for line in lines), lines


def named_driver(server: str) -> str:
    """The name the server's driver logs under (dlz_<name>: ...)."""
    kind = get_server(server)
    assert isinstance(kind, DlzNamed), server
    return kind.library_file.parent.name


def _until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


@contextmanager
def _server_stopped(loaded: LoadedStore) -> Iterator[None]:
    loaded.target.stop()
    try:
        yield
    finally:
        loaded.target.start()


@contextmanager
def _memory_outage(loaded: LoadedStore) -> Iterator[None]:
    """The memory driver's outage_file exists: every call fails, as with a database down."""
    outage = Path(loaded.server.options["outage_file"])
    outage.touch()
    try:
        yield
    finally:
        outage.unlink()


# A transaction of another process that holds the write lock of the zone's dns_zone entry in
# the transactional home until stdin closes: every read of the zone waits (lock_timeout_ms)
# and fails, as with a writer stuck inside its transaction.
HOLD_ZONE = """
import sys
from berkeleydb import db
from loaders.bdbhpt import DATA_FILE, ENV_FLAGS
env = db.DBEnv()
env.open(sys.argv[1], ENV_FLAGS["transactional"], 0o644)
zones = db.DB(env)
zones.open(DATA_FILE, "dns_zone", db.DB_UNKNOWN, db.DB_AUTO_COMMIT)
txn = env.txn_begin()
key = sys.argv[2].encode()
zones.put(key, zones.get(key, txn=txn, flags=db.DB_RMW), txn=txn)
print("holding", flush=True)
sys.stdin.read()
txn.abort()
"""


# How each writable driver's store is made unavailable for a while.
STORE_DOWN = {"pg": _server_stopped, "mysql": _server_stopped, "memory": _memory_outage,
              "bdbhpt-t": lambda loaded: _holding(HOLD_ZONE, loaded)}


@pytest.mark.parametrize("driver", [d for d in WRITABLE if d in STORE_DOWN])
def test_an_update_while_the_store_is_down_is_servfail(servers: Servers, driver: str) -> None:
    loaded, named = servers.stores[driver], servers.named[driver]
    before = answer(named, SENTINEL, "TXT")
    with STORE_DOWN[driver](loaded):
        # Additions only: named checks a deletion of a whole name (a meta type) against the
        # policy by reading the name first, and answers a failed read there REFUSED itself
        # (ns/update.c: "rejected by secure update"), before the update reaches the driver.
        assert send(named, with_sentinel(update())) == "SERVFAIL"
    assert _until(lambda: answer(named, SENTINEL, "TXT").rcode != "SERVFAIL", 30)
    assert answer(named, SENTINEL, "TXT") == before
    # The update connection the outage broke is replaced: the next update goes through.
    same_rcodes(send_all(servers, lambda: _add_apex_txt('"after the outage"')), "NOERROR")


# --- a store that cannot take updates while named serves -------------------------------------


def test_bdbhpt_private_mode_refuses_updates(servers: Servers, run_dir: Path) -> None:
    """A private Berkeley DB environment has no locking: asking for updates is a one-line
    error before anything starts, and the driver itself refuses update_zones at start-up."""
    private = dataclasses.replace(get_server("bdbhpt-p"), updates=POLICY)
    target = servers.stores["bdbhpt-t"].target  # the loader wrote every mode's home
    with pytest.raises(UserError, match="private mode takes no updates"):
        private.client_env(target)
    body = get_server("bdbhpt-p").body(target, 1, extra=POLICY.dlz_args())
    named = Named(run_dir / "named-bdbhpt-p-updates", POLICY.key_statements() + body)
    with pytest.raises(Exception, match="named"):
        with named:
            pass
    assert "mode=private takes no updates" in named.log_path.read_text(errors="replace")


# --- unsigned updates (the benchmark's rows without TSIG) --------------------------------------

UNSIGNED_POLICY = UpdatePolicy((ZONE,), KEY, unsigned=True)


def _unsigned_add() -> dns.message.Message:
    m = update(None)
    m.add(_name("unsigned"), 300, "TXT", '"no key"')
    m.replace(_name("www"), 300, "A", "192.0.2.77")
    return m


@pytest.mark.parametrize("driver", WRITABLE)
def test_unsigned_updates_over_tcp_when_granted(run_dir: Path, driver: str) -> None:
    """update_unsigned=yes against native BIND's allow-update { any; }: an unsigned update
    over TCP is taken by both and answers alike; over UDP named refuses it for the DLZ zone
    before the driver is asked (a zone with an update policy), where native takes it."""
    zones = coverage_zones()
    named = {}
    with ExitStack() as stack:
        for name in ["native", driver]:
            kind = dataclasses.replace(get_server(name), updates=UNSIGNED_POLICY)
            loaded = stack.enter_context(loaded_store(kind, lambda: iter(zones),
                                                      run_dir / f"unsigned-{name}"))
            named[name] = stack.enter_context(loaded.named(run_dir / f"unsigned-{name}",
                                                           threads=1))
        pair = Servers(zones, {}, named)
        same_rcodes(send_all(pair, _unsigned_add), "NOERROR")
        wrong = answers_differ(pair, driver, [(_name("unsigned"), "TXT"), (_name("www"), "A"),
                                              (ZONE, "SOA")])
        assert not wrong, "\n".join(wrong)
        assert send(named[driver], _unsigned_add(), tcp=False) == "REFUSED"


# --- memory checking ---------------------------------------------------------------------------

VALGRIND_SUPPRESSIONS = Path(__file__).parent / "data" / "valgrind.supp"
# As in test_drivers.py: libasan preloaded into a libpq client deadlocks in glibc's locale locks.
ASAN_IMPOSSIBLE = {"pg": "libasan preloaded into a libpq client deadlocks; pg is checked under "
                         "Valgrind"}
# Driver arguments for a named many times slower under Valgrind: the pg driver's connect
# deadline of 1 s was passed on this loaded machine (mysql has the same deadline).
VALGRIND_ARGS = {driver: {"connect_timeout_ms": "20000", "query_timeout_ms": "20000"}
                 for driver in ("pg", "mysql")}


def _valgrind_updates() -> list[tuple[dns.message.Message, str]]:
    """Updates through every path of update.c: adds with new ENTs, a change, deletes that
    settle markers, a failed prerequisite, a refused key, an RR named cannot take."""
    adds, change, deletes = update(), update(), update()
    adds.add(_name("v.w.vg"), 300, "TXT", '"valgrind"')
    adds.add(_name("vg"), 300, "SSHFP", "1 1 " + "AB" * 20)
    change.replace(_name("www"), 300, "A", "192.0.2.88")
    deletes.delete(_name("v.w.vg"))
    deletes.delete(_name("vg"), "SSHFP", "1 1 " + "AB" * 20)
    deletes.delete(_name("loc"), "LOC")
    failed = update()
    failed.present(_name("no-such-name"))
    failed.add(SENTINEL, 300, "TXT", '"x"')
    return [(adds, "NOERROR"), (change, "NOERROR"), (deletes, "NOERROR"),
            (failed, "NXDOMAIN"), (_signed_by(OTHER_KEY)(), "REFUSED")]


@pytest.mark.slow
@pytest.mark.parametrize("driver", WRITABLE)
def test_valgrind_finds_nothing_in_the_update_path(run_dir: Path, driver: str) -> None:
    """named under Valgrind takes updates through the driver (its own store, so that the
    comparisons above are left alone); any memcheck error in our code fails the test."""
    if not Path("/usr/bin/valgrind").exists():
        pytest.skip("valgrind is not installed")
    kind = dataclasses.replace(get_server(driver), updates=POLICY)
    assert isinstance(kind, DlzNamed)
    report = run_dir / f"valgrind-updates-{driver}.log"
    with loaded_store(kind, lambda: iter(coverage_zones()), run_dir / f"vg-{driver}") as loaded:
        body = kind.body(loaded.target, 1, extra=VALGRIND_ARGS.get(driver, {}))
        with Named(run_dir / f"vg-{driver}" / "named", body, env=kind.client_env(loaded.target),
                   wrapper=valgrind_wrapper(report, [VALGRIND_SUPPRESSIONS])) as named:
            for message, expected in _valgrind_updates():
                assert send(named, message) == expected
            assert answer(named, _name("www"), "A").rcode == "NOERROR"
            assert answer(named, _name("w.vg"), "TXT").rcode == "NXDOMAIN"
    log = report.read_text(errors="replace")
    assert "ERROR SUMMARY" in log
    found = valgrind_errors(log, stack_frames_of(kind.library_file))
    assert not found, "\n\n".join(found[:3])


@pytest.fixture(scope="module")
def asan_built() -> None:
    done = subprocess.run(["make", "-s", f"-j{os.cpu_count() or 1}", "-C",
                           str(REPO_ROOT / "drivers"), "asan"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("driver", WRITABLE)
def test_asan_build_takes_updates(run_dir: Path, request: pytest.FixtureRequest,
                                  driver: str) -> None:
    """named loads the driver's AddressSanitizer build (libasan preloaded) and takes the same
    updates; any ASan report fails the test."""
    if driver in ASAN_IMPOSSIBLE:
        pytest.skip(ASAN_IMPOSSIBLE[driver])
    request.getfixturevalue("asan_built")  # compiled only for a driver that needs it
    kind = dataclasses.replace(get_server(driver), updates=POLICY)
    assert isinstance(kind, DlzNamed)
    asan = REPO_ROOT / "build" / "asan" / kind.library_file.parent.name / kind.library_file.name
    asan_dir = run_dir / f"asan-{driver}"
    asan_dir.mkdir(exist_ok=True)
    with loaded_store(kind, lambda: iter(coverage_zones()), asan_dir / "store") as loaded:
        body = kind.body(loaded.target, THREADS, library=asan)
        env = {**asan_environment(asan_dir), **kind.client_env(loaded.target)}
        with Named(asan_dir / "named", body, threads=THREADS, env=env) as named:
            for message, expected in _valgrind_updates():
                assert send(named, message) == expected
            log = named.log_path
    reports = sorted(asan_dir.glob("asan*"))
    assert not reports, reports[0].read_text(errors="replace")[:4000]
    assert "AddressSanitizer" not in log.read_text(errors="replace")
