"""`updates`: RFC 2136 updates per second (bench/measure/updates.py, bench/load/update_sender.py).

The tiny command runs for real against native BIND, Knot and PowerDNS gpgsql: every cell
counts the records its messages committed, every answer NOERROR; afterwards each server's
answers for the changed names equal native BIND's (or fall in its known classes), an update
signed with a wrong key and one without a key are refused and add nothing, and every updated
zone is back as it began. A cell sent with a wrong key is counted as refused, with no rate.
The figures themselves are never asserted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import dns.name
import dns.rcode
import psycopg
import pytest

from base.errors import UserError
from base.update_access import TsigKey, UpdateAccess
from bench.commands.cli import build_parser
from bench.commands.updates import chosen_profile, chosen_servers
from bench.load import update_sender as sender
from bench.load.update_sender import PhaseResult, Signer
from bench.measure.results import load_results
from bench.measure.serving import loaded_store
from bench.measure.updates import (
    PROFILES,
    Repeat,
    Running,
    UpdateCell,
    Updates,
    run_repeat,
    set_figures,
)
from bench.verify.answers import Answer
from bench.verify.updated_answers import serial_masked
from loaders.pdns_rows import update_statements
from servers import get_server
from tests.benchcli import run_bench
from zonedata import generator

SERVERS = ["native", "knot", "pdns-gpgsql"]
TINY = PROFILES["tiny"]


@pytest.fixture(scope="module")
def tiny_run(run_root: Path) -> tuple[Updates, Path]:
    out = run_root / "out"
    done = run_bench(run_root, "updates", "--profile", "tiny", "--servers", ",".join(SERVERS),
                     "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    section = load_results(out).updates
    assert section is not None
    return section, out


def test_every_cell_commits_every_record(tiny_run: tuple[Updates, Path]) -> None:
    section, _ = tiny_run
    assert sorted(section.servers()) == sorted(SERVERS)
    assert len(section.cells) == len(SERVERS) * len(TINY.batch_sizes) * 2
    for cell in section.cells:
        assert cell.status == "ok", (cell.server, cell.batch, cell.tsig, cell.error,
                                     cell.outcomes())
        assert len(cell.repeats) == TINY.rounds
        for repeat in cell.repeats:
            for phase in (repeat.add, repeat.delete):
                assert phase.records == TINY.records
                assert phase.messages == -(-TINY.records // cell.batch)
                assert phase.outcomes == {"NOERROR": phase.messages}
            assert repeat.records_per_s is not None and repeat.records_per_s > 0
        assert cell.records_per_s is not None


def test_answers_refusals_and_zones_after_the_rounds(tiny_run: tuple[Updates, Path]) -> None:
    section, _ = tiny_run
    checks = {check.server: check for check in section.checks}
    assert sorted(checks) == sorted(SERVERS)
    for name, check in checks.items():
        assert check.status == "ok", (name, check.error)
        assert check.wrong_key in sender.REFUSALS, (name, check.wrong_key)
        assert check.no_key in sender.REFUSALS, (name, check.no_key)
        assert check.refused_left == []
        assert check.restored, name
        if name == "native":
            continue
        assert check.compared > 0
        assert check.unexplained == 0, check.differences
        assert check.identical + sum(check.classes.values()) == check.compared
        # Every server got the same messages in the rounds: its serial moved on.
        for before, after in check.serials.values():
            assert before is not None and after is not None and after > before


def test_the_report_has_the_tables_and_the_plot(tiny_run: tuple[Updates, Path]) -> None:
    _, out = tiny_run
    text = (out / "results.md").read_text()
    assert "## RFC 2136 dynamic updates" in text
    assert "### With TSIG" in text and "### Without TSIG" in text
    assert (out / "updates.png").stat().st_size > 0


@contextlib.contextmanager
def _knot_taking_updates(run_root: Path, access: UpdateAccess) -> Iterator[Running]:
    kind = get_server("knot")
    stream = lambda: generator.generate(3, 5, 1)  # noqa: E731
    with loaded_store(kind, stream, run_root / "wrong-key") as loaded:
        server = kind.build_updatable(loaded.target, run_root / "wrong-key" / "knot", access,
                                      threads=1, connections=1)
        with server:
            yield Running(kind, server, loaded, access.keyed_zones[0], Signer(access.key))


def test_a_wrong_key_is_counted_as_refused_not_as_a_rate(run_root: Path) -> None:
    zones = [zone.origin for zone in generator.generate(3, 5, 1)]
    access = UpdateAccess((), (zones[1],), TsigKey.generate())
    profile = PROFILES["tiny"]
    with _knot_taking_updates(run_root, access) as running:
        repeat = run_repeat(running, 10, profile, 0, Signer(access.key.wrong_secret()))
        assert running.server.query(sender.added_name(zones[1], 0), "A").rcode() == \
            dns.rcode.NXDOMAIN
    assert not repeat.ok and repeat.records_per_s is None
    assert repeat.add.refused == repeat.add.messages
    section = Updates("m", "tiny", "d", 1, profile.records, [10], "", "", 1,
                      cells=[UpdateCell("knot", 10, True, status="refused", repeats=[repeat])])
    set_figures(section)
    assert section.cells[0].records_per_s is None


@pytest.mark.check
def test_a_repeat_with_any_other_answer_has_no_rate() -> None:
    good = PhaseResult(10, 100, 0.5, 0.01, {"NOERROR": 10})
    bad = PhaseResult(10, 100, 0.5, 0.01, {"NOERROR": 9, "SERVFAIL": 1})
    assert Repeat(0, good, good).records_per_s == 200  # 200 records in 1 s
    assert Repeat(0, good, good).messages_per_s == 20
    assert Repeat(0, good, bad).records_per_s is None
    assert bad.committed == 0 and good.committed == 100


@pytest.mark.check
def test_messages_add_and_delete_the_same_records() -> None:
    zone = dns.name.from_text("example.")
    plan = sender.batches(25, 10)
    assert [len(b) for b in plan] == [10, 10, 5]
    added = sender.add_message(zone, plan[0], Signer())
    deleted = sender.delete_message(zone, plan[0], Signer())
    assert [rrset.name for rrset in added.update] == [rrset.name for rrset in deleted.update]
    assert {str(rd) for rrset in added.update for rd in rrset} == \
        {str(rd) for rrset in deleted.update for rd in rrset}
    assert added.keyring is None
    assert sender.add_message(zone, [1], Signer(TsigKey.generate())).keyring is not None


@pytest.mark.check
def test_soa_serials_are_masked_and_nothing_else() -> None:
    soa = ("example.", 300, "SOA", "ns. host. 2024010105 3600 900 604800 300")
    a = ("x.example.", 300, "A", "10.0.0.1")
    answer = Answer("NXDOMAIN", True, False, frozenset({a}), frozenset({soa}), frozenset())
    masked = serial_masked(answer)
    assert masked.answer == frozenset({a})
    assert masked.authority == frozenset({("example.", 300, "SOA",
                                           "ns. host. 0 3600 900 604800 300")})


@pytest.mark.check
def test_pdns_rows_give_the_key_and_each_zones_metadata() -> None:
    open_zone, keyed = dns.name.from_text("a.test."), dns.name.from_text("b.test.")
    statements = update_statements("k", "hmac-sha256", "c2VjcmV0", [open_zone], [keyed])
    params = [p for _, p in statements]
    assert ("k", "hmac-sha256", "c2VjcmV0") in params
    assert ("SOA-EDIT-DNSUPDATE", "INCREASE", "a.test") in params
    assert ("TSIG-ALLOW-DNSUPDATE", "k", "b.test") in params
    assert ("TSIG-ALLOW-DNSUPDATE", "k", "a.test") not in params


@pytest.mark.check
def test_profile_and_server_choices_are_checked() -> None:
    parser = build_parser()
    args = parser.parse_args(["updates", "--profile", "tiny", "--batches", "1,5",
                              "--names", "20"])
    profile = chosen_profile(args)
    assert profile.batch_sizes == (1, 5) and profile.records == 20
    with pytest.raises(UserError, match="at least 1"):
        chosen_profile(parser.parse_args(["updates", "--batches", "0"]))
    with pytest.raises(UserError, match="--senders"):
        chosen_profile(parser.parse_args(["updates", "--senders", "0"]))
    with pytest.raises(UserError, match="takes no dynamic updates"):
        chosen_servers("nsd")
    assert chosen_servers("knot")[0].name == "native"


def test_updating_powerdns_may_change_records_only(run_root: Path) -> None:
    """The account an updating gpgsql connects as (dlz_writer) changes records, and may not
    change the zones, the key or the metadata."""
    kind = get_server("pdns-gpgsql")
    stream = lambda: generator.generate(3, 5, 1)  # noqa: E731
    zones = [zone.origin for zone in stream()]
    access = UpdateAccess((), (zones[1],), TsigKey.generate())
    with loaded_store(kind, stream, run_root / "pdns-writer") as loaded:
        settings = kind.loader().pdns_update_settings(loaded.target, access)
        target = loaded.target
        conninfo = (f"host={settings['gpgsql-host']} port={settings['gpgsql-port']} "
                    f"dbname={settings['gpgsql-dbname']} user={settings['gpgsql-user']} "
                    f"password={settings['gpgsql-password']}")
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("DELETE FROM records WHERE name = 'none.example'")
            for statement in ("INSERT INTO domains (name, type) VALUES ('x.test', 'NATIVE')",
                              "DELETE FROM tsigkeys", "DELETE FROM domainmetadata"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement)
        with kind.loader().database.connect(target) as conn:
            keys = conn.execute("SELECT name FROM tsigkeys").fetchall()
    assert keys == [(access.key.bare_name,)]
