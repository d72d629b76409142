"""`python3 -m bench run`: the benchmark; results.json, results.md and plots in one directory."""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import math
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from base.errors import UserError
from base.paths import REPO_ROOT
from base.process import new_run_dir
from base.transports import TRANSPORTS
from bench.commands import (
    add_out_option,
    add_pin_option,
    add_store_url_options,
    positive_counts,
    signable_servers,
    store_urls,
)
from bench.load import hosts as load_hosts
from bench.load.prober import NO_TLS, PROBER_TRANSPORTS, build_prober
from bench.measure import metadata
from bench.measure.datasets import (
    add_query_source_options,
    add_traffic_mix_options,
    add_zone_file_options,
    chosen_mix,
    describe,
    mix_record,
    signed_copy,
    traffic_queries,
    zone_source,
)
from bench.measure.results import Results, as_read_back, save_results
from bench.measure.rounds import RoundsRunner
from bench.measure.runner import FLOOD_NORMAL_SHARE, PROFILES, Profile, Runner, Setup, clients_for
from bench.measure.signed import DNSPERF_EDNS_PAYLOAD, SignedRunner
from bench.report.render import write_report
from servers import (
    REFERENCE,
    Target,
    get_server,
    group_of,
    parse_target,
    selected_servers,
    server_names,
    set_listen_address,
)
from zonedata import queries
from zonedata.model import Zone
from zonedata.signing import ALGORITHM


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the benchmark and write results.json.xz, results.md, "
                                   "plots")
    add_run_options(p)
    # Not the data options' --signed ("the --zones directory is signed already"): here the
    # data is unsigned and signed by the command, hence dests of their own.
    p.add_argument("--signed", dest="measure_signed", action="store_true",
                   help="signed against unsigned: sign the data set (dnssec-signzone), then "
                        "measure every server over both, every query with the DO bit; one "
                        "thread unless --threads")
    p.add_argument("--nsec3", dest="signed_nsec3", action="store_true",
                   help="with --signed: NSEC3 (no salt, 0 iterations) instead of NSEC")
    p.add_argument("--rounds-budget", type=float, metavar="MINUTES",
                   help="the rounds' time budget instead of the profile's (quick: 20 min): "
                        "after its least rounds, the run stops at it even if a ratio is "
                        "still wider than the target, and says so")
    p.add_argument("--update-repeats", type=int, metavar="N",
                   help="timed updates per cell instead of the profile's (quick: 7); 0 "
                        "leaves update visibility out (a traffic-mix run has no use for it, "
                        "and a cached PowerDNS row waits out its 20-s cache for each)")
    p.set_defaults(func=run)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options of `run`, shared by the commands that measure the way it does."""
    p.add_argument("--profile", choices=sorted(PROFILES), default="quick",
                   help="quick (default: native BIND and the DLZ drivers, 1 thread, 25 min at "
                        "most), quick-all (every server at 1, 2 and 4 threads), full (the "
                        "BIND-DLZ page's method), tiny (tests); each prints its expected "
                        "duration before it starts")
    p.add_argument("--servers", "--drivers", dest="servers", default=None,
                   help="'all' (every built server) or a comma list (default: the profile's: "
                        "native BIND and the DLZ drivers for quick, every built server "
                        "otherwise); native BIND is always measured first, as the reference")
    p.add_argument("--threads", default=None, help="comma list of server thread counts "
                   "(default from the profile: 1,2,4); with --target, the one worker thread "
                   "count the target runs with (default 1), which sets dnsperf's sockets")
    p.add_argument("--target", metavar="HOST:PORT",
                   help="measure the DNS server already running there, which the suite did not "
                        "start, instead of the suite's servers; it must serve the data set's "
                        "zones; its startup, CPU and memory are marked unavailable")
    p.add_argument("--server-label", "--driver-label", dest="server_label", metavar="NAME",
                   help="with --target: the name its results go under")
    p.add_argument("--connections", type=int, default=None,
                   help="connections to the store's database server (default: one per "
                        "thread)")
    add_pin_option(p)
    src = p.add_mutually_exclusive_group()
    add_zone_file_options(p, src)
    src.add_argument("--generate", type=int, metavar="N", help="generated zones (profile default)")
    src.add_argument("--coverage", action="store_true", help="the coverage data set")
    p.add_argument("--records", type=int, default=None, help="records per generated zone")
    p.add_argument("--seed", type=int, default=1)
    queries = p.add_mutually_exclusive_group()
    queries.add_argument("--queries", type=Path, metavar="FILE",
                         help="dnsperf query file (default: derived from the data set)")
    add_query_source_options(p, queries)
    add_traffic_mix_options(p)
    p.add_argument("--transport", choices=TRANSPORTS, default="udp",
                   help=f"what the queries travel over: {', '.join(TRANSPORTS)} (tcp-new: a new "
                        "TCP connection per query; default udp); a server that does not "
                        "speak it gets an n/a cell saying why")
    p.add_argument("--flood", type=float, metavar="QPS", default=None,
                   help="a random-subdomain flood at QPS from a second dnsperf (random labels "
                        "under one zone) beside the normal traffic, held at half the server's "
                        "maximum: its loss and p99 without and with the flood")
    add_out_option(p, "<timestamp>")
    add_store_url_options(p)
    add_load_from_options(p)


def add_load_from_options(p: argparse.ArgumentParser) -> None:
    """--load-from, --ssh-config and --listen: the load generated on other hosts."""
    p.add_argument("--load-from", action="append", default=[], metavar="ssh://[USER@]HOST[:PORT]",
                   help="run dnsperf, resperf and the prober on this host over ssh instead of "
                        "here (repeat for several load hosts at once, their results merged; the "
                        "prober runs on the first); needs --listen or --target "
                        "(docs/method/load-from.md)")
    p.add_argument("--ssh-config", type=Path, metavar="FILE",
                   help="with --load-from: the ssh client configuration to use instead of "
                        "~/.ssh/config (ssh -F FILE)")
    p.add_argument("--listen", metavar="ADDRESS",
                   help="the IPv4 address of this machine the suite's servers listen on "
                        "(default 127.0.0.1); with --load-from, one the load hosts reach")


def prepare(args: argparse.Namespace, command: str,
            threads: tuple[int, ...] | None = None) -> tuple[Profile, Setup, Results]:
    """The profile, the set-up and the (empty) results of a run from `run`'s options."""
    profile = PROFILES[args.profile]
    load_from = load_from_urls(args)  # a bad URL or address is the first thing said
    urls = store_urls(args)
    target = _target(args)
    listen_for(load_from, args, measuring_target=target is not None)
    stream, _ = zone_source(_with_profile_data(args, profile))
    if target is not None:
        # Before anything is measured or written: a target that does not serve the data
        # set's first zone stops the command here.
        first = next(iter(stream()))
        target.check_serves(first.origin)
        names = [target.label]
        threads = _target_threads(args)
    else:
        # The reference is always measured, first: every ratio in the report is to it.
        names = [REFERENCE, *[n for n in _servers(args.servers, profile) if n != REFERENCE]]
        if args.threads is not None:
            threads = tuple(positive_counts(args.threads, "--threads"))
    threads = threads or profile.threads
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or REPO_ROOT / "results" / (stamp if command == "run" else f"{command}-{stamp}")
    mix = chosen_mix(args)
    flood = _flood_rate(args)
    run_dir = new_run_dir("bench")
    traffic = traffic_queries(args, stream, run_dir)
    query_file = (traffic[0] if traffic else args.queries
                  or _derive_query_file(stream, run_dir, profile.queries, args.seed, mix))
    servers = [] if target is not None else [get_server(n) for n in names[1:]]
    # Opened last, before any server starts: an unreachable host is one line, nothing else
    # begun; each is closed (its private directory removed) when the run ends (measure()).
    hosts = open_load_hosts(load_from, args)
    setup = Setup(reference=get_server(REFERENCE), servers=servers,
                  stream=stream, dataset=describe(args), query_file=query_file,
                  run_dir=run_dir, out_dir=out, threads=threads, connections=args.connections,
                  # The load generator has hosts of its own: the server keeps every CPU here.
                  pin=args.pin and not hosts, target=target, store_urls=urls,
                  load_hosts=hosts, transport=args.transport)
    results = Results(meta={**metadata.collect(), "command": command, "profile": profile.name,
                            "parameters": {**as_read_back(dataclasses.asdict(profile)),
                                           "threads": list(setup.threads)},
                            "dnsperf_clients": {str(t): clients_for(profile, t)
                                                for t in setup.threads},
                            "connections": ("the target's own" if target is not None
                                            else args.connections or "threads"),
                            "pin": setup.pin,
                            "dataset": setup.dataset, "servers": names,
                            **({"store_urls": urls.described()} if urls.urls else {})})
    if traffic:
        results.meta["queries_from"] = traffic[1].as_dict()
    results.meta["transport"] = args.transport
    if not traffic and args.queries is None:  # the query file is the suite's: say its mix
        results.meta["traffic_mix"] = mix_record(mix or queries.traffic_mix(), profile.queries)
    if flood is not None:
        setup.flood_rate = flood
        setup.flood_file = run_dir / "flood.txt"
        zone = queries.write_flood_file(stream(), setup.flood_file,
                                        _flood_names(flood, profile.step_s), args.seed)
        results.meta["flood"] = {"rate_qps": flood, "zone": zone,
                                 "normal_share_of_maximum": FLOOD_NORMAL_SHARE,
                                 "step_s": profile.step_s}
    other_binds = {s.bind for s in servers if s.bind is not None}
    if other_binds:
        results.meta["other_binds"] = metadata.other_bind_versions(other_binds)
    if target is not None:
        results.meta["target"] = target.as_dict()
    if args.listen is not None:
        results.meta["listen"] = args.listen
    results.meta.update(metadata.load_from(hosts))
    print(f"dlzbench {command} {profile.name}: {', '.join(names)}; threads "
          f"{','.join(map(str, setup.threads))}; results in {out}", file=sys.stderr)
    return profile, setup, results


