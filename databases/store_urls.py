"""The --store-url choices of one command: which stores' databases are lent to the suite, and
the one place a command's store server is chosen, private (Database.server) or lent
(Database.external).

The caller says which stores there are (servers.store_names) and which database each has
(`database_of`, loaders.get_database): the databases never import the loaders that write into
them.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from base.errors import UserError
from base.netns import DatabaseHost
from databases.database import Database
from databases.url import StoreUrl, from_parts, redact

# Store name -> its database; UserError for a name that is no store.
DatabaseOf = Callable[[str], Database[Any]]
T = TypeVar("T")


def read_password_file(text: str) -> tuple[str, str]:
    """'STORE=FILE' -> (store, the first line of FILE): a lent server's password kept off
    the command line, which any local user may read (/proc/PID/cmdline)."""
    store, sep, name = text.partition("=")
    if not sep or not store or not name:
        raise UserError(f"--store-password-file {text}: expected STORE=FILE, e.g. "
                        "pg=/root/pg.password")
    try:
        with open(name, encoding="utf-8") as file:
            password = file.readline().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--store-password-file {text}: cannot read it: {exc}") from None
    if not password:
        raise UserError(f"--store-password-file {text}: holds no password on its first line")
    return store, password


def parse_store_url(text: str, database_of: DatabaseOf, stores: Sequence[str]) -> StoreUrl:
    """'STORE=URL' -> StoreUrl, checked against the schemes of the store's database (no
    network yet); `stores`: every store, for naming those that take a URL."""
    name, sep, url = text.partition("=")
    if not sep or not name or not url:
        raise UserError(f"--store-url {redact(text)}: expected STORE=URL, e.g. "
                        "pg=postgresql://user@host:5432/dlzbench")
    try:
        database = database_of(name)
    except UserError as exc:
        raise UserError(f"--store-url {redact(text)}: {exc}") from None
    if not database.url_schemes:
        raise UserError(f"--store-url {redact(text)}: the {name} store cannot use a server the "
                        f"suite did not start ({_lenders(stores, database_of)} can)")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in database.url_schemes:
        raise UserError(f"--store-url {redact(text)}: the {name} store takes "
                        f"{' or '.join(s + '://' for s in database.url_schemes)} URLs, "
                        f"not {parts.scheme or 'this'}")
    parsed = from_parts(name, parts, redact(text))
    database.check_url(parsed)
    return parsed


def _lenders(stores: Sequence[str], database_of: DatabaseOf) -> str:
    """The stores that take a --store-url, in words: "pg, mysql and ldap"."""
    names = [name for name in stores if database_of(name).url_schemes] or ["none"]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


@dataclass(frozen=True)
class StoreUrls:
    """The --store-url choices of one command: store name -> its URL; `overwrite` lets the
    suite add its tables to a database that holds other objects."""

    urls: Mapping[str, StoreUrl] = field(default_factory=dict)
    overwrite: bool = False
    # store -> the server's name and version, once checked().
    servers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, texts: list[str], database_of: DatabaseOf, stores: Sequence[str], *,
              overwrite: bool = False, password_files: Sequence[str] = ()) -> StoreUrls:
        """texts: the --store-url values; password_files: the --store-password-file values
        (STORE=FILE), each giving the password of that store's URL."""
        urls: dict[str, StoreUrl] = {}
        for text in texts:
            url = parse_store_url(text, database_of, stores)
            if url.store in urls:
                raise UserError(f"--store-url {url}: the {url.store} store has a URL already "
                                f"({urls[url.store]})")
            urls[url.store] = url
        for text in password_files:
            store, password = read_password_file(text)
            url = urls.get(store)
            if url is None:
                raise UserError(f"--store-password-file {text}: no --store-url for the {store} "
                                "store")
            if url.password is not None:
                raise url.error("has a password in the URL and in --store-password-file: "
                                "give it once (the file keeps it out of the process list)")
            urls[store] = dataclasses.replace(url, password=password)
        return cls(urls, overwrite)

    def checked(self, database_of: DatabaseOf) -> StoreUrls:
        """These URLs once every server has answered and every database may be written
        (UserError naming the first that may not), with the servers' versions."""
        servers = {name: database_of(name).check_external(url, overwrite=self.overwrite)
                   for name, url in self.urls.items()}
        return StoreUrls(self.urls, self.overwrite, servers)

    def server(self, database: Database[T], run_dir: Path, *,
               db_host: DatabaseHost | None = None) -> AbstractContextManager[T]:
        """The store's server for a command: the one at its URL if it has one, else its
        private server under run_dir."""
        url = self.urls.get(database.store)
        if url is None:
            return database.server(run_dir, db_host=db_host)
        if db_host is not None:
            raise url.error("the suite cannot move a server it did not start onto a database "
                            "host of its own (--db-host netns)")
        return database.external(url, overwrite=self.overwrite)

    def place(self, store: str, directory: Path) -> str:
        """Where the store's data goes, for a progress line: its URL or its directory."""
        url = self.urls.get(store)
        return url.redacted() if url is not None else str(directory)

    def described(self) -> dict[str, str]:
        """store -> URL without password (and its server's version), for results' metadata."""
        return {name: url.redacted() + (f" ({self.servers[name]})" if name in self.servers
                                         else "")
                for name, url in self.urls.items()}


PRIVATE = StoreUrls()
