"""What a measurement measures: a DNS server fed by a store, one `--server` name each.

A `ServerKind` says which store feeds the server and how to configure and build a server
instance over that store's data, and what the server can do that a measurement asks about:
whether it takes RFC 2136 updates, how it is told of a write into its store, whether its
process runs under a wrapper (Valgrind), whether its store's writers hold locks it waits
for, which software it runs and how that software's version is read. bench/ asks these and
never looks at a kind's type or name, so a new kind of server (another DNS implementation,
another BIND) is a new subclass and a registry line in servers/__init__.py.
"""

from __future__ import annotations

import dataclasses
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from base.errors import UserError
from base.update_access import UpdateAccess
from databases.database import CacheReading
from loaders import get_loader
from loaders.loader import Loader
from loaders.writes import Change
from servers import bindversion
from servers.dnsserver import DnsServer
from servers.update_policy import NamedUpdatePolicy


@dataclass(frozen=True)
class ChangeChannel:
    """The change channel of a cache a server answers from, which its store tells of every
    change, as the server's log shows it: the line naming the channel's connection on the
    store's server (its number there, the pattern's group 1), the words saying the cache was
    flushed and is bypassed (the channel lost), and those saying it answers from the cache
    again."""

    connection_line: re.Pattern[str]
    bypassed: str
    answering: str

    def connection(self, log: str) -> int | None:
        """The channel's connection as the log last named it (None: never)."""
        found = self.connection_line.findall(log)
        return int(found[-1]) if found else None


