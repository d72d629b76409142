"""Zone files: origin rules, parse errors, the round trip, and BIND accepting what we write."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import dns.name
import pytest

from base.errors import UserError
from zonedata.generator import coverage_zones
from zonedata.model import Zone, canonical_set, make_record, name_key
from zonedata.zonefiles import (
    read_zone_dir,
    read_zone_file,
    write_zone_dir,
    write_zone_file,
    zone_file_name,
    zone_files,
)

SOA = "ns1.example.org. hostmaster.example.org. 1 3600 900 604800 300"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def only_zone(directory: Path) -> Zone:
    zones = list(read_zone_dir(directory))
    assert len(zones) == 1
    return zones[0]


def named_checkzone() -> str:
    found = shutil.which("named-checkzone") or "/usr/sbin/named-checkzone"
    assert Path(found).exists(), "named-checkzone (bind9-utils) is not installed"
    return found


# --- origin rules --------------------------------------------------------------------------


@pytest.mark.check
def test_origin_from_origin_directive_wins_over_file_name(tmp_path):
    write(tmp_path / "other-name.zone",
          f"$ORIGIN example.org.\n$TTL 300\n@ SOA {SOA}\n@ NS ns1\nns1 A 192.0.2.1\n")
    zone = only_zone(tmp_path)
    assert zone.origin == dns.name.from_text("example.org.")
    assert ("ns1.example.org", 300, "A", "192.0.2.1") in zone.canonical()


@pytest.mark.check
def test_origin_from_absolute_soa_owner(tmp_path):
    # A later $ORIGIN names a sub-tree; the zone is still the SOA owner's.
    write(tmp_path / "whatever.db",
          f"$TTL 60\nexample.net. SOA {SOA}\nexample.net. NS ns1.example.org.\n"
          "www A 192.0.2.2\n$ORIGIN sub.example.net.\nhost A 192.0.2.3\n")
    zone = only_zone(tmp_path)
    assert zone.origin == dns.name.from_text("example.net.")
    keys = {row[0] for row in zone.canonical()}
    assert {"www.example.net", "host.sub.example.net"} <= keys


@pytest.mark.check
@pytest.mark.parametrize("file_name", ["example.com.zone", "example.com.db", "example.com"])
def test_origin_from_file_name_when_soa_owner_is_relative(tmp_path, file_name):
    write(tmp_path / file_name, f"$TTL 60\n@ SOA {SOA}\n@ NS ns1\nns1 A 192.0.2.1\n")
    assert only_zone(tmp_path).origin == dns.name.from_text("example.com.")


@pytest.mark.check
def test_root_zone_loads_with_origin_dot(tmp_path):
    write(tmp_path / "root.zone",
          ". 86400 IN SOA a.root-servers.net. nstld.verisign-grs.com. 1 1800 900 604800 86400\n"
          ". 518400 IN NS a.root-servers.net.\n"
          "a.root-servers.net. 518400 IN A 198.41.0.4\n"
          "org. 172800 IN NS a0.org.afilias-nst.info.\n")
    zone = only_zone(tmp_path)
    assert zone.origin == dns.name.root
    assert zone.key == "."
    assert ("org", 172800, "NS", "a0.org.afilias-nst.info.") in zone.canonical()


@pytest.mark.check
def test_relative_rdata_names_become_absolute(tmp_path):
    write(tmp_path / "example.org.zone",
          f"$ORIGIN example.org.\n$TTL 300\n@ SOA {SOA}\n@ NS ns1\n@ MX 10 mail\n"
          "ns1 A 192.0.2.1\nmail A 192.0.2.2\nwww CNAME ns1\n")
    canonical = only_zone(tmp_path).canonical()
    assert ("www.example.org", 300, "CNAME", "ns1.example.org.") in canonical
    assert ("example.org", 300, "MX", "10 mail.example.org.") in canonical
    assert ("example.org", 300, "NS", "ns1.example.org.") in canonical


@pytest.mark.check
def test_ttl_defaults_follow_dnspython(tmp_path):
    # No $TTL: records without a TTL take the SOA minimum (RFC 1035 / pre-RFC 2308 behaviour).
    write(tmp_path / "a.test.zone", "$ORIGIN a.test.\n@ 3600 SOA ns hm 1 2 3 4 77\n@ NS ns\n"
                                    "ns A 192.0.2.1\n")
    write(tmp_path / "b.test.zone", "$ORIGIN b.test.\n$TTL 42\n@ 3600 SOA ns hm 1 2 3 4 77\n"
                                    "@ NS ns\nns 5 A 192.0.2.1\n")
    zones = {z.key: dict((r.rdtype, r.ttl) for r in z.records) for z in read_zone_dir(tmp_path)}
    assert zones["a.test"] == {"SOA": 3600, "NS": 77, "A": 77}
    assert zones["b.test"] == {"SOA": 3600, "NS": 42, "A": 5}


# --- errors --------------------------------------------------------------------------------


@pytest.mark.check
def test_parse_error_names_file_and_line(tmp_path):
    bad = write(tmp_path / "bad" / "example.zone",
                f"$ORIGIN example.\n$TTL 300\n; comment\n@ SOA {SOA}\n@ NS ns\n"
                "ns A 192.0.2.1\nwww AAA 192.0.2.2\n")
    with pytest.raises(UserError) as caught:
        list(read_zone_dir(tmp_path))
    message = str(caught.value)
    assert message.startswith(f"{bad}:7:")
    assert "unknown rdatatype 'AAA'" in message
    assert "\n" not in message


@pytest.mark.check
def test_bad_rdata_names_file_and_line(tmp_path):
    bad = write(tmp_path / "example.zone",
                f"$ORIGIN example.\n$TTL 300\n@ SOA {SOA}\n@ NS ns\nns A 192.0.2.300\n")
    with pytest.raises(UserError, match=rf"^{bad}:5: "):
        read_zone_file(bad)


@pytest.mark.check
def test_missing_soa_is_reported_with_file(tmp_path):
    bad = write(tmp_path / "nosoa.test.zone", "$ORIGIN nosoa.test.\n$TTL 300\n@ NS ns\n"
                                              "ns A 192.0.2.1\n")
    with pytest.raises(UserError, match=rf"^{bad}: no SOA"):
        read_zone_file(bad)


@pytest.mark.check
def test_missing_and_empty_directories_fail_at_once(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        read_zone_dir(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    write(tmp_path / "empty" / "queries.txt", "www.example. A\n")
    with pytest.raises(UserError, match="holds no zone files"):
        read_zone_dir(tmp_path / "empty")


# --- writing -------------------------------------------------------------------------------


@pytest.mark.check
@pytest.mark.parametrize("shard", [1, 7, 1000])
def test_coverage_round_trip(tmp_path, shard):
    zones = coverage_zones()
    assert write_zone_dir(zones, tmp_path, shard=shard) == len(zones)
    assert canonical_set(read_zone_dir(tmp_path)) == canonical_set(zones)


@pytest.mark.check
def test_file_names_are_safe_and_unique():
    zones = coverage_zones()
    names = [zone_file_name(z.key) for z in zones]
    assert len(set(names)) == len(names)
    assert zone_file_name(".") == "%2E.zone"
    for name in names:
        assert "/" not in name and "\\" not in name and not name.startswith(".")
        assert name.isascii() and name.isprintable()
    long_key = name_key(dns.name.Name([b"\\" * 60, b"\x00" * 60, b"x" * 60, b"y" * 60, b""]))
    assert len(zone_file_name(long_key)) < 255
    assert zone_file_name(long_key) != zone_file_name(long_key[:-1] + "z")


@pytest.mark.check
def test_rewriting_a_zone_replaces_its_file(tmp_path):
    origin = dns.name.from_text("swap.test.")
    old = Zone(origin, [make_record(origin, 60, "SOA", "ns.swap.test. hm.swap.test. 1 2 3 4 5"),
                        make_record(origin, 60, "NS", "ns.swap.test."),
                        make_record(dns.name.from_text("ns.swap.test."), 60, "A", "192.0.2.1")])
    new = Zone(origin, [*old.records[:2],
                        make_record(dns.name.from_text("ns.swap.test."), 60, "A", "192.0.2.2")])
    write_zone_dir([old], tmp_path)
    write_zone_dir([new], tmp_path)
    assert len(list(zone_files(tmp_path))) == 1
    assert canonical_set(read_zone_dir(tmp_path)) == canonical_set([new])


def test_bind_accepts_every_coverage_zone_file(tmp_path):
    checkzone = named_checkzone()
    for zone in coverage_zones():
        path = tmp_path / zone_file_name(zone.key)
        write_zone_file(zone, path)
        done = subprocess.run([checkzone, "-i", "none", "-k", "ignore", "-n", "ignore",
                               zone.origin.to_text(), str(path)],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{zone.origin}: {done.stdout}{done.stderr}"
        assert "loaded serial" in done.stdout


def test_bind_reads_the_same_records_back(tmp_path):
    """named-checkzone's canonical dump of each file, re-read by dnspython, equals the model."""
    checkzone = named_checkzone()
    for zone in coverage_zones():
        path = tmp_path / zone_file_name(zone.key)
        write_zone_file(zone, path)
        dumped = tmp_path / f"dump-{path.name}"
        subprocess.run([checkzone, "-i", "none", "-k", "ignore", "-n", "ignore", "-D",
                        "-o", str(dumped), zone.origin.to_text(), str(path)],
                       capture_output=True, check=True)
        text = f"$ORIGIN {zone.origin}\n" + dumped.read_text()
        back = read_zone_file(write(tmp_path / "reread" / path.name, text))
        assert _normalized(back) == _normalized(zone), zone.origin


def _normalized(zone: Zone) -> set[tuple[str, int, str, str]]:
    """BIND prints some rdata differently (hex case, LOC precision): compare re-parsed rdata."""
    return {(key, ttl, rdtype, make_record(dns.name.root, ttl, rdtype, rdata).rdata.lower())
            for key, ttl, rdtype, rdata in zone.canonical()}
