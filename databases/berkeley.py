"""Berkeley DB files in a directory: no server, and a cache that is either private to the
process that opens the files (named's driver) or an environment's shared memory pool, which
Berkeley DB's own statistics tool reads from outside."""

from __future__ import annotations

import re
from pathlib import Path

from base.errors import UserError
from base.process import run_checked
from databases.database import CacheReading

# Berkeley DB's own statistics tool (Debian's db-util), for environments with shared regions.
DB_STAT = "/usr/bin/db_stat"
# db_stat prints a count of ten million or more as whole millions with an "M" (__db_dl).
_POOL_COUNT = r"^(\d+)(M?)\s+Requested pages {} in the cache"
_FOUND = re.compile(_POOL_COUNT.format("found"), re.M)
_NOT_FOUND = re.compile(_POOL_COUNT.format("not found"), re.M)


def db_stat_reading(home: Path, configured_bytes: int) -> CacheReading:
    """The memory pool of the environment at home, as `db_stat -m` reports it while other
    processes (named's driver) use it: pages found in the cache and not found."""
    text = run_checked([DB_STAT, "-m", "-h", str(home)], f"db_stat -m -h {home}", timeout=60)
    return CacheReading(f"Berkeley DB memory pool: db_stat -m, requested pages found / not "
                        f"found in the cache ({home.name} environment)", configured_bytes,
                        hits=_pool_count(_FOUND, text), misses=_pool_count(_NOT_FOUND, text))


def _pool_count(pattern: re.Pattern[str], text: str) -> int:
    """The first (pool-wide, before the per-file sections) count the pattern matches."""
    match = pattern.search(text)
    if match is None:
        raise UserError(f"db_stat -m printed no line matching {pattern.pattern!r}")
    return int(match.group(1)) * (1_000_000 if match.group(2) else 1)
