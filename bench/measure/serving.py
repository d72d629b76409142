"""One server under test fed by one data set: the store's database server, the data loaded
(timed here), and the DNS server on top.

`serve`, `verify`, `startup` and the runner all start a server through these functions, so
none of them knows which database is behind it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from base.netns import DatabaseHost
from base.process import keep_only_logs
from base.update_access import UpdateAccess
from bench.measure.loading import LoadStats, timed_load
from databases.store_urls import PRIVATE, StoreUrls
from loaders.loader import Loader
from servers import DnsServer, ServerKind, get_server
from zonedata.model import Zone


@dataclass
class LoadedStore:
    server: ServerKind
    loader: Loader[Any]
    target: Any
    load: LoadStats
    directory: Path | None = None  # the store's files (its server's data and logs), if known

    @property
    def last_zone(self) -> str:
        """Key of the last zone loaded: startup is timed until it answers."""
        return self.load.last_zone

    def dns_server(self, run_dir: Path, *, threads: int, connections: int | None = None,
                   port: int | None = None, access: UpdateAccess | None = None) -> DnsServer:
        """A server (not started) answering from this store's data; taking RFC 2136 updates
        as `access` says, when given."""
        directory = run_dir / f"named-{self.server.name}-{threads}"
        if access is not None:
            return self.server.build_updatable(self.target, directory, access, threads=threads,
                                               connections=connections or threads, port=port)
        return self.server.build(self.target, directory, threads=threads,
                                 connections=connections or threads, port=port)

    def database_pids(self) -> list[int]:
        """The processes of the store's database server (none without one)."""
        return self.loader.database.server_pids(self.target)

    def restart_database(self, *, cold: bool = False) -> None:
        """The store's database server restarted with its data (its own caches cold; cold:
        the page cache dropped too); nothing without one."""
        self.loader.database.restart_server(self.target, cold=cold)

    @property
    def accounts_database(self) -> bool:
        """Whether the store's database server is the suite's own, its CPU and memory
        accounted (one given by --store-url runs others' work too, under processes that are
        not ours)."""
        return self.loader.database.server_is_ours(self.target)


@dataclass
class Served:
    loaded: LoadedStore
    server: DnsServer


@contextmanager
def loaded_store(server: str | ServerKind, stream: Callable[[], Iterator[Zone]],
                 run_dir: Path, *, db_host: DatabaseHost | None = None,
                 store_urls: StoreUrls = PRIVATE) -> Iterator[LoadedStore]:
    """The server's store running under run_dir (inside db_host's namespace when given), or
    on the database server store_urls names for it, with the data set loaded; once its
    private database server has stopped, its data is deleted and its logs are kept."""
    server = get_server(server) if isinstance(server, str) else server
    loader = server.loader()
    directory = run_dir / loader.name
    try:
        with store_urls.server(loader.database, directory, db_host=db_host) as target:
            stats = timed_load(loader, stream(), target)
            yield LoadedStore(server, loader, target, stats, directory)
    finally:
        keep_only_logs(directory)


@contextmanager
def serving(server: str | ServerKind, stream: Callable[[], Iterator[Zone]], run_dir: Path, *,
            threads: int = 1, connections: int | None = None, port: int | None = None,
            store_urls: StoreUrls = PRIVATE, access: UpdateAccess | None = None
            ) -> Iterator[Served]:
    """Load the data into the server's store and run the server until the block ends (taking
    updates as `access` says, when given)."""
    with loaded_store(server, stream, run_dir, store_urls=store_urls) as loaded:
        with loaded.dns_server(run_dir, threads=threads, connections=connections, port=port,
                               access=access) as dns_server:
            yield Served(loaded, dns_server)