def _flood_rate(args: argparse.Namespace) -> float | None:
    """--flood, checked: a positive rate, and a transport the prober speaks (the normal
    traffic's p99 is the prober's)."""
    if args.flood is None:
        return None
    if not args.flood > 0:
        raise UserError(f"--flood {args.flood:g}: a positive number of queries per second")
    if args.transport not in PROBER_TRANSPORTS:
        raise UserError(f"--flood over {args.transport}: {NO_TLS}, and the flood's effect "
                        "is read on the normal traffic's p99")
    return args.flood


# Distinct flood names: one per query the flood sends in its step and the pause before it, so
# that no name repeats within the phase (a cache of answers meets each name once), at most a
# million (a line is about 40 octets).
_FLOOD_MAX_NAMES = 1_000_000


def _flood_names(rate: float, step_s: float) -> int:
    return max(1, min(_FLOOD_MAX_NAMES, math.ceil(rate * (step_s + 2))))


def load_from_urls(args: argparse.Namespace) -> list[load_hosts.SshUrl]:
    """--load-from URLs and --listen, checked without connecting anywhere."""
    urls = load_hosts.parse_load_from(args.load_from)
    if args.ssh_config is not None and not urls:
        raise UserError("--ssh-config is the ssh configuration for --load-from: give "
                        "--load-from too")
    if args.ssh_config is not None and not args.ssh_config.is_file():
        raise UserError(f"--ssh-config {args.ssh_config}: no such file")
    if args.listen is not None:
        _check_listen(args.listen)
    return urls


