"""Bring your own (issue 17): an existing named.conf's zones and real query traffic as inputs.

The named.conf tests run BIND's named-checkconf and load into the fs store (a directory), the
traffic ones only read and write files, the --target input checks start nothing; at the end,
one test serves a named.conf's zones from native BIND, the memory and the fs driver and replays
a query log at them, and one measures a `serve` it started as a server the suite did not start
(`run --target`, `capacity --target`).
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import dns.message
import dns.name
import dns.query
import dns.rcode
import dpkt
import pytest

from base.errors import UserError
from base.paths import REPO_ROOT
from base.process import free_port
from bench.commands.cli import main as bench_main
from bench.measure.datasets import named_conf_zones
from bench.measure.results import read_results_file
from loaders import get_loader
from servers import bindversion
from tests.benchcli import bench_env, processes_under, run_bench
from zonedata.generator import generate
from zonedata.namedconf import read_named_conf
from zonedata.queries import read_query_file
from zonedata.traffic import derive_query_file, detect_format

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
    # A secondary's file is in BIND's raw format unless masterfile-format says otherwise.
    compile_zone("c.test", write(tmp_path / "c.txt", zone_text("ftp AAAA 2001:db8::1\n")),
                 data / "c.zone")
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


def compile_zone(origin: str, text: Path, raw: Path) -> None:
    """A raw-format zone file made by BIND's named-compilezone, as a secondary's transfer."""
    argv = [*bindversion.select("9.18", need_drivers=False).compilezone, "-q", "-F", "raw",
            "-o", str(raw), origin, str(text)]
    subprocess.run(argv, check=True, capture_output=True)


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


# --- --named-conf ----------------------------------------------------------------------------


def test_named_conf_zones_come_from_named_checkconf(conf):
    found = read_named_conf(conf, checkconf())
    data = conf.parent / "data"
    assert [(z.origin.to_text(), z.type, z.file, z.format, z.view) for z in found.zones] == [
        ("a.test.", "primary", data / "a.zone", "text", "inside"),
        ("b.test.", "primary", data / "sub" / "b.zone", "text", "inside"),  # from the include
        ("bad.test.", "primary", data / "bad.zone", "text", "inside"),
        ("c.test.", "secondary", data / "c.zone", "raw", "outside"),
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
    zones = {z.origin.to_text(): z for z in get_loader("fs").read_back(data / "fs" / "fs")}
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


# --- --queries-from ---------------------------------------------------------------------------

# Query log lines as BIND 9.18 writes them (lib/ns/query.c log_query through lib/ns/client.c
# ns_client_logv), behind a logging channel's print-time, category and severity.
CHANNEL = "25-Nov-2026 06:00:00.101 queries: info: "
QUERY_LOG = "".join(f"{line}\n" for line in [
    f"{CHANNEL}client @0x7f5c2c0a8d68 127.0.0.1#45678 (www.a.test): "
    "query: www.a.test IN A +E(0)K (127.0.0.1)",
    f"{CHANNEL}client @0x7f5c2c0a8d68 10.1.2.3#5353 (a.test): view inside: "
    "query: a.test IN MX -E(0)DV (10.0.0.1)",
    f"{CHANNEL}client @0x7f5c2c0b1234 192.0.2.7#1024 (ftp.c.test): "
    "query: ftp.c.test IN AAAA -E(0)TK (192.0.2.53) [ECS 192.0.2.0/24/0]",
    f"{CHANNEL}client @0x7f5c2c0b1234 127.0.0.1#1025 (version.bind): "
    "query: version.bind CH TXT -E(0) (127.0.0.1)",
    f"{CHANNEL}client @0x7f5c2c0b1234 127.0.0.1#1026 (a.test): "
    "query: a.test IN AXFR -T (127.0.0.1)",
    f"{CHANNEL}client @0x7f5c2c0b1234 127.0.0.1#1027 (www.example.com): "
    "query: www.example.com IN A +E(0)K (127.0.0.1)",
    "25-Nov-2026 06:00:00.107 general: info: zone a.test/IN/inside: loaded serial 1",
    f"{CHANNEL}client @0x7f5c2c0b1234 127.0.0.1#1028 (.): query: . IN NS -E(0) (127.0.0.1)",
])


def query_wire(name: str, rdtype: str, *, response: bool = False) -> bytes:
    query = dns.message.make_query(name, rdtype)
    return (dns.message.make_response(query) if response else query).to_wire()


def udp4(payload: bytes, dport: int = 53, sport: int = 40000) -> bytes:
    udp = dpkt.udp.UDP(sport=sport, dport=dport, data=payload)
    udp.ulen = len(udp)
    ip = dpkt.ip.IP(src=bytes([192, 0, 2, 1]), dst=bytes([192, 0, 2, 53]),
                    p=dpkt.ip.IP_PROTO_UDP, data=udp)
    ip.len = len(ip)
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6,
                                        type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


def tcp6(payload: bytes) -> bytes:
    framed = len(payload).to_bytes(2, "big") + payload
    tcp = dpkt.tcp.TCP(sport=40001, dport=53, flags=dpkt.tcp.TH_PUSH | dpkt.tcp.TH_ACK,
                       data=framed)
    ip6 = dpkt.ip6.IP6(src=bytes(15) + b"\x01", dst=bytes(15) + b"\x35", nxt=dpkt.ip.IP_PROTO_TCP,
                       hlim=64, data=tcp)
    ip6.plen = len(tcp)
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6,
                                        type=dpkt.ethernet.ETH_TYPE_IP6, data=ip6))


def arp() -> bytes:
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\xff" * 6,
                                        type=dpkt.ethernet.ETH_TYPE_ARP, data=dpkt.arp.ARP()))


CAPTURE = [
    udp4(query_wire("www.a.test.", "A")),
    udp4(query_wire("www.a.test.", "A", response=True), dport=40000, sport=53),
    udp4(b"not a dns message", dport=9999),
    tcp6(query_wire("mail.a.test.", "MX")),
    udp4(b"\x00\x01garbage"),
    arp(),
    udp4(query_wire("www.example.com.", "AAAA")),
]


def write_capture(path: Path, frames: list[bytes], *, ng: bool = False) -> Path:
    with open(path, "wb") as out:
        writer = dpkt.pcapng.Writer(out) if ng else dpkt.pcap.Writer(out)
        for number, frame in enumerate(frames):
            writer.writepkt(frame, ts=1_764_000_000 + number / 10)
    return path


ZONES = [dns.name.from_text(n) for n in ("a.test.", "b.test.", "c.test.")]


@pytest.mark.check
def test_query_log_lines_become_queries(tmp_path):
    log = write(tmp_path / "query.log", QUERY_LOG)
    assert detect_format(log) == "querylog"
    out = tmp_path / "q.txt"
    traffic = derive_query_file(log, out, ZONES)
    assert read_query_file(out) == [("www.a.test.", "A"), ("a.test.", "MX"),
                                    ("ftp.c.test.", "AAAA")]
    assert traffic.kept == 3
    assert dict(traffic.dropped) == {"not class IN": 1, "zone transfer": 1,
                                     "outside loaded zones": 2, "not a query": 1}
    header = [line for line in out.read_text().splitlines() if line.startswith(";")]
    assert header == [f"; source: {log} (querylog)", "; kept: 3",
                      "; dropped not a query: 1", "; dropped not class IN: 1",
                      "; dropped outside loaded zones: 2", "; dropped zone transfer: 1"]


@pytest.mark.check
def test_query_log_without_only_zones_keeps_every_in_query(tmp_path):
    traffic = derive_query_file(write(tmp_path / "query.log", QUERY_LOG), tmp_path / "q.txt")
    assert traffic.kept == 5
    assert ("www.example.com.", "A") in read_query_file(tmp_path / "q.txt")
    assert (".", "NS") in read_query_file(tmp_path / "q.txt")


@pytest.mark.check
@pytest.mark.parametrize("ng", [False, True], ids=["pcap", "pcapng"])
def test_capture_queries_over_udp_and_tcp(tmp_path, ng):
    capture = write_capture(tmp_path / "dns.cap", CAPTURE, ng=ng)
    assert detect_format(capture) == ("pcapng" if ng else "pcap")
    out = tmp_path / "q.txt"
    traffic = derive_query_file(capture, out, ZONES)
    assert read_query_file(out) == [("www.a.test.", "A"), ("mail.a.test.", "MX")]
    assert dict(traffic.dropped) == {"not a query": 1, "not DNS": 2, "malformed": 1,
                                     "outside loaded zones": 1}
    assert out.read_text().startswith(f"; source: {capture} ({'pcapng' if ng else 'pcap'})\n")


@pytest.mark.check
def test_dnsperf_file_is_taken_as_it_is(tmp_path):
    source = write(tmp_path / "mine.txt", "; my queries\nwww.a.test A\nb.test. soa\n"
                                          "one-field\nwww.d.test A\n")
    traffic = derive_query_file(source, tmp_path / "q.txt", ZONES)
    assert read_query_file(tmp_path / "q.txt") == [("www.a.test.", "A"), ("b.test.", "SOA")]
    assert dict(traffic.dropped) == {"malformed": 1, "outside loaded zones": 1}


@pytest.mark.check
def test_capture_without_dns_is_one_error_and_no_file(tmp_path):
    capture = write_capture(tmp_path / "web.pcap", [udp4(b"x" * 40, dport=443), arp()])
    out = tmp_path / "q.txt"
    with pytest.raises(UserError, match=rf"^{capture}: no usable DNS queries in this pcap file "
                                        r"\(2 not DNS\)$"):
        derive_query_file(capture, out)
    assert list(tmp_path.iterdir()) == [capture]


@pytest.mark.check
def test_unrecognised_or_truncated_sources_are_one_error(tmp_path):
    text = write(tmp_path / "notes.txt", "hello there, this is not traffic\n")
    with pytest.raises(UserError, match=r"notes.txt: neither a pcap/pcapng capture"):
        derive_query_file(text, tmp_path / "q.txt")
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(write_capture(tmp_path / "whole.pcap", CAPTURE).read_bytes()[:30])
    with pytest.raises(UserError, match=r"cut.pcap: cannot read packet capture"):
        derive_query_file(cut, tmp_path / "q.txt")
    with pytest.raises(UserError, match=r"absent.log: cannot read query source"):
        derive_query_file(tmp_path / "absent.log", tmp_path / "q.txt")
    assert not (tmp_path / "q.txt").exists()


@pytest.mark.check
def test_run_stops_on_a_capture_without_dns_before_any_server(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DLZBENCH_RUN_DIR", str(tmp_path / "run"))
    capture = write_capture(tmp_path / "web.pcap", [udp4(b"x" * 40, dport=443)])
    assert bench_main(["run", "--profile", "tiny", "--coverage", "--servers", "native",
                       "--queries-from", str(capture), "--out", str(tmp_path / "out")]) == 1
    (line,) = error_lines(capsys.readouterr().err)
    assert line == f"error: {capture}: no usable DNS queries in this pcap file (1 not DNS)"
    assert not (tmp_path / "out").exists()


@pytest.mark.check
def test_only_zones_needs_queries_from(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DLZBENCH_RUN_DIR", str(tmp_path / "run"))
    assert bench_main(["run", "--profile", "tiny", "--coverage", "--servers", "native",
                       "--only-zones", "--out", str(tmp_path / "out")]) == 1
    (line,) = error_lines(capsys.readouterr().err)
    assert "--only-zones filters the queries of --queries-from" in line


# --- --target: input checks (nothing is started) --------------------------------------------


def target_run(tmp_path: Path, *options: str) -> list[str]:
    """`run --profile tiny` with options that must stop it: its error lines; nothing written."""
    args = ["run", "--profile", "tiny", *options, "--out", str(tmp_path / "out")]
    assert bench_main(args) == 1
    assert not (tmp_path / "out").exists()
    return args


@pytest.mark.check
def test_target_that_refuses_is_one_error_naming_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DLZBENCH_RUN_DIR", str(tmp_path / "run"))
    port = free_port()  # nothing listens there: the refusal comes back at once
    target_run(tmp_path, "--target", f"127.0.0.1:{port}", "--server-label", "mine")
    (line,) = error_lines(capsys.readouterr().err)
    first = next(generate(20, 10, 1)).origin  # the tiny profile's data set's first zone
    assert line == (f"error: --target 127.0.0.1:{port}: no answer to {first} SOA from "
                    f"127.0.0.1:{port}: connection refused")
    assert not (tmp_path / "run").exists(), "checked before anything was set up"


def test_target_that_stays_silent_is_one_error_naming_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DLZBENCH_RUN_DIR", str(tmp_path / "run"))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        port = silent.getsockname()[1]
        target_run(tmp_path, "--target", f"127.0.0.1:{port}", "--server-label", "mine")
    (line,) = error_lines(capsys.readouterr().err)
    assert line.startswith(f"error: --target 127.0.0.1:{port}: no answer to ")
    assert line.endswith("in 3 tries of 2 s (is a DNS server running there?)")


@pytest.mark.check
def test_target_that_serves_other_zones_is_one_error(tmp_path, capsys, monkeypatch):
    """A server that answers, but not for the data set's zones: stopped before measuring."""
    monkeypatch.setenv("DLZBENCH_RUN_DIR", str(tmp_path / "run"))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as refusing:
        refusing.bind(("127.0.0.1", 0))
        refusing.settimeout(10)
        port = refusing.getsockname()[1]
        answer = _answer_refused(refusing)
        target_run(tmp_path, "--target", f"127.0.0.1:{port}", "--server-label", "mine")
        answer.join()
    (line,) = error_lines(capsys.readouterr().err)
    assert line.startswith(f"error: --target 127.0.0.1:{port}: ")
    assert "SOA answered REFUSED without authority (no AA): the server there does not serve " \
           "the data set's zones" in line


