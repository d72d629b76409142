"""A three-host lab on one machine: `python3 -m tests.loadlab [--load-hosts N] [--db-host]
BENCH-COMMAND ARGS...` runs `python3 -m bench BENCH-COMMAND ARGS...` with its load from N
network-namespace load hosts over ssh (tests/sshhost.py: a private sshd in each) and, with
--db-host, the pg store on a PostgreSQL in a namespace of its own (--store-url): the same run
as on three real machines (docs/method/load-from.md), its hosts made here and removed when it
ends, on Ctrl-C and on failure. The suite's servers listen on the first load host's side of
its veth pair (--listen). Its exit status is the bench command's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg

from base.netns import DatabaseHost
from base.paths import REPO_ROOT
from databases.postgresql import PgServer
from tests.sshhost import SshLoadHost

LAB_DATABASE = "lab"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.loadlab", description=__doc__)
    parser.add_argument("--load-hosts", type=int, default=1, choices=range(1, 5))
    parser.add_argument("--db-host", action="store_true",
                        help="the pg store on a PostgreSQL in a namespace of its own")
    parser.add_argument("bench", nargs=argparse.REMAINDER, help="the bench command and args")
    args = parser.parse_args(argv)
    if not args.bench:
        parser.error("give the bench command to run, e.g. run --profile tiny")
    with contextlib.ExitStack() as stack:
        hosts = [stack.enter_context(SshLoadHost()) for _ in range(args.load_hosts)]
        for host in hosts[1:]:
            host.reach(hosts[0].server_address)
            share_client(hosts[0], host)
        extra = [word for host in hosts for word in ("--load-from", host.url)]
        extra += ["--ssh-config", str(hosts[0].ssh_config), "--listen", hosts[0].server_address]
        env = dict(os.environ)
        if args.db_host:
            db = stack.enter_context(DatabaseHost())
            run_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dlzb-lab-")))
            pg = stack.enter_context(PgServer(run_dir / "pg", db_host=db))
            with psycopg.connect(pg.conninfo(), autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {LAB_DATABASE} OWNER {pg.user}")
            extra += ["--store-url", f"pg=postgresql://{pg.user}@{db.address}:{pg.port}/"
                                     f"{LAB_DATABASE}"]
            env["PGPASSWORD"] = pg.password
        print(f"loadlab: {' '.join(extra)}", file=sys.stderr, flush=True)
        bench = subprocess.Popen([sys.executable, "-m", "bench", *args.bench, *extra],
                                 cwd=REPO_ROOT, env=env)
        while True:
            try:
                return bench.wait()
            except KeyboardInterrupt:  # the bench command had Ctrl-C too: it ends by itself
                continue


def share_client(first: SshLoadHost, other: SshLoadHost) -> None:
    """first's ssh configuration reaches other too: its key authorized there beside other's
    own (other's configuration still reaches it), other's host key known."""
    authorized = other.directory / "authorized_keys"
    authorized.write_text(authorized.read_text() + (first.directory / "client_key.pub").read_text())
    known = first.directory / "known_hosts"
    known.write_text(known.read_text() + (other.directory / "known_hosts").read_text())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