def listen_for(urls: list[load_hosts.SshUrl], args: argparse.Namespace, *,
               measuring_target: bool = False) -> None:
    """The suite's servers to listen on --listen from now on; load hosts need it, unless the
    server measured is a --target (reached where it runs)."""
    if urls and not measuring_target and args.listen is None:
        raise UserError("--load-from: the load hosts cannot reach the suite's servers on "
                        "127.0.0.1: give --listen ADDRESS, an address of this machine they "
                        "reach (or measure a --target)")
    if args.listen is not None:
        set_listen_address(args.listen)


def open_load_hosts(urls: list[load_hosts.SshUrl],
                    args: argparse.Namespace) -> list[load_hosts.LoadHost]:
    """Every load host opened (closed again by measure()), the prober they are sent built;
    an unreachable host is one error. Called before any server starts."""
    if not urls:
        return []
    hosts = load_hosts.open_hosts(urls, args.ssh_config)
    try:
        build_prober()
    except BaseException:
        load_hosts.close_hosts(hosts)
        raise
    return hosts


def _check_listen(address: str) -> None:
    """--listen: an IPv4 address of this machine (one a socket can be bound to)."""
    try:
        ipaddress.IPv4Address(address)
    except ValueError:
        raise UserError(f"--listen {address!r}: not an IPv4 address") from None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe_socket:
        try:
            probe_socket.bind((address, 0))
        except OSError as exc:
            raise UserError(f"--listen {address}: not an address of this machine "
                            f"({exc.strerror})") from None


def _servers(text: str | None, profile: Profile) -> list[str]:
    """--servers, or the profile's groups of every built server."""
    if text is not None or profile.server_groups is None:
        return selected_servers(text or "all")
    return [name for name in selected_servers("all") if group_of(name) in profile.server_groups]


def _target(args: argparse.Namespace) -> Target | None:
    """--target and --server-label, checked against each other and the options that only
    mean something for the suite's own servers."""
    if args.target is None:
        if args.server_label is not None:
            raise UserError("--server-label names the results of a --target server: give "
                            "--target HOST:PORT too")
        return None
    label = (args.server_label or "").strip()
    target = parse_target(args.target, label)  # a malformed HOST:PORT is the first thing said
    if not label:
        raise UserError(f"--target {args.target} needs --server-label NAME: the name its "
                        "results go under")
    if label in server_names():
        raise UserError(f"--server-label {label}: a server the suite runs has that name; "
                        "choose another, so results never mix the two")
    if args.servers is not None:
        raise UserError("--target measures the one server at HOST:PORT: leave out --servers")
    if args.connections is not None:
        raise UserError("--connections sets the suite's servers' connections to their "
                        "database: a --target server's are its own")
    if args.transport == "dot":
        raise UserError("--transport dot: the suite serves DoT from the servers it starts "
                        "(with a certificate of its own): not from a --target")
    return target


