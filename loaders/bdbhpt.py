"""The BDBHPT store: zone, data, transfer and client databases in a Berkeley DB environment.

Layout (schemas/bdb.md): one environment home per driver mode, because an environment's regions
fix its locking mode (a reader cannot join a transactional environment in CDB mode, BDB1540),
and a private-mode reader must never see the file change under it:

    <target>/transactional/   DB_CONFIG, dns.db, __db.* regions, log.*   (bdbhpt-t)
    <target>/concurrent/      DB_CONFIG, dns.db, __db.* regions          (bdbhpt-c)
    <target>/private/         DB_CONFIG, dns.db                          (bdbhpt-p)

dns.db holds these databases (keys and values ASCII, single spaces):

    dns_zone    <zone>          -> <gen>               findzonedb: one get
    dns_data    <gen> <owner>   -> record lines         lookup: get dns_zone, then one get
    dns_xfr     <gen>           -> owner key lines      allnodes
    dns_client  <zone>          -> client address lines allowzonexfr: one get
    dns_retired <gen>           -> unix time            loader bookkeeping only

A zone is replaced by writing its nodes under a fresh generation id and then pointing dns_zone at
it with one put, which is atomic in every mode (CDB has no transactions); the replaced generation
is deleted RETIRE_GRACE_SECONDS later, so a lookup that read the old id still finds its data.

The three homes must hold the same zones. A first load (no home has dns.db yet) writes dns.db
once, in a private staging home with neither locks nor a log, then copies it into every home
and renames the copies in together: a third of the writes and none of the logging of writing
each home. A load over existing homes (the online path) writes each zone to the three homes in
turn, with Ctrl-C held until the zone is in all three, so an interrupted load leaves the homes
in step. An interrupted first load leaves no dns.db at all (nothing was there to lose).
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import dns.name
from berkeleydb import db

from base.errors import UserError
from base.process import give_to_service_user
from databases.berkeley import db_stat_reading
from databases.database import CacheReading, DirectoryDatabase
from loaders.berkeley import (
    ACL_VALUE,
    PreparedZone,
    decode_lines,
    decode_records,
    encode_lines,
    prepare_zone,
)
from loaders.loader import Loader, interrupts_deferred
from loaders.writes import StoreWriter, ZoneRewriter
from zonedata.model import Zone, key_to_name, name_key

DATA_FILE = "dns.db"
STAGING = ".staging"  # the first load's home, under the target
MODES = ("transactional", "concurrent", "private")

# The DB_ENV->open flags of each mode: the loader uses exactly what the driver uses.
ENV_FLAGS = {
    # DB_REGISTER + DB_RECOVER: recovery runs only if a process died inside the environment.
    "transactional": (db.DB_CREATE | db.DB_INIT_TXN | db.DB_INIT_LOG | db.DB_INIT_LOCK
                      | db.DB_INIT_MPOOL | db.DB_REGISTER | db.DB_RECOVER | db.DB_THREAD),
    "concurrent": db.DB_CREATE | db.DB_INIT_CDB | db.DB_INIT_MPOOL | db.DB_THREAD,
    "private": db.DB_CREATE | db.DB_PRIVATE | db.DB_INIT_MPOOL | db.DB_THREAD,
}

DATABASES = {
    "dns_zone": db.DB_HASH,
    "dns_data": db.DB_HASH,
    "dns_xfr": db.DB_HASH,
    "dns_client": db.DB_HASH,
    "dns_retired": db.DB_BTREE,
}

CACHE_BYTES = 256 * 1024 * 1024
_CACHE = f"set_cachesize 0 {CACHE_BYTES} 1"
# Thread tracking, which the driver's DB_ENV->failchk needs in every process of the environment
# (a writer killed inside its transaction is aborted by it, drivers/bdbhpt/dlz_bdbhpt.c): only
# DB_CONFIG reaches every DB_ENV->open, this loader's and the fault's writer's included. A
# count, not a limit: it sizes the table of threads (named's workers, one per loader process;
# named, whose is_alive knows the dead, reuses the slots of processes gone).
THREAD_COUNT = 1024
# Read by every process that opens (or creates) the environment, so sizes never disagree.
DB_CONFIG = {
    "transactional": [_CACHE, "set_lk_max_locks 100000", "set_lk_max_objects 100000",
                      "set_lk_max_lockers 10000", "set_lk_detect DB_LOCK_DEFAULT",
                      "set_flags DB_TXN_WRITE_NOSYNC", "log_set_config DB_LOG_AUTO_REMOVE",
                      f"set_thread_count {THREAD_COUNT}"],
    "concurrent": [_CACHE],
    "private": [_CACHE],
}

# Region and database files: the suite's, until a driver is pointed at a home (dlz_args),
# which then becomes the service user's, whom named runs as (base.process).
FILE_MODE = 0o644

RETIRE_GRACE_SECONDS = 10.0
_DEADLOCK_RETRIES = 20


def data_key(gen: str, owner: str) -> bytes:
    return f"{gen} {owner}".encode("ascii")


class _Home:
    """One environment home opened in its mode, for writing (load) or reading (read_back)."""

    def __init__(self, home: Path, mode: str, write: bool) -> None:
        self.home = home
        self.mode = mode
        self.write = write
        self.file = DATA_FILE
        self.dirty = False  # a zone's writes are in progress (private mode: file not usable)
        if write:
            _prepare_home(home, mode)
            if mode == "private":
                # A private reader has no locks and its own cache: write a copy, rename it in.
                self.file = f"{DATA_FILE}.new-{os.getpid()}"
                if (home / DATA_FILE).exists():
                    shutil.copyfile(home / DATA_FILE, home / self.file)
        self.env = db.DBEnv()
        self.env.open(str(home), ENV_FLAGS[mode], FILE_MODE)
        self.dbs: dict[str, db.DB] = {}
        try:
            for name, method in DATABASES.items():
                self.dbs[name] = self._open_db(name, method)
        except BaseException:
            self._close_handles()
            raise

    def _open_db(self, name: str, method: int) -> db.DB:
        handle = db.DB(self.env)
        handle.set_get_returns_none(2)
        if self.write:
            flags = db.DB_CREATE | (db.DB_AUTO_COMMIT if self.mode == "transactional" else 0)
        else:
            flags, method = db.DB_RDONLY | db.DB_THREAD, db.DB_UNKNOWN
        handle.open(self.file, name, method, flags, FILE_MODE)
        return handle

    def _transaction(self) -> db.DBTxn | None:
        return self.env.txn_begin() if self.mode == "transactional" else None

    def _retrying(self, write: Callable[[db.DBTxn | None], None]) -> None:
        """Run write in one transaction (transactional mode), again if it lost a deadlock."""
        for attempt in range(_DEADLOCK_RETRIES):
            txn = self._transaction()
            try:
                write(txn)
            except db.DBLockDeadlockError:
                if txn is None or attempt == _DEADLOCK_RETRIES - 1:
                    raise
                txn.abort()
                continue
            except BaseException:
                if txn is not None:
                    txn.abort()
                raise
            if txn is not None:
                txn.commit()
            return

    def replace_zone(self, zone: PreparedZone) -> None:
        gen = secrets.token_hex(8)
        self.dirty = True
        try:
            self._retrying(lambda txn: self._write_zone(zone, gen, txn))
        except BaseException:
            if self.mode == "concurrent":
                self._forget_partial(gen)
            raise
        self.dirty = False

    def _write_zone(self, zone: PreparedZone, gen: str, txn: db.DBTxn | None) -> None:
        dbs = self.dbs
        zone_key = zone.key.encode("ascii")
        # The owner list goes first, so that the purge finds every row of a partial write.
        dbs["dns_xfr"].put(gen.encode(), encode_lines(n.key for n in zone.nodes), txn=txn)
        for node in zone.nodes:
            dbs["dns_data"].put(data_key(gen, node.key), node.value, txn=txn)
        dbs["dns_client"].put(zone_key, ACL_VALUE, txn=txn)
        old = dbs["dns_zone"].get(zone_key, txn=txn)
        dbs["dns_zone"].put(zone_key, gen.encode(), txn=txn)
        if old is not None:
            dbs["dns_retired"].put(old, f"{time.time():.3f}".encode(), txn=txn)

    def write_nodes(self, zone: PreparedZone) -> None:
        """The zone's nodes written in place in its live generation, only those that differ
        (and its owner list if it changed), in one transaction; a new zone as replace_zone
        writes it."""
        self._retrying(lambda txn: self._write_nodes(zone, txn))

    def _write_nodes(self, zone: PreparedZone, txn: db.DBTxn | None) -> None:
        dbs = self.dbs
        gen = dbs["dns_zone"].get(zone.key.encode("ascii"), txn=txn)
        if gen is None:
            self._write_zone(zone, secrets.token_hex(8), txn)
            return
        old_owners = decode_lines(dbs["dns_xfr"].get(gen, txn=txn) or b"")
        new = {node.key: node.value for node in zone.nodes}
        for owner in set(old_owners) - new.keys():
            _delete(dbs["dns_data"], data_key(gen.decode(), owner), txn)
        for owner, value in new.items():
            key = data_key(gen.decode(), owner)
            if dbs["dns_data"].get(key, txn=txn) != value:
                dbs["dns_data"].put(key, value, txn=txn)
        if old_owners != list(new):
            dbs["dns_xfr"].put(gen, encode_lines(new), txn=txn)

    def drop_zone(self, zone_key: str) -> None:
        """The zone gone in one transaction; its generation retired (purged later)."""
        def drop(txn: db.DBTxn | None) -> None:
            key = zone_key.encode("ascii")
            gen = self.dbs["dns_zone"].get(key, txn=txn)
            _delete(self.dbs["dns_zone"], key, txn)
            _delete(self.dbs["dns_client"], key, txn)
            if gen is not None:
                self.dbs["dns_retired"].put(gen, f"{time.time():.3f}".encode(), txn=txn)
        self._retrying(drop)

    def zone(self, zone_key: str) -> Zone | None:
        """One zone as the driver reads it (None: not there)."""
        gen = self.dbs["dns_zone"].get(zone_key.encode("ascii"))
        if gen is None:
            return None
        records = []
        for owner in decode_lines(self.dbs["dns_xfr"].get(gen) or b""):
            value = self.dbs["dns_data"].get(data_key(gen.decode(), owner))
            records.extend(decode_records(key_to_name(owner), value))
        return Zone(key_to_name(zone_key), records)

    def _forget_partial(self, gen: str) -> None:
        """Mark the rows of a failed CDB write for the next purge (no rollback without txns)."""
        try:
            self.dbs["dns_retired"].put(gen.encode(), b"0")
        except db.DBError:
            pass  # the original error is what the caller needs to see

    def purge_retired(self, grace: float) -> None:
        now = time.time()
        for gen, when in _all_items(self.dbs["dns_retired"]):
            if now - float(when) >= grace:
                self._retrying(lambda txn, gen=gen: self._delete_generation(gen, txn))

    def _delete_generation(self, gen: bytes, txn: db.DBTxn | None) -> None:
        owners = self.dbs["dns_xfr"].get(gen, txn=txn)
        for owner in decode_lines(owners or b""):
            _delete(self.dbs["dns_data"], data_key(gen.decode(), owner), txn)
        _delete(self.dbs["dns_xfr"], gen, txn)
        _delete(self.dbs["dns_retired"], gen, txn)

    def zones(self) -> Iterator[Zone]:
        for zone_key, gen in sorted(_all_items(self.dbs["dns_zone"])):
            owners = decode_lines(self.dbs["dns_xfr"].get(gen) or b"")
            records = []
            for owner in owners:
                value = self.dbs["dns_data"].get(data_key(gen.decode(), owner))
                records.extend(decode_records(key_to_name(owner), value))
            yield Zone(key_to_name(zone_key.decode("ascii")), records)

    def _close_handles(self) -> None:
        for handle in self.dbs.values():
            handle.close()
        self.dbs = {}
        self.env.close()

    def close(self) -> None:
        self._close_handles()
        if self.write and self.mode == "private":
            if self.dirty:
                (self.home / self.file).unlink(missing_ok=True)
            else:
                os.replace(self.home / self.file, self.home / DATA_FILE)


def _all_items(handle: db.DB) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of a database, read whole and the cursor closed before the caller
    writes: in CDB a thread holding a read cursor must not write."""
    cursor = handle.cursor()
    try:
        items = []
        item = cursor.first()
        while item is not None:
            items.append(item)
            item = cursor.next()
    finally:
        cursor.close()
    return items


