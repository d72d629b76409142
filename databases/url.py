"""A store on a database server the suite did not start: `--store-url STORE=URL`.

`pg=postgresql://user@host:port/db` or `mysql=mysql://user@host:port/db`: the store's tables
go into that database, which the suite treats as lent to it;
`ldap=ldap://binddn@host:port/suffix`: the store's entries go under that suffix DN, the
subtree lent to it. It starts and stops no server there, deletes nothing it did not create,
and refuses a database (a subtree) holding objects it did not create unless told to share it
(`--store-url-overwrite`). A password may be in the URL; it is never printed:
every text naming a URL (errors, logs, results) uses `redacted()`.

Which store takes which scheme is the store's own (Store.url_schemes); how it reaches such a
server, the store's (Store.external). `StoreUrls.server` is the one place a command's store
server is chosen: private (Store.server) or lent (Store.external).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from base.errors import UserError
from base.netns import DatabaseHost

if TYPE_CHECKING:
    from loaders.store import Store

# user:password@ in an authority, for texts that are not (yet) a parsed URL.
_PASSWORD = re.compile(r"(//[^/@:]*:)[^/]*@")


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

    def redacted(self) -> str:
        """The URL as given, its password (if any) shown as ***."""
        user = _quoted(self.user) if self.user else ""
        if self.password is not None:
            user += ":***"
        host = urllib.parse.quote(self.host, safe="") if "/" in self.host else self.host
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        port = f":{self.port}" if self.port is not None else ""
        return f"{self.scheme}://{user + '@' if user else ''}{host}{port}/{_quoted(self.database)}"

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


def parse_store_url(text: str) -> StoreUrl:
    """'STORE=URL' -> StoreUrl, checked against the store's schemes (no network yet)."""
    from loaders import get_store

    name, sep, url = text.partition("=")
    if not sep or not name or not url:
        raise UserError(f"--store-url {redact(text)}: expected STORE=URL, e.g. "
                        "pg=postgresql://user@host:5432/dlzbench")
    try:
        store = get_store(name)
    except UserError as exc:
        raise UserError(f"--store-url {redact(text)}: {exc}") from None
    if not store.url_schemes:
        raise UserError(f"--store-url {redact(text)}: the {name} store cannot use a server the "
                        "suite did not start (pg, mysql and ldap can)")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in store.url_schemes:
        raise UserError(f"--store-url {redact(text)}: the {name} store takes "
                        f"{' or '.join(s + '://' for s in store.url_schemes)} URLs, "
                        f"not {parts.scheme or 'this'}")
    parsed = _from_parts(name, parts, redact(text))
    store.check_url(parsed)
    return parsed


def _from_parts(store: str, parts: urllib.parse.SplitResult, shown: str) -> StoreUrl:
    try:
        port = parts.port
    except ValueError:
        raise UserError(f"--store-url {shown}: the port is not a number from 1 to 65535") \
            from None
    host = _host(parts.netloc.rpartition("@")[2], port)
    # What the path names (a database, a suffix DN) is checked by the store (Store.check_url).
    database = urllib.parse.unquote(parts.path.removeprefix("/"))
    if not host:
        raise UserError(f"--store-url {shown}: names no host")
    if parts.query or parts.fragment:
        raise UserError(f"--store-url {shown}: takes no ?options or #fragment")
    if port == 0:
        raise UserError(f"--store-url {shown}: the port is not a number from 1 to 65535")
    unquote = urllib.parse.unquote
    return StoreUrl(store, parts.scheme, host, port, database,
                    unquote(parts.username) if parts.username else None,
                    unquote(parts.password) if parts.password is not None else None)


def _host(hostport: str, port: int | None) -> str:
    """The host of HOST[:PORT], unquoted (a socket is written %2Frun%2Fpostgresql),
    without the brackets of an IPv6 address; case kept (a directory's name has case)."""
    host = hostport.rsplit(":", 1)[0] if port is not None else hostport
    return urllib.parse.unquote(host.removeprefix("[").removesuffix("]"))


@dataclass(frozen=True)
class StoreUrls:
    """The --store-url choices of one command: store name -> its URL; `overwrite` lets the
    suite add its tables to a database that holds other objects."""

    urls: Mapping[str, StoreUrl] = field(default_factory=dict)
    overwrite: bool = False
    # store -> the server's name and version, once checked().
    servers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, texts: list[str], *, overwrite: bool = False) -> StoreUrls:
        urls: dict[str, StoreUrl] = {}
        for text in texts:
            url = parse_store_url(text)
            if url.store in urls:
                raise UserError(f"--store-url {url}: the {url.store} store has a URL already "
                                f"({urls[url.store]})")
            urls[url.store] = url
        return cls(urls, overwrite)

    def checked(self) -> StoreUrls:
        """These URLs once every server has answered and every database may be written
        (UserError naming the first that may not), with the servers' versions."""
        from loaders import get_store

        servers = {name: get_store(name).check_external(url, overwrite=self.overwrite)
                   for name, url in self.urls.items()}
        return StoreUrls(self.urls, self.overwrite, servers)

    def server(self, store: Store, run_dir: Path, *,
               db_host: DatabaseHost | None = None) -> AbstractContextManager[Any]:
        """The store's server for a command: the one at its URL if it has one, else its
        private server under run_dir."""
        url = self.urls.get(store.name)
        if url is None:
            return store.server(run_dir, db_host=db_host)
        if db_host is not None:
            raise url.error("the suite cannot move a server it did not start onto a database "
                            "host of its own (--db-host netns)")
        return store.external(url, overwrite=self.overwrite)

    def place(self, store: Store, directory: Path) -> str:
        """Where the store's data goes, for a progress line: its URL or its directory."""
        url = self.urls.get(store.name)
        return url.redacted() if url is not None else str(directory)

    def described(self) -> dict[str, str]:
        """store -> URL without password (and its server's version), for results' metadata."""
        return {name: url.redacted() + (f" ({self.servers[name]})" if name in self.servers
                                         else "")
                for name, url in self.urls.items()}


PRIVATE = StoreUrls()


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
