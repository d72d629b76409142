"""Bring your own (issue 17): an existing named.conf's zones and real query traffic as inputs.

These tests start no server: the named.conf ones run BIND's named-checkconf and load into the
fs store (a directory), the traffic ones only read and write files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from base.errors import UserError
from bench.cli import main as bench_main
from bench.datasets import named_conf_zones
from servers import bindversion
from stores import get_store
from zonedata.namedconf import read_named_conf

SOA = "ns1.example.org. hostmaster.example.org. 1 3600 900 604800 300"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def zone_text(extra: str = "") -> str:
    """A zone file with relative names only: its origin must come from the configuration."""
    return f"$TTL 300\n@ SOA {SOA}\n@ NS ns1.example.org.\nwww A 192.0.2.1\n{extra}"


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    """A named.conf with two views, an include, a zone in both views, a secondary with and one
    without a file, a hint zone, and a zone whose file is broken on line 4."""
    data = tmp_path / "data"
    write(data / "a.zone", zone_text("mail A 192.0.2.2\n"))
    write(data / "a-outside.zone", zone_text("outside A 192.0.2.9\n"))
    write(data / "sub" / "b.zone", zone_text())
    write(data / "c.zone", zone_text("ftp AAAA 2001:db8::1\n"))
    write(data / "bad.zone", f"$TTL 300\n@ SOA {SOA}\n@ NS ns1.example.org.\nwww A 192.0.2.999\n")
    include = write(tmp_path / "conf.d" / "more.conf",
                    'zone "b.test" { type master; file "sub/b.zone"; };\n'
                    'zone "bad.test" { type primary; file "bad.zone"; };\n')
    return write(tmp_path / "named.conf", f"""
options {{ directory "{data}"; }};
view "inside" {{
    match-clients {{ 10.0.0.0/8; }};
    zone "a.test" {{ type primary; file "a.zone"; }};
    include "{include}";
}};
view "outside" {{
    zone "a.test" {{ type primary; file "a-outside.zone"; }};
    zone "c.test" IN {{ type secondary; primaries {{ 192.0.2.53; }}; file "c.zone"; }};
    zone "nofile.test" {{ type slave; masters {{ 192.0.2.53; }}; }};
    zone "." {{ type hint; file "root.hints"; }};
}};
""")


def checkconf() -> list[str]:
    return bindversion.select("9.18", need_drivers=False).checkconf


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


# --- --named-conf ----------------------------------------------------------------------------


def test_named_conf_zones_come_from_named_checkconf(conf):
    found = read_named_conf(conf, checkconf())
    data = conf.parent / "data"
    assert [(z.origin.to_text(), z.type, z.file, z.view) for z in found.zones] == [
        ("a.test.", "primary", data / "a.zone", "inside"),
        ("b.test.", "primary", data / "sub" / "b.zone", "inside"),  # from the include
        ("bad.test.", "primary", data / "bad.zone", "inside"),
        ("c.test.", "secondary", data / "c.zone", "outside"),
    ]
    assert found.views == ["inside", "outside"]
    assert dict(found.left_out) == {"also in an earlier view (inside)": 1,
                                    "secondary without a file": 1, "hint": 1}


def test_named_conf_with_a_bad_zone_stops_before_any_store(conf, tmp_path, capsys):
    data = tmp_path / "stores"
    assert bench_main(["load", "--named-conf", str(conf), "--stores", "fs",
                       "--data", str(data)]) == 1
    err = capsys.readouterr().err
    (line,) = error_lines(err)
    assert "1 of 4 zones fail to load" in line
    assert f"bad.test. ({conf.parent / 'data' / 'bad.zone'}:4: " in line
    assert "--skip-bad-zones" in line
    assert not data.exists()


def test_skip_bad_zones_loads_the_others_with_their_origins(conf, tmp_path, capsys):
    data = tmp_path / "stores"
    assert bench_main(["load", "--named-conf", str(conf), "--skip-bad-zones", "--stores", "fs",
                       "--data", str(data)]) == 0
    out, err = capsys.readouterr()
    assert "fs: 3 zones" in out
    assert "warning: skipping zone bad.test." in err
    assert "views inside, outside flattened" in err
    zones = {z.origin.to_text(): z for z in get_store("fs").read_back(data / "fs" / "fs")}
    assert sorted(zones) == ["a.test.", "b.test.", "c.test."]
    # a.test is the inside view's (the first), its relative names under the configured origin.
    a_records = zones["a.test."].canonical()
    assert ("mail.a.test", 300, "A", "192.0.2.2") in a_records
    assert not any(owner.startswith("outside.") for owner, *_ in a_records)
    assert ("ftp.c.test", 300, "AAAA", "2001:db8::1") in zones["c.test."].canonical()


def test_named_conf_that_named_checkconf_rejects_is_one_error(tmp_path, capsys):
    conf = write(tmp_path / "named.conf", 'options { directory "/tmp"; };\n'
                                          'zone "x.test" { type primary; file "x"; bogus yes; };\n')
    assert bench_main(["load", "--named-conf", str(conf), "--stores", "fs",
                       "--data", str(tmp_path / "stores")]) == 1
    (line,) = error_lines(capsys.readouterr().err)
    assert f"named.conf {conf}: named-checkconf rejects it: {conf}:2: unknown option 'bogus'" \
        in line
    assert not (tmp_path / "stores").exists()


def test_named_conf_with_a_missing_include_or_file_is_one_error(tmp_path, capsys):
    missing = tmp_path / "nowhere.conf"
    conf = write(tmp_path / "named.conf", f'include "{missing}";\n')
    # named-checkconf names the include statement's file and line, not the missing file.
    for path, where in ((conf, f"{conf}:1: parsing failed: file not found"),
                        (missing, f"named.conf {missing}: no such file")):
        assert bench_main(["load", "--named-conf", str(path), "--stores", "fs",
                           "--data", str(tmp_path / "stores")]) == 1
        (line,) = error_lines(capsys.readouterr().err)
        assert where in line
    assert not (tmp_path / "stores").exists()


def test_named_conf_without_zone_data_is_one_error(tmp_path):
    conf = write(tmp_path / "named.conf", 'zone "." { type hint; file "root.hints"; };\n')
    with pytest.raises(UserError, match=r"no zone with data to load \(1 hint\)"):
        named_conf_zones(conf, skip_bad=False)
