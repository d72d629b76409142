"""The registry: every DNS server the suite can measure, one line each, in report order; and
the servers package's public face, the only names bench/ imports from it (__all__,
tests/test_layers.py).

Each line names a server (the `--server` value), the store that feeds it (loaders/<store>.py)
and, for a DLZ driver, what distinguishes it (drivers/<store>/ by default). Everything that
lists servers or stores (the CLI, the runner, the report's column order, the tests) reads
this table; nothing else names a backend. What a server can do is asked of its kind
(servers/kind.py's ServerKind), never read from its name or type.

`registered(row, ...)` adds rows for the length of a block (a test's, or a script that runs
the commands in its own process with a row of its own): every command then knows them as if
their lines were here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

from base.errors import UserError
from servers import bindversion
from servers.bindversion import BINDS
from servers.bindversion import choose as choose_bind
from servers.bindversion import selected as selected_bind
from servers.bindversion import version_text as named_version
from servers.dlz import DLZ_PATH_CLASSES, DLZ_SIGNED_PATH_CLASSES, DlzCache, DlzNamed
from servers.dnsserver import DnsServer, kernel_rmem_max, non_recursive_query, set_listen_address
from servers.external import ExternalServer, Target, parse_target
from servers.kind import ServerKind
from servers.knot import KnotServer
from servers.native import NativeNamed
from servers.nsd import NsdServer
from servers.pdns import PDNS_CLASSES, PdnsBindServer, PdnsServer

# What bench/ may import from this package (tests/test_layers.py holds it to this list).
# SERVERS is not among them: bench/ reads the registry through registered_servers() and the
# functions below, which see registered() rows too.
__all__ = [
    # the registry
    "REFERENCE", "DLZ_CEILING", "BIND_MARK", "server_names", "base_name",
    "get_server", "store_names", "parse_store_list", "selected_servers", "group_of",
    "registered_kind",
    "report_order", "registered", "registered_servers", "software_keys", "software_versions",
    # the capability types: a server kind, a server process, a server the suite did not start
    "ServerKind", "DnsServer", "ExternalServer", "Target", "parse_target",
    "set_listen_address", "non_recursive_query", "kernel_rmem_max",
    # BIND's DLZ path's known differences from native BIND (bench/verify)
    "DLZ_PATH_CLASSES", "DLZ_SIGNED_PATH_CLASSES",
    # which BIND runs (servers/bindversion.py)
    "BINDS", "choose_bind", "selected_bind", "named_version",
]

# kib_per_record: named's resident memory per record, from `startup` at a million zones of 10
# records (docs/results/startup-2026-11-21: native 11,235 MiB, memory 2,320 MiB), rounded up.
SERVERS: tuple[ServerKind, ...] = (
    NativeNamed("native", store="native", kib_per_record=1.2),
    # Reads its file at dlz_create.
    DlzNamed("memory", store="memory", needs_reload=True, kib_per_record=0.25),
    DlzNamed("pg", store="pg"),
    DlzNamed("mysql", store="mysql"),
    DlzNamed("ldap", store="ldap"),
    DlzNamed("fs", store="fs"),
    # The bdb driver keeps the file it opened; a load renames a new file into place.
    DlzNamed("bdb-btree", store="bdb", options={"access": "btree"}, needs_reload=True),
    DlzNamed("bdb-hash", store="bdb", options={"access": "hash"}, needs_reload=True),
    DlzNamed("bdbhpt-t", store="bdbhpt", options={"mode": "transactional"}),
    DlzNamed("bdbhpt-c", store="bdbhpt", options={"mode": "concurrent"}),
    # A private environment reads a file the loader replaces by rename.
    DlzNamed("bdbhpt-p", store="bdbhpt", options={"mode": "private"}, needs_reload=True),
    # The database drivers answering from the core's coherent cache, each store telling it of
    # every change within a second (docs/method/cache.md): a group of their own, which
    # `make bench` (the plain rows, what the database costs) leaves out.
    # PostgreSQL: LISTEN/NOTIFY from the store's triggers.
    DlzNamed("pg+cache", store="pg", library="pg", cache=DlzCache()),
    # MariaDB has no push channel: a change log its triggers write, polled every 100 ms.
    DlzNamed("mysql+cache", store="mysql", library="mysql", cache=DlzCache()),
    # slapd: RFC 4533 content synchronisation (the syncprov overlay).
    DlzNamed("ldap+cache", store="ldap", library="ldap", cache=DlzCache()),
    # PowerDNS 4.7 over its own schemas and files; caches off (the backend itself) and its
    # default caches ("-cached").
    PdnsServer("pdns-gpgsql", store="pdns_pg"),
    PdnsServer("pdns-gpgsql-cached", store="pdns_pg", cached=True),
    PdnsServer("pdns-gmysql", store="pdns_mysql"),
    PdnsServer("pdns-gmysql-cached", store="pdns_mysql", cached=True),
    # The lmdb backend adds one class of its own (a NUL octet inside a label).
    PdnsServer("pdns-lmdb", store="pdns_lmdb",
               answer_classes=(*PDNS_CLASSES, "pdns-lmdb-nul-label")),
    PdnsBindServer("pdns-bind", store="native"),
    # The same zone files as native BIND.
    NsdServer("nsd", store="native"),
    KnotServer("knot", store="native"),
)

# The servers every comparison is made against: native BIND on the same data, and the
# memory driver (the ceiling of any DLZ driver on this BIND).
REFERENCE = "native"
DLZ_CEILING = "memory"

# Every registered row by name, in report order: SERVERS, then any registered() adds.
_BY_NAME = {server.name: server for server in SERVERS}

# A `named` row run by another BIND than the run's is NAME@VERSION ("pg@9.20"): one run then
# interleaves both BINDs' rounds and pairs their QPS round by round (issue 26: with each BIND
# run as a block, the machine's drift landed on one side and rankings flipped on a rerun).
BIND_MARK = "@"


def server_names() -> list[str]:
    return list(_BY_NAME)


def registered_servers() -> list[ServerKind]:
    """Every registered row, in report order."""
    return list(_BY_NAME.values())


@contextmanager
def registered(*rows: ServerKind) -> Iterator[None]:
    """The registry with `rows` added after its own lines until the block ends: every command
    run in this process meanwhile knows them by name, as lines of SERVERS. A row's name must
    be new and plain (no NAME@VERSION); its store must be one of loaders/."""
    names = [row.name for row in rows]
    for row in rows:
        if row.name in _BY_NAME or names.count(row.name) > 1 or not row.name \
                or base_name(row.name) != row.name:
            raise UserError(f"cannot register a server named {row.name!r}: the name is taken "
                            "or not plain")
        row.loader()  # an unknown store is refused here, not in the middle of a command
    _BY_NAME.update({row.name: row for row in rows})
    try:
        yield
    finally:
        for row in rows:
            _BY_NAME.pop(row.name, None)


def software_keys() -> list[str]:
    """The metadata keys of the software the registered servers run, in registry order."""
    return list(dict.fromkeys(server.version_key for server in _BY_NAME.values()))


def software_versions() -> dict[str, str]:
    """Each software the registered servers run (software_keys) -> its version here."""
    first = {}
    for server in _BY_NAME.values():
        first.setdefault(server.version_key, server)
    return {key: server.software_version() for key, server in first.items()}


def base_name(name: str) -> str:
    """The registry row a name is (itself, or NAME of NAME@VERSION)."""
    return name.partition(BIND_MARK)[0]


def get_server(name: str) -> ServerKind:
    base, mark, version = name.partition(BIND_MARK)
    server = _BY_NAME.get(base)
    if server is None:
        raise UserError(f"unknown server {name!r} (known: {', '.join(_BY_NAME)}; a BIND row "
                        f"on another BIND: NAME{BIND_MARK}VERSION)")
    if not mark:
        return server
    if not server.runs_bind:
        raise UserError(f"{name}: only named's rows (native and the DLZ drivers) run another "
                        f"BIND, and {base} is not named")
    if version not in bindversion.BINDS:
        raise UserError(f"{name}: BIND {version!r} is not one this suite runs "
                        f"({', '.join(bindversion.BINDS)})")
    return dataclasses.replace(server, name=name, bind=version)


def store_names() -> list[str]:
    """Every store that feeds a server, in registry order."""
    return list(dict.fromkeys(server.store for server in _BY_NAME.values()))


def parse_store_list(text: str) -> list[str]:
    """'all' or a comma list of store names -> store names, checked."""
    names = store_names() if text == "all" else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in store_names()]
    if unknown or not names:
        raise UserError(f"unknown store {', '.join(unknown) or repr(text)} "
                        f"(known: {', '.join(store_names())})")
    return names


def selected_servers(text: str) -> list[str]:
    """The servers a --servers value names: 'all' is every built one, in registry order; a
    named one that is not built is an error."""
    if text == "all":
        return [s.name for s in _BY_NAME.values() if s.is_built()]
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError(f"no server named in {text!r}")
    for name in names:
        if not get_server(name).is_built():
            raise UserError(f"server {name} is not built (run `make build`)")
    return names


def registered_kind(name: str) -> ServerKind | None:
    """The registered row of a server's name (NAME@VERSION: NAME's); None for a name no
    longer registered (old results)."""
    return _BY_NAME.get(base_name(name))


def group_of(name: str) -> str:
    """The results table's column group of a server ("" for a name no longer registered)."""
    server = _BY_NAME.get(base_name(name))
    return server.group if server is not None else ""


def report_order(name: str) -> tuple[int, str]:
    """Sort key: registry order (a row on another BIND beside its own), unknown names (from
    old results) last, alphabetically."""
    names = server_names()
    base = base_name(name)
    return (names.index(base) if base in names else len(names), name)
