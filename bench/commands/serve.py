"""`python3 -m bench serve`: one server serving a data set until Ctrl-C."""

from __future__ import annotations

import argparse
import signal

from base.errors import UserError
from base.process import new_run_dir, port_is_free
from bench.commands import add_store_url_options, store_urls
from bench.measure.datasets import add_data_options, zone_source
from bench.measure.serving import serving
from servers import server_names


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve a data set with one server until Ctrl-C")
    p.add_argument("--server", "--driver", dest="server", required=True,
                   help=", ".join(server_names()))
    add_data_options(p)
    p.add_argument("--port", type=int, default=None, help="UDP/TCP port on 127.0.0.1 "
                   "(default: a free one)")
    p.add_argument("--threads", type=int, default=1,
                   help="server worker threads (named -n; PowerDNS receiver-threads, NSD "
                        "server-count, Knot udp-workers)")
    p.add_argument("--connections", type=int, default=None,
                   help="connections to the store's database server (default: one per "
                        "thread)")
    add_store_url_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # named (like Knot, NSD and PowerDNS here) binds with SO_REUSEPORT, so a second server on
    # a taken port would start and silently share it with the first.
    if args.port is not None and not port_is_free(args.port):
        raise UserError(f"port {args.port} on 127.0.0.1 is in use (leave out --port to get a "
                        "free one)")
    urls = store_urls(args)
    stream, _ = zone_source(args)
    run_dir = new_run_dir(f"serve-{args.server}")
    with serving(args.server, stream, run_dir, threads=args.threads,
                 connections=args.connections, port=args.port, store_urls=urls) as served:
        load, server = served.loaded.load, served.server
        print(f"{args.server}: {load.zones} zones, {load.records} records; {server.program} "
              f"with {args.threads} thread(s) (pid {server.pids()[0]}) on 127.0.0.1 port "
              f"{server.port}; "
              f"run directory {run_dir}", flush=True)
        print(f"try: dig @127.0.0.1 -p {server.port} {served.loaded.last_zone}. SOA", flush=True)
        print("Ctrl-C stops everything.", flush=True)
        signal.pause()
    return 0