def _answer_refused(sock: socket.socket) -> threading.Thread:
    """A thread answering the first query on sock REFUSED, as a server for other zones does."""
    def answer() -> None:
        wire, peer = sock.recvfrom(65535)
        response = dns.message.make_response(dns.message.from_wire(wire))
        response.set_rcode(dns.rcode.REFUSED)
        sock.sendto(response.to_wire(), peer)

    thread = threading.Thread(target=answer)
    thread.start()
    return thread


@pytest.mark.check
@pytest.mark.parametrize(("options", "expected"), [
    (["--target", "127.0.0.1"], "--target '127.0.0.1': not HOST:PORT"),
    (["--target", "127.0.0.1:domain"], "--target '127.0.0.1:domain': not HOST:PORT"),
    (["--target", "127.0.0.1:70000"], "--target 127.0.0.1:70000: port 70000 is not between 1 "
                                      "and 65535"),
    (["--target", "127.0.0.1:53"], "--target 127.0.0.1:53 needs --server-label NAME"),
    (["--server-label", "mine"], "--server-label names the results of a --target server"),
    (["--target", "127.0.0.1:53", "--server-label", "native"],
     "--server-label native: a server the suite runs has that name"),
    (["--target", "127.0.0.1:53", "--server-label", "mine", "--servers", "memory"],
     "--target measures the one server at HOST:PORT: leave out --servers"),
    (["--target", "127.0.0.1:53", "--server-label", "mine", "--connections", "2"],
     "a --target server's are its own"),
])
def test_target_options_that_do_not_fit_are_one_error(tmp_path, capsys, monkeypatch, options,
                                                      expected):
    monkeypatch.setenv("DLZBENCH_RUN_DIR", str(tmp_path / "run"))
    target_run(tmp_path, *options)
    (line,) = error_lines(capsys.readouterr().err)
    assert line.startswith("error: ") and expected in line, line
    assert not (tmp_path / "run").exists()