def _delete(handle: db.DB, key: bytes, txn: db.DBTxn | None) -> None:
    try:
        handle.delete(key, txn=txn)
    except db.DBNotFoundError:
        pass  # already gone: a purge may be repeated after an interrupted one


def _prepare_home(home: Path, mode: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    config = home / "DB_CONFIG"
    if not config.exists():
        config.write_text("".join(f"{line}\n" for line in DB_CONFIG[mode]))


class _Homes:
    """The three homes of a store, open for one load."""

    def __init__(self, target: Path) -> None:
        self.homes: list[_Home] = []
        try:
            for mode in MODES:
                self.homes.append(_Home(target / mode, mode, write=True))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for home in self.homes:
            home.close()

    def __enter__(self) -> list[_Home]:
        return self.homes

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _has_data(target: Path) -> bool:
    return any((Path(target) / mode / DATA_FILE).exists() for mode in MODES)


def _load_online(zones: Iterable[Zone], target: Path) -> None:
    """Each zone into the three homes in turn, while named may be reading them."""
    with _Homes(target) as homes:
        for home in homes:
            # A private reader never sees this file change: no grace needed there.
            home.purge_retired(0.0 if home.mode == "private" else RETIRE_GRACE_SECONDS)
        for zone in zones:
            prepared = prepare_zone(zone)
            with interrupts_deferred():  # the zone goes into all three homes or none
                for home in homes:
                    home.replace_zone(prepared)


def _load_first(zones: Iterable[Zone], target: Path) -> None:
    """Every zone into one staged dns.db, then that file into the three homes."""
    staging = Path(target) / STAGING
    shutil.rmtree(staging, ignore_errors=True)  # left by a first load that was killed
    try:
        home = _Home(staging, "private", write=True)
        try:
            for zone in zones:
                home.replace_zone(prepare_zone(zone))
        finally:
            home.close()
        _install(staging / DATA_FILE, Path(target))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _install(staged: Path, target: Path) -> None:
    """Copy a staged dns.db into every home, then rename the copies in at once."""
    _reset_lsns(staged)
    copies: list[tuple[Path, Path]] = []
    try:
        for mode in MODES:
            home = target / mode
            _prepare_home(home, mode)
            copy = home / f"{DATA_FILE}.new-{os.getpid()}"
            copies.append((copy, home / DATA_FILE))
            shutil.copyfile(staged, copy)
        with interrupts_deferred():
            for copy, final in copies:
                os.replace(copy, final)
    finally:
        for copy, _ in copies:
            copy.unlink(missing_ok=True)


def _reset_lsns(path: Path) -> None:
    """Zero the page LSNs of a file written without a log (DB_ENV->lsn_reset), so that the
    transactional environment, whose log never saw those pages, can read and update it.

    Done in a private environment of its own: the transactional environment's shared cache
    would remember the file under its temporary name and fail to open it once renamed.
    """
    env = db.DBEnv()
    env.open(str(path.parent), ENV_FLAGS["private"], FILE_MODE)
    try:
        env.lsn_reset(path.name)
    finally:
        env.close()

class BdbhptWriter(ZoneRewriter):
    """Writes into the three homes, each change one transaction per home (the transactional
    home's is a Berkeley DB transaction; CDB's puts are each atomic; the private home's copy
    is renamed in when the writer closes, as a private-mode reader only reads its file at
    start). Ctrl-C waits until a change is in all three homes."""

    def __init__(self, target: Path) -> None:
        self.homes = _Homes(target)
        for home in self.homes.homes:
            home.purge_retired(0.0 if home.mode == "private" else RETIRE_GRACE_SECONDS)

    def read_zone(self, origin: dns.name.Name) -> Zone | None:
        return self.homes.homes[0].zone(name_key(origin))

    def write_zone(self, zone: Zone) -> None:
        prepared = prepare_zone(zone)
        with interrupts_deferred():
            for home in self.homes.homes:
                home.write_nodes(prepared)

    def drop_zone(self, origin: dns.name.Name) -> None:
        with interrupts_deferred():
            for home in self.homes.homes:
                home.drop_zone(name_key(origin))

    def close(self) -> None:
        self.homes.close()


def read_mode(target: Path, mode: str) -> list[Zone]:
    """Every zone of one mode's home, read as the driver's allnodes reads it."""
    home = _Home(Path(target) / mode, mode, write=False)
    try:
        return list(home.zones())
    finally:
        home.close()


def _cache_reading(target: Path, options: Mapping[str, str]) -> CacheReading:
    """The cache of the environment of the driver's `mode`: readable from outside in the
    shared-region modes; a private environment's cache lives in named's memory alone."""
    mode = options["mode"]
    if mode == "private":
        return CacheReading("Berkeley DB private environment: a cache inside named, not "
                            "readable from outside", CACHE_BYTES)
    return db_stat_reading(Path(target) / mode, CACHE_BYTES)


class BdbhptLoader(Loader[Path]):
    name = "bdbhpt"
    database = DirectoryDatabase(name, _cache_reading)

    def load(self, zones: Iterable[Zone], target: Path) -> None:
        if _has_data(target):
            _load_online(zones, target)
        else:
            _load_first(zones, target)

    def read_back(self, target: Path) -> Iterator[Zone]:
        """The transactional home's zones, checked against the two other homes."""
        if not _has_data(target):
            return  # never loaded, or a first load was interrupted
        zones = read_mode(target, "transactional")
        expected = {z.key: z.canonical() for z in zones}
        for mode in MODES[1:]:
            if {z.key: z.canonical() for z in read_mode(target, mode)} != expected:
                raise RuntimeError(f"bdbhpt {mode} home disagrees with the transactional one")
        yield from zones

    def writer(self, target: Path) -> StoreWriter:
        if not _has_data(target):
            raise UserError(f"the bdbhpt store at {target} holds no data to write into")
        return BdbhptWriter(target)

    def dlz_args(self, target: Path, options: Mapping[str, str]) -> dict[str, str]:
        """The home of the driver's `mode` (transactional, concurrent or private), handed to
        the service user: named writes its region files (locks, cache) and, with updates, its
        log and data file."""
        mode = options["mode"]
        home = (Path(target) / mode).resolve()
        give_to_service_user(home, tree=True)
        return {"mode": mode, "env": str(home)}

    def dlz_write_access(self, target: Path, options: Mapping[str, str], zones: Sequence[str]
                         ) -> tuple[dict[str, str], dict[str, str]]:
        """The same home: the driver writes updates into its mode's environment as the loader
        does (schemas/bdb.md), with file permissions that cannot tell one zone from another;
        a private environment, which has no locking, takes none."""
        if options["mode"] == "private":
            raise UserError("the bdbhpt store's private mode takes no updates while named "
                            "serves (no locking): use mode transactional or concurrent")
        return self.dlz_args(target, options), {}

    def writers_hold_locks(self, options: Mapping[str, str]) -> bool:
        """A transactional writer holds a zone's write lock for its transaction."""
        return options.get("mode") == "transactional"

    def zone_lock_holder(self, target: Path, options: Mapping[str, str],
                         zone_key: str) -> list[str]:
        """hold_zone_lock in a process of its own (its death must not be the caller's)."""
        if not self.writers_hold_locks(options):
            raise UserError(f"the bdbhpt store's {options.get('mode')} mode has no writer "
                            "that holds locks")
        return [sys.executable, "-c", _HOLDER, self.dlz_args(target, options)["env"], zone_key]


_HOLDER = ("import sys; from loaders.bdbhpt import hold_zone_lock; "
           "hold_zone_lock(sys.argv[1], sys.argv[2])")


def hold_zone_lock(home: Path, zone_key: str) -> None:
    """A writer stuck inside its transaction, for `bench faults`: in the transactional home,
    write-lock the zone's dns_zone entry (its page) in a transaction, print "holding", then
    wait for a line on stdin and abort the transaction (a writer that stalls and gives up). A
    writer SIGKILLed while it waits dies holding the lock, as a loader killed mid-zone does."""
    env = db.DBEnv()
    env.open(str(home), ENV_FLAGS["transactional"], FILE_MODE)
    zones = db.DB(env)
    zones.open(DATA_FILE, "dns_zone", db.DB_UNKNOWN, db.DB_AUTO_COMMIT)
    txn = env.txn_begin()
    key = zone_key.encode("ascii")
    zones.put(key, zones.get(key, txn=txn, flags=db.DB_RMW), txn=txn)
    print("holding", flush=True)
    input()
    txn.abort()
    zones.close()
    env.close()


LOADER = BdbhptLoader()