@dataclass(frozen=True)
class ServerKind(ABC):
    name: str        # the `--server` value
    store: str       # the store (loaders/<store>.py) holding the data it answers from
    # The server answers a store update only after `rndc reload` (it reads its data at
    # load time, or keeps a file the loader replaces by rename).
    needs_reload: bool = False
    # Resident memory of the server per record it serves, for a server that holds the whole
    # data set in its own memory (None: it reads the store on demand). `scale` leaves a data
    # set that would not fit out, as not measured, instead of driving the machine out of
    # memory.
    kib_per_record: float | None = None
    # The known differences of its answers from native BIND's: names of the classes in
    # bench/verify/bind_classes.py and other_classes.py, each measured on the coverage set and
    # explained by a mechanism of the server.
    # Any other difference is a wrong answer.
    answer_classes: tuple[str, ...] = ()
    # Those seen only on signed data (`verify --sign/--dnssec`, `run --signed`): DLZ's with the
    # DO bit; PowerDNS's on a signed zone served as plain data, DO or not.
    dnssec_classes: tuple[str, ...] = ()
    # The BIND a `named` row runs when it is not the run's own (--bind): the row NAME@VERSION
    # (servers/__init__.py's get_server), so that one run interleaves both BINDs' rounds.
    bind: str | None = None

    # Which column group of the results table the server belongs to (docs/reference.md: which
    # question each group answers).
    group: ClassVar[str] = ""
    # A server whose answers must equal another server's exactly (a DLZ driver: the memory
    # driver's, BIND's DLZ path with a perfect driver); None: compared with native BIND and
    # judged by its own answer_classes.
    same_answers_as: ClassVar[str | None] = None
    # Why the server cannot serve a signed zone as its store holds it (None: it can, with
    # the signatures or, through BIND's DLZ path, as plain data): `run --signed` leaves it out.
    cannot_serve_signed: ClassVar[str | None] = None
    # Why the server, serving a signed zone, leaves out its signatures and denial proofs (None:
    # it serves them, as native BIND does): a validating resolver finds its answers bogus.
    # `advise --signed` rules such a server out.
    serves_unsigned: ClassVar[str | None] = None
    # The server is `named` (native or through a DLZ driver): a row of it can run another
    # BIND than the run's (NAME@VERSION).
    runs_bind: ClassVar[bool] = False
    # Why the server cannot answer DNS over TLS (None: it can, with DnsServer.serve_tls):
    # `run --transport dot` gives it an n/a cell with this reason.
    no_dot: ClassVar[str | None] = None
    # The server sees a write into its store only when told of it (tell_of_write: a server of
    # zone files, which nothing here watches); False: it reads its store live, or not at all
    # after it starts (needs_reload).
    told_of_writes: ClassVar[bool] = False
    # Its process can run under a command prefix (DnsServer.run_under): `instructions`
    # counts the instructions of such a server only, under callgrind.
    runs_under_wrapper: ClassVar[bool] = False
    # The metadata key of the software it runs ("bind", "powerdns", ...), whose version
    # software_version reads: servers.software_versions() lists one per key.
    version_key: ClassVar[str] = ""

    @classmethod
    @abstractmethod
    def software_version(cls) -> str:
        """The version of the software the server runs, as installed here
        (base.versions.NOT_INSTALLED when it is not)."""

    def transport_unsupported(self, transport: str) -> str | None:
        """Why the server does not answer over `transport` (None: it does). Every server
        answers UDP and TCP, with a connection kept or a new one per query."""
        return self.no_dot if transport == "dot" else None

    def named_bind(self) -> bindversion.Bind | None:
        """The BIND this row's named runs: its own (NAME@VERSION), or None for the run's."""
        # Its drivers need not be built: native BIND loads none, and a DLZ row whose build is
        # missing is not built (is_built) and never started.
        return None if self.bind is None else bindversion.select(self.bind, need_drivers=False)

    def known_classes(self) -> tuple[str, ...]:
        """Every known difference of its answers, in the order they are tried."""
        return (*self.answer_classes, *self.dnssec_classes)

    def loader(self) -> Loader[Any]:
        """The loader of the store feeding the server (its `database` is where the data is)."""
        return get_loader(self.store)

    def store_options(self) -> Mapping[str, str]:
        """How the server reads its store, in the store's words (a DLZ driver's options, such
        as which Berkeley DB mode; none by default)."""
        return {}

    def cache_reading(self, target: Any) -> CacheReading | None:
        """The store's own cache figures as this server uses the store."""
        return self.loader().database.cache_reading(target, self.store_options())

    def writers_hold_locks(self) -> bool:
        """Does a writer of the store hold locks this server's reads wait for (`faults`'
        writer-stall and writer-kill)?"""
        return self.loader().writers_hold_locks(self.store_options())

    def zone_lock_holder(self, target: Any, zone_key: str) -> list[str]:
        """The command of a writer process holding zone_key's write lock where this server
        reads (Loader.zone_lock_holder)."""
        return self.loader().zone_lock_holder(target, self.store_options(), zone_key)

    def change_channel(self) -> ChangeChannel | None:
        """The change channel of the cache the server answers from (None: it keeps no
        cache its store tells of changes)."""
        return None

    @contextmanager
    def channel_cut(self, target: Any, server: DnsServer, *, kept_out: bool) -> Iterator[int]:
        """The change channel's connection of `server` (built by this kind over the store's
        target, running) ended on the store's server alone; kept_out: kept from coming back
        until the block ends (Database.connection_ended). Yields the connection's number."""
        channel = self.change_channel()
        if channel is None:
            raise UserError(f"{self.name} has no change channel")
        connection = channel.connection(server.log_path.read_text(errors="replace"))
        if connection is None:
            raise UserError(f"{server.program}'s log names no connection of its change "
                            f"channel ({server.log_path})")
        with self.loader().database.connection_ended(target, connection, kept_out=kept_out):
            yield connection

    def tell_of_write(self, server: DnsServer, target: Any, change: Change) -> None:
        """Make `server` (built by this kind over the store's target, running) see a change
        just written into the store (`bench writes`): nothing for a server that reads its store
        live (told_of_writes: one that must be told does it here)."""
        return None

    def memory_needed_kib(self, records: int) -> float | None:
        """named's expected resident memory over `records` records (None: not data-bound)."""
        return None if self.kib_per_record is None else self.kib_per_record * records

    def is_built(self) -> bool:
        """Everything the server needs from `make build` is there."""
        return True

    @abstractmethod
    def build(self, target: Any, run_dir: Path, *, threads: int, connections: int,
              port: int | None = None) -> DnsServer:
        """A server instance (not started) in run_dir answering from the store's target;
        `with` starts it and waits until it serves every zone. `threads` is the server's own
        worker knob (named -n, PowerDNS receiver threads, NSD server-count, Knot UDP
        workers); `connections` the connections it keeps to the store's server."""

    def caches_answers(self) -> bool:
        """Does the server answer from caches of its own, which a change to its store reaches
        only when they expire? (`updates` leaves such a row out by default: a cache would
        answer its checks from before the change.)"""
        return False

    def takes_updates(self) -> bool:
        """Does build_updatable make a server that takes RFC 2136 updates? None does unless
        its kind says so (native BIND; a DLZ driver whose store its driver can write; Knot;
        PowerDNS over a store it can write)."""
        return False

    def build_updatable(self, target: Any, run_dir: Path, access: UpdateAccess, *,
                        threads: int, connections: int, port: int | None = None) -> DnsServer:
        """As build, a server that also takes RFC 2136 updates into its store for the zones
        `access` names (`bench updates`): for a `named` row (whose `updates` field is its
        update policy), this row with the update policy that grants what `access` does."""
        if not self.takes_updates():
            raise UserError(f"{self.name} takes no dynamic updates in this suite")
        row = dataclasses.replace(self, updates=named_update_policy(access))  # type: ignore[call-arg]
        return row.build(target, run_dir, threads=threads, connections=connections, port=port)


def named_update_policy(access: UpdateAccess) -> NamedUpdatePolicy:
    """named's update policy for `access`: one policy covers all of a named's update zones,
    so `access` names either open zones or keyed ones."""
    if access.open_zones and access.keyed_zones:
        raise UserError("one named takes updates under one policy: open zones or keyed ones")
    if access.keyed_zones:
        return NamedUpdatePolicy(access.keyed_zones, access.key)
    return NamedUpdatePolicy(access.open_zones, None, unsigned=True)