def _target_threads(args: argparse.Namespace) -> tuple[int, ...]:
    if args.threads is None:
        return (1,)
    counts = positive_counts(args.threads, "--threads")
    if len(counts) != 1:
        raise UserError(f"--threads {args.threads}: with --target, the one thread count the "
                        "target runs with (the suite cannot change it)")
    return (counts[0],)


def _with_profile_data(args: argparse.Namespace, profile: Profile) -> argparse.Namespace:
    """args with the profile's generated data set where no data set was given."""
    if (args.zones is None and args.named_conf is None and not args.coverage
            and args.generate is None):
        args.generate = profile.zones
    if args.records is None:
        args.records = profile.records
    return args


def run(args: argparse.Namespace) -> int:
    if args.signed_nsec3 and not args.measure_signed:
        raise UserError("--nsec3 only applies to --signed")
    if args.measure_signed:
        return run_signed(args)
    if args.rounds_budget is not None and args.rounds_budget <= 0:
        raise UserError(f"--rounds-budget {args.rounds_budget:g}: needs a positive number "
                        "of minutes")
    if args.update_repeats is not None and args.update_repeats < 0:
        raise UserError(f"--update-repeats {args.update_repeats}: needs 0 or more")
    profile, setup, results = prepare(args, "run")
    if args.rounds_budget is not None:
        profile = with_rounds_budget(profile, args.rounds_budget)
        results.meta["parameters"]["rounds"] = as_read_back(dataclasses.asdict(profile.rounds))
    if args.update_repeats is not None:
        profile = dataclasses.replace(profile, update_repeats=args.update_repeats)
        results.meta["parameters"]["update_repeats"] = args.update_repeats
    return measure(RoundsRunner(profile, setup, results))


def with_rounds_budget(profile: Profile, minutes: float) -> Profile:
    """The profile with its rounds' time budget set to `minutes`."""
    return dataclasses.replace(profile, rounds=dataclasses.replace(profile.rounds,
                                                                   budget_s=60.0 * minutes))


def run_signed(args: argparse.Namespace) -> int:
    """`run --signed`: the data set signed before anything starts (a zone that cannot be
    signed stops here, in one line), then every server over both variants."""
    # A bad option stops before the data set is signed.
    if args.target is not None:
        raise UserError("run --signed measures the suite's servers over data it signs: "
                        "not a --target")
    if args.transport != "udp" or args.flood is not None:
        raise UserError("run --signed compares signed and unsigned data over UDP, without a "
                        "flood: leave out --transport and --flood")
    args.servers = ",".join(signable_servers(args.servers or "all", "run --signed"))
    if args.threads is not None:
        positive_counts(args.threads, "--threads")
    unsigned, _ = zone_source(_with_profile_data(args, PROFILES[args.profile]))
    signed = signed_copy(unsigned, args.signed_nsec3)
    # One thread unless told otherwise, as `capacity`: thread counts are `run`'s and `tune`'s.
    profile, setup, results = prepare(args, "signed", threads=(1,))
    results.meta["command"] = "run --signed"
    results.meta["signed"] = {"chain": "NSEC3" if args.signed_nsec3 else "NSEC",
                              "algorithm": ALGORITHM, "dnssec_ok": True,
                              "dnsperf_edns_payload": DNSPERF_EDNS_PAYLOAD}
    return measure(SignedRunner(profile, setup, results, signed))


def measure(runner: Runner) -> int:
    """Run, keep what was gathered on Ctrl-C, write the report; the exit status. The load
    hosts are closed (nothing left on them) however the run ends."""
    try:
        runner.run()
    except KeyboardInterrupt:
        print("interrupted: keeping the results gathered so far", file=sys.stderr)
        _finish(runner.results, runner.setup.out_dir)
        return 130
    finally:
        load_hosts.close_hosts(runner.setup.load_hosts)
    print(_finish(runner.results, runner.setup.out_dir))
    return 0


def _finish(results: Results, out: Path) -> str:
    save_results(results, out)
    return write_report(results, out)


def _derive_query_file(stream: Callable[[], Iterator[Zone]], run_dir: Path, count: int,
                       seed: int, mix: dict[str, float] | None = None) -> Path:
    path = run_dir / "queries.txt"
    for _ in queries.write_query_file(stream(), path, count, mix or queries.DEFAULT_QUERY_MIX,
                                      seed=seed):
        pass
    return path

