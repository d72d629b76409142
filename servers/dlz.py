"""named with a DLZ driver over a store: the driver described as data, its clause built once.

A DLZ driver is drivers/<library>/dlz_<library>.so, told where its store's data is by
key=value words after the library path in the `database "dlopen ..."` string. Every such
clause in the suite is built and validated by `dlz_clause` below.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from base.errors import UserError
from base.paths import DRIVERS_DIR
from base.process import require_service_user_reaches
from servers import bindversion
from servers.kind import ChangeChannel, ServerKind
from servers.named import Named
from servers.update_policy import NamedUpdatePolicy

# named splits the dlopen string at white space, ends it at a double quote, and takes a
# backslash as an escape: a word holding any of these cannot reach the driver intact. Braces
# are refused too, so that no value can look like the end of the dlz statement to a reader.
_UNPASSABLE = frozenset('"\\{}')


def library_path(library: str) -> Path:
    """The shared object of drivers/<library>/."""
    return DRIVERS_DIR / library / f"dlz_{library}.so"


def dlz_clause(name: str, library: Path, args: Mapping[str, str]) -> str:
    """A named.conf `dlz` statement loading `library` with key=value arguments."""
    words = [str(library), *(f"{key}={value}" for key, value in args.items())]
    for word in words:
        if any(c.isspace() or c in _UNPASSABLE for c in word):
            raise UserError(f"cannot pass {word!r} to the {name} DLZ driver: named's dlopen "
                            "string allows no white space, quotes, backslashes or braces "
                            "(is the run directory's path plain?)")
    return f'dlz "{name}" {{\n\tdatabase "dlopen {" ".join(words)}";\n}};\n'


# The differences BIND's own DLZ path makes from native BIND with a perfect driver (the memory
# driver): BIND_CLASSES in bench/verify/bind_classes.py, each with its mechanism in BIND's code.
DLZ_PATH_CLASSES = ("root-zone", "ds-parent-side", "soa-nxdomain-ttl", "any-at-ent",
                    "any-at-delegation", "nsec-at-cname", "cross-zone-chain")
# What the same path leaves out of, or changes in, a signed zone's answers (DO bit set, or an
# explicit query for a DNSSEC type): sdlz.c returns no signatures and has no NSEC3 tree.
DLZ_SIGNED_PATH_CLASSES = ("nsec3-owner", "rrsig-ttl", "rrsig-at-delegation",
                           "any-hides-dnssec", "dnssec-type-unsigned", "unsigned-wildcard",
                           "unsigned-answer", "nodata-no-proof", "nxdomain-no-proof",
                           "referral-no-ds", "referral-no-proof")


@runtime_checkable
class DlzStore(Protocol):
    """A store a DLZ driver reads: its loader (loaders/<store>.py) defines this method."""

    def dlz_args(self, target: Any, options: Mapping[str, str]) -> dict[str, str]:
        """The key=value arguments a DLZ driver needs to reach this store's data; `options`
        are a driver's own (servers/__init__.py), e.g. which Berkeley DB access method."""
        ...


@runtime_checkable
class DlzWritableStore(DlzStore, Protocol):
    """A store a DLZ driver also writes RFC 2136 updates into (drivers/common/update.c)."""

    def dlz_write_access(self, target: Any, options: Mapping[str, str], zones: Sequence[str]
                         ) -> tuple[dict[str, str], dict[str, str]]:
        """The DLZ driver's arguments and environment when it takes RFC 2136 updates of
        `zones` (keys): the store reached as an account that may also write where the update
        path writes, in those zones only where the store can say so."""
        ...


# The column groups of the DLZ rows (docs/reference.md: the question each group answers).
DLZ_GROUP = "BIND DLZ drivers"
CACHED_DLZ_GROUP = "BIND DLZ drivers, cached"


@dataclass(frozen=True)
class DlzCache:
    """The driver core's coherent cache (drivers/common/cache.c), switched on: answers from
    named's memory, each at most bound_ms behind the store, which tells the driver of every
    change (PostgreSQL's triggers and LISTEN/NOTIFY, ...); size_kb bounds its memory."""

    size_kb: int = 64 * 1024
    bound_ms: int = 1000

    def dlz_args(self) -> dict[str, str]:
        """The core's arguments that say so."""
        return {"cache": "yes", "cache_size_kb": str(self.size_kb),
                "cache_bound_ms": str(self.bound_ms)}


# The core cache's change channel (drivers/common/cache.c) as named's log shows it. A DLZ
# driver names the channel's connection on its database server as it starts following it:
# drivers/pg "cache: listening to PostgreSQL's notifications (backend PID)", drivers/mysql
# "cache: polling MariaDB's change log every N ms (connection ID)"; drivers/ldap names none.
DLZ_CHANGE_CHANNEL = ChangeChannel(
    connection_line=re.compile(r"cache: (?:listening|polling)[^\n]*\((?:backend|connection) "
                               r"(\d+)\)"),
    bypassed="cache: flushed, and bypassed",
    answering="cache: answering from the cache")


