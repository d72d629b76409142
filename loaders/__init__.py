"""Stores: where zone data lives, one module per backend named after it (`loaders/pg.py` defines
the `pg` store as `STORE`). Which stores exist is said once, by the server registry
(servers/__init__.py), since every store is there to feed a DNS server."""

from __future__ import annotations

import importlib

from base.errors import UserError
from loaders.store import Store


def get_store(name: str) -> Store:
    """The store defined by loaders/<name>.py."""
    if not name.isidentifier():
        raise UserError(f"unknown store {name!r}")
    try:
        module = importlib.import_module(f"loaders.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"loaders.{name}":
            raise
        raise UserError(f"unknown store {name!r}") from exc
    store = getattr(module, "STORE", None)
    if not isinstance(store, Store):
        raise UserError(f"unknown store {name!r}")
    return store
