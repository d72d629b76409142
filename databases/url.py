"""A store on a database server the suite did not start: `--store-url STORE=URL`.

`pg=postgresql://user@host:port/db` or `mysql=mysql://user@host:port/db`: the store's tables
go into that database, which the suite treats as lent to it;
`ldap=ldap://binddn@host:port/suffix`: the store's entries go under that suffix DN, the
subtree lent to it. `?key=value&...` after the path are settings of the connection (TLS:
`?sslmode=verify-full&sslrootcert=FILE`), each checked by the store's database (check_url).
It starts and stops no server there, deletes nothing it did not create, and refuses a
database (a subtree) holding objects it did not create unless told to share it
(`--store-url-overwrite`). A password may be in the URL; it is never printed: every text
naming a URL (errors, logs, results) uses `redacted()`.

Which store takes which scheme is its database's (Database.url_schemes, checked by
databases/store_urls.py); how it reaches such a server, its database's (Database.external).
This module knows URLs only: it imports no database and no loader.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field

from base.errors import UserError

# user:password@ in an authority, for texts that are not (yet) a parsed URL.
# A password may hold an unencoded "/" or "@" (postgresql://u:p/w@h/db): everything from the
# first ":" of the authority up to its last "@" is hidden, rather than up to the first "/".
_PASSWORD = re.compile(r"(//[^/@:\s]*:)\S*@")


def redact(text: str) -> str:
    """text with the password of any URL in it replaced by ***."""
    return _PASSWORD.sub(r"\1***@", text)


@dataclass(frozen=True)
class StoreUrl:
    """One parsed --store-url: where the store's database is, and who connects."""

    store: str
    scheme: str
    host: str               # a name, an address, or a unix socket (PostgreSQL: its directory)
    port: int | None        # None: the client library's default
    database: str           # LDAP: the suffix DN of the subtree lent to the suite
    user: str | None = None  # LDAP: the bind DN
    password: str | None = field(default=None, repr=False)
    # ?key=value settings of the connection, in the order given (no secret: shown as given).
    options: tuple[tuple[str, str], ...] = ()

    def redacted(self) -> str:
        """The URL as given, its password (if any) shown as ***."""
        user = _quoted(self.user) if self.user else ""
        if self.password is not None:
            user += ":***"
        host = urllib.parse.quote(self.host, safe="") if "/" in self.host else self.host
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        port = f":{self.port}" if self.port is not None else ""
        query = "?" + urllib.parse.urlencode(self.options, safe="/") if self.options else ""
        return (f"{self.scheme}://{user + '@' if user else ''}{host}{port}/"
                f"{_quoted(self.database)}{query}")

    def __str__(self) -> str:
        return f"{self.store}={self.redacted()}"

    def error(self, what: str) -> UserError:
        """A UserError saying `what` about this URL (its password removed from both)."""
        text = what.strip().splitlines()[0] if what.strip() else "failed"
        if self.password:
            text = text.replace(self.password, "***")
        return UserError(f"--store-url {self}: {redact(text)}")


def _quoted(part: str) -> str:
    """A user name or a path segment of a URL, percent-encoded; the = and , of a DN kept, so
    that an LDAP URL reads back as it was written (cn=admin,dc=example,dc=net@...)."""
    return urllib.parse.quote(part, safe="=,")


def from_parts(store: str, parts: urllib.parse.SplitResult, shown: str) -> StoreUrl:
    """The store's StoreUrl from a split URL whose scheme is checked; `shown` is the
    redacted --store-url for errors."""
    try:
        port = parts.port
    except ValueError:
        raise UserError(f"--store-url {shown}: the port is not a number from 1 to 65535") \
            from None
    host = _host(parts.netloc.rpartition("@")[2], port)
    # What the path names (a database, a suffix DN) is checked by the database (check_url).
    database = urllib.parse.unquote(parts.path.removeprefix("/"))
    if not host:
        raise UserError(f"--store-url {shown}: names no host")
    if parts.fragment:
        raise UserError(f"--store-url {shown}: takes no #fragment")
    if port == 0:
        raise UserError(f"--store-url {shown}: the port is not a number from 1 to 65535")
    unquote = urllib.parse.unquote
    return StoreUrl(store, parts.scheme, host, port, database,
                    unquote(parts.username) if parts.username else None,
                    unquote(parts.password) if parts.password is not None else None,
                    _options(parts.query, shown))


def _options(query: str, shown: str) -> tuple[tuple[str, str], ...]:
    """?key=value&... as (key, value) pairs; a key given twice or a malformed pair is an
    error (which keys a store takes is its database's to say)."""
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=True) \
            if query else []
    except ValueError:
        raise UserError(f"--store-url {shown}: ?{query} is not KEY=VALUE&...") from None
    keys = [key for key, _ in pairs]
    for key in keys:
        if keys.count(key) > 1:
            raise UserError(f"--store-url {shown}: ?{key}= given twice")
    return tuple(pairs)


def _host(hostport: str, port: int | None) -> str:
    """The host of HOST[:PORT], unquoted (a socket is written %2Frun%2Fpostgresql),
    without the brackets of an IPv6 address; case kept (a directory's name has case)."""
    host = hostport.rsplit(":", 1)[0] if port is not None else hostport
    return urllib.parse.unquote(host.removeprefix("[").removesuffix("]"))


def check_lent_database(url: StoreUrl, *, foreign: list[str], clashing: list[str],
                        overwrite: bool) -> None:
    """Refuse a database the suite may not write into: one with a table of the suite's
    tables' names that it did not create (always), or any other object it did not create
    (unless `overwrite`)."""
    if clashing:
        raise url.error(f"database {url.database} holds {listed(clashing)}, not created by "
                        "the suite, where its own tables go; give the suite a database of "
                        "its own")
    if foreign and not overwrite:
        raise url.error(f"database {url.database} holds {len(foreign)} object(s) the suite did "
                        f"not create ({listed(foreign)}); give the suite a database of its "
                        "own, or add --store-url-overwrite to put its tables beside them")


def listed(names: list[str], most: int = 3) -> str:
    """The first `most` names, and how many more."""
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