@dataclass(frozen=True)
class DlzNamed(ServerKind):
    """named answering through a DLZ driver that reads the store's data on every query."""

    answer_classes: tuple[str, ...] = DLZ_PATH_CLASSES
    dnssec_classes: tuple[str, ...] = DLZ_SIGNED_PATH_CLASSES
    serves_unsigned = "BIND's DLZ path serves no RRSIG and no NSEC or NSEC3 proof (sdlz.c)"
    same_answers_as = "memory"  # servers.DLZ_CEILING: BIND's DLZ path with a perfect driver
    runs_bind = True
    runs_under_wrapper = True
    version_key = "bind"

    # drivers/<library>/; by default the store's own name (one name per backend).
    library: str = ""
    # The driver's own arguments, turned into the store's words by its loader's dlz_args
    # (DlzStore; e.g. which Berkeley DB access method, which bdbhpt mode).
    options: Mapping[str, str] = field(default_factory=dict)
    # Declared to named from dlz_version() (DNS_SDLZFLAG_THREADSAFE): named then calls the
    # driver from every worker at once instead of serializing it.
    thread_safe: bool = True
    # Zones that take RFC 2136 updates, and from whom (None: the store is only read). The
    # driver then writes them as the store's writer, limited to them where the store can say
    # so (DlzWritableStore).
    updates: NamedUpdatePolicy | None = None
    # The core's cache, on (None: off, every query reads the store). Not a store option:
    # the core's, the same words for every driver whose store has a change channel.
    cache: DlzCache | None = None

    @classmethod
    def software_version(cls) -> str:
        return bindversion.version_text()

    @property
    def group(self) -> str:  # type: ignore[override]
        """A row with the core's cache on answers another question than the plain rows:
        what a coherent cache buys, not what reading the store costs."""
        return CACHED_DLZ_GROUP if self.cache else DLZ_GROUP

    def store_options(self) -> Mapping[str, str]:
        return self.options

    def change_channel(self) -> ChangeChannel | None:
        """The core's, with its cache on (named refuses cache=yes over a store without a
        change channel)."""
        return DLZ_CHANGE_CHANNEL if self.cache else None

    def takes_updates(self) -> bool:
        """The driver writes updates into its store when the store's loader says how it may
        (DlzWritableStore)."""
        return isinstance(self.loader(), DlzWritableStore)

    @property
    def library_file(self) -> Path:
        """The driver as named loads it (under drivers/, where the BIND's own build is
        mounted when it runs from a root: servers/bindversion.py)."""
        return library_path(self.library or self.store)

    def is_built(self) -> bool:
        if self.bind is None:
            return self.library_file.exists()
        library = self.library or self.store
        built = bindversion.BINDS[self.bind].drivers / library / f"dlz_{library}.so"
        return built.exists()

    def body(self, target: Any, connections: int, *,
             library: Path | None = None, extra: Mapping[str, str] | None = None) -> str:
        """The dlz statement (with the update keys before it); `library` replaces the built
        driver (an ASan build), `extra` adds arguments (a test switch)."""
        args = {"connections": str(connections), **self._store_args(target),
                **(self.cache.dlz_args() if self.cache else {}),
                **(self.updates.dlz_args() if self.updates else {}), **(extra or {})}
        keys = self.updates.key_statements() if self.updates else ""
        return keys + dlz_clause(self.name, library or self.library_file, args)

    def client_env(self, target: Any) -> dict[str, str]:
        """The driver's environment besides named.conf (the writer's when the driver takes
        updates): where a password file is (PGPASSFILE), never a password."""
        if self.updates:
            return self._writable_store().dlz_write_access(target, self.options,
                                                           self.updates.zone_keys())[1]
        return self.loader().database.client_env(target)

    def _store_args(self, target: Any) -> dict[str, str]:
        if self.updates:
            return self._writable_store().dlz_write_access(target, self.options,
                                                           self.updates.zone_keys())[0]
        return self._store().dlz_args(target, self.options)

    def _store(self) -> DlzStore:
        loader = self.loader()
        if not isinstance(loader, DlzStore):
            raise UserError(f"the {self.store} store is not read through a DLZ driver")
        return loader

    def _writable_store(self) -> DlzWritableStore:
        loader = self.loader()
        if not isinstance(loader, DlzWritableStore):
            raise UserError(f"the {self.store} store takes no updates through its DLZ driver")
        return loader

    def build(self, target: Any, run_dir: Path, *, threads: int, connections: int,
              port: int | None = None) -> Named:
        # named loads the driver as the service user (base.process).
        require_service_user_reaches(DRIVERS_DIR, "the drivers' directory")
        env = self.client_env(target)
        return Named(run_dir, self.body(target, connections), threads=threads, port=port,
                     env=env or None, bind=self.named_bind())


def stack_frames_of(library: Path) -> re.Pattern[str]:
    """A pattern matching a stack frame in a driver's own code: its shared object, or any C
    file of its folder or of drivers/common (memory-checker reports name one or the other)."""
    sources = [*library.parent.glob("*.c"), *(DRIVERS_DIR / "common").rglob("*.c")]
    names = "|".join(sorted({re.escape(path.stem) for path in sources}))
    folder = re.escape(library.parent.name)
    return re.compile(rf"{re.escape(library.name)}|drivers/(common|{folder})/|[(/]({names})\.c:")
