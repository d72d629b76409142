"""Loaders: what writes each store's layout into its database, one module per backend named
after it (`loaders/pg.py` defines the `pg` store's `Loader` as `LOADER`).

A *store* is one named backend (pg, fs, ...): its loader here (load, update, read back, what
a reader of its layout is told) and the `Database` the loader names (databases/: a private
server, a lent one, or a directory). Which stores exist is said once, by the server registry
(servers/__init__.py), since every store is there to feed a DNS server."""

from __future__ import annotations

import importlib
from typing import Any

from base.errors import UserError
from databases.database import Database
from loaders.loader import Loader


def get_loader(name: str) -> Loader[Any]:
    """The loader of store `name`, defined by loaders/<name>.py."""
    if not name.isidentifier():
        raise UserError(f"unknown store {name!r}")
    try:
        module = importlib.import_module(f"loaders.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"loaders.{name}":
            raise
        raise UserError(f"unknown store {name!r}") from exc
    loader = getattr(module, "LOADER", None)
    if not isinstance(loader, Loader):
        raise UserError(f"unknown store {name!r}")
    return loader


def get_database(name: str) -> Database[Any]:
    """The database of store `name` (what --store-url checks a URL against)."""
    return get_loader(name).database
