"""Stores and their stores. The registry below is the only list of backends."""

from __future__ import annotations

import importlib

from base.errors import UserError
from stores.store import Store

# One line per backend: store name -> module in this package defining `STORE`.
_MODULES: dict[str, str] = {
    "native": "native",
    "memory": "memory",
    "pg": "pg",
    "mysql": "mysql",
    "ldap": "ldap",
    "fs": "fs",
    "bdb": "bdb",
    "bdbhpt": "bdbhpt",
}


def store_names() -> list[str]:
    return list(_MODULES)


def get_store(name: str) -> Store:
    if name not in _MODULES:
        raise UserError(f"unknown store {name!r} (known: {', '.join(_MODULES) or 'none'})")
    module = importlib.import_module(f"stores.{_MODULES[name]}")
    return module.STORE


def parse_store_list(text: str) -> list[Store]:
    """'all' or a comma list of store names -> stores, in registry order for 'all'."""
    names = store_names() if text == "all" else [n.strip() for n in text.split(",") if n.strip()]
    return [get_store(n) for n in names]


def store_for_driver(driver: str) -> tuple[Store, str]:
    """A `--driver` value (e.g. 'bdbhpt-c') -> (its store, the variant)."""
    for name in _MODULES:
        store = get_store(name)
        if driver in store.variants:
            return store, driver
    raise UserError(f"unknown driver {driver!r} (known: {', '.join(all_drivers()) or 'none'})")


def all_drivers() -> list[str]:
    """Every `--driver` value of every registered store, in registry order."""
    return [v for name in _MODULES for v in get_store(name).variants]