# --- end to end: the tests here that start servers -------------------------------------------


def test_verify_serves_a_named_conf_and_replays_its_query_log(conf, tmp_path, run_root):
    log = write(tmp_path / "query.log", QUERY_LOG)
    done = subprocess.run([sys.executable, "-m", "bench", "verify", "--named-conf", str(conf),
                           "--skip-bad-zones", "--queries-from", str(log), "--only-zones",
                           "--servers", "fs", "--no-axfr"],
                          cwd=REPO_ROOT, env=bench_env(run_root), capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{log} (querylog): 3 queries kept" in done.stderr
    assert "verifying 3 queries over 3 zones: native, memory, fs" in done.stdout
    assert "memory: 3/3 identical" in done.stdout
    assert "fs: 3/3 identical" in done.stdout
    assert processes_under(run_root) == []


def test_secondary_text_file_needs_masterfile_format_text(tmp_path):
    write(tmp_path / "s.zone", zone_text())
    statement = 'zone "s.test" {{ type secondary; primaries {{ 192.0.2.53; }}; file "s.zone";{} }};'
    conf = write(tmp_path / "named.conf", f'options {{ directory "{tmp_path}"; }};\n'
                                          + statement.format(""))
    with pytest.raises(UserError, match=rf"{tmp_path / 's.zone'}: not a raw-format zone file "
                                        "named-compilezone reads: .*format mismatch"):
        named_conf_zones(conf, skip_bad=False)
    write(conf, f'options {{ directory "{tmp_path}"; }};\n'
                + statement.format(" masterfile-format text;"))
    (zone,) = named_conf_zones(conf, skip_bad=False)
    assert zone.format == "text"


def test_target_measures_a_server_the_suite_did_not_start(tmp_path, run_root):
    """`run --target` and `capacity --target` against a `serve` of the tiny profile's data:
    its answers checked against native BIND's over the data set, latency, QPS and capacity
    steps measured at its address, startup, CPU and memory marked unavailable, the server left
    running; a data set it does not serve makes the cell WRONG."""
    serve = subprocess.Popen([sys.executable, "-m", "bench", "serve", "--server", "native",
                              "--generate", "20", "--records", "10", "--seed", "1"],
                             cwd=REPO_ROOT, env=bench_env(run_root / "serve"),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert serve.stdout is not None
        first = serve.stdout.readline()
        match = re.search(r"port (\d+)", first)
        assert match, first + serve.stdout.read()
        target = f"127.0.0.1:{match[1]}"
        ran = _bench_ok(run_root, "run", "--profile", "tiny", "--target", target,
                        "--server-label", "mine", "--out", str(tmp_path / "run"))
        results = read_results_file(tmp_path / "run")
        _check_target_results(results, target)
        report = (tmp_path / "run" / "results.md").read_text()
        assert f"--target: mine at {target}" in report
        assert re.search(r"^\| Startup \(ms\) \| n/a \[\d\] \|$", report, re.M), report
        # cost: server, db, dnsperf us/query, QPS per server core, dnsperf cores, server cores,
        # RSS server, db: only the load generator's side is the suite's to account
        assert re.search(r"^\| mine \| 1 \| n/a \[\d\] \| n/a \[\d\] \| [\d.,]+ \| "
                         r"n/a \[\d\] \| [\d.,]+ \| – \| n/a \[\d\] \| n/a \[\d\] \|$",
                         report, re.M), report
        assert "n/a: the suite did not start the server (--target)" in report
        assert "threads=1" in ran.stderr and "mine at " in ran.stderr

        _bench_ok(run_root, "capacity", "--profile", "tiny", "--target", target, "--server-label",
                  "mine", "--steps", "50,100", "--common-rate", "0", "--out",
                  str(tmp_path / "capacity"))
        results = read_results_file(tmp_path / "capacity")
        (curve,) = results["capacity"]
        assert curve["server"] == "mine"
        # each step twice, up then down
        assert [step["percent"] for step in curve["steps"]] == [50, 100, 100, 50]
        assert all(step["answered_qps"] > 0 for step in curve["steps"]), curve["steps"]
        (cell,) = results["cells"]
        assert cell["startup_ms"] is None and "startup_ms" in cell["unavailable"]

        # Same zone names, other records: the answers tell the data sets apart.
        _bench_ok(run_root, "run", "--profile", "tiny", "--seed", "2", "--target", target,
                  "--server-label", "mine", "--out", str(tmp_path / "other-data"))
        results = read_results_file(tmp_path / "other-data")
        (cell,) = results["cells"]
        assert cell["status"] == "wrong" and cell["mismatches"] > 0, cell
        assert "answers differ from native's over the data set" in cell["error"]
        assert cell["qps_runs"] == [], "nothing is timed over answers that are wrong"

        assert serve.poll() is None, "the suite left the server it did not start running"
        response = dns.query.udp(dns.message.make_query(next(generate(20, 10, 1)).origin, "SOA"),
                                 "127.0.0.1", port=int(match[1]), timeout=5)
        assert response.answer
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.communicate(timeout=60)
    assert serve.returncode == 130
    assert processes_under(run_root) == []


def _bench_ok(run_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command run under run_root/COMMAND, which must succeed."""
    done = run_bench(run_root / args[0], *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _check_target_results(results: dict, target: str) -> None:
    """One ok cell under the label, at the target, with measured latency and QPS and the
    figures the suite cannot measure there None and said to be unavailable."""
    assert results["meta"]["target"]["label"] == "mine"
    assert results["meta"]["target"]["target"] == target
    assert results["meta"]["servers"] == ["mine"]
    (cell,) = results["cells"]
    assert (cell["server"], cell["status"], cell["target"]) == ("mine", "ok", target), cell
    assert cell["qps_runs"] and all(r["queries_completed"] > 0 for r in cell["qps_runs"])
    assert cell["qps"]["median"] > 0
    for kind in ("latency_unloaded", "latency_loaded"):
        assert cell[kind]["count"] > 0, kind
    assert cell["cpu_us_per_query"]["dnsperf"] is not None  # the load generator is ours
    unavailable = cell["unavailable"]
    for figure in ("startup_ms", "update_visibility_ms"):
        assert cell[figure] is None and figure in unavailable, figure
    for field in ("cpu_us_per_query", "peak_rss_kb"):
        for who in ("server", "db"):
            assert cell[field][who] is None and f"{field}.{who}" in unavailable, (field, who)
    assert cell["mismatches"] == 0 and "mismatches" not in unavailable
