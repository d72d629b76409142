"""The registry (servers/__init__.py) against what it describes: the driver folders, the store
modules, and what each built driver declares to named."""

from __future__ import annotations

import ctypes

import pytest

from base.errors import UserError
from base.paths import DRIVERS_DIR
from loaders import get_loader
from servers import (
    SERVERS,
    base_name,
    get_server,
    group_of,
    parse_store_list,
    report_order,
    selected_servers,
    store_names,
)
from servers.dlz import DlzNamed, dlz_clause

# Starts no process: part of `make check` (tests/conftest.py holds it to that).
pytestmark = pytest.mark.check

DNS_SDLZFLAG_THREADSAFE = 0x1  # drivers/common/dlz_abi.h
DLZ = [s for s in SERVERS if isinstance(s, DlzNamed)]


def test_every_driver_folder_has_a_registry_line_and_back() -> None:
    folders = {p.parent.name for p in DRIVERS_DIR.glob("*/driver.mk")}
    assert folders == {s.library_file.parent.name for s in DLZ}


def test_every_store_is_a_module_of_its_name() -> None:
    for name in store_names():
        assert get_loader(name).name == name


@pytest.mark.parametrize("server", [s for s in DLZ if s.is_built()], ids=lambda s: s.name)
def test_declared_thread_safety_is_what_the_driver_tells_named(server: DlzNamed) -> None:
    library = ctypes.CDLL(str(server.library_file))
    flags = ctypes.c_uint(0)
    library.dlz_version(ctypes.byref(flags))
    assert bool(flags.value & DNS_SDLZFLAG_THREADSAFE) == server.thread_safe


def test_unknown_names_are_one_line_errors() -> None:
    for call, arg in ((get_server, "oracle"), (get_loader, "oracle"), (get_loader, "sql"),
                      (parse_store_list, "pg,oracle"), (selected_servers, "pg,oracle"),
                      (selected_servers, ",")):
        with pytest.raises(UserError) as info:
            call(arg)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("word", ["a b", 'a"b', "a\\b", "a{b", "a}b", "a\tb"])
def test_dlz_clause_refuses_what_named_cannot_pass(word: str) -> None:
    library = DRIVERS_DIR / "memory" / "dlz_memory.so"
    with pytest.raises(UserError, match="cannot pass"):
        dlz_clause("x", library, {"file": word})
    with pytest.raises(UserError, match="cannot pass"):
        dlz_clause("x", library.parent / word / library.name, {})


def test_a_named_row_runs_another_bind_by_name() -> None:
    row = get_server("pg@9.20")
    base = get_server("pg")
    assert (row.name, row.bind, row.store) == ("pg@9.20", "9.20", base.store)
    assert base.bind is None and base.named_bind() is None
    assert group_of("pg@9.20") == group_of("pg")
    # Beside its own row in every table, before the next registry row.
    names = ["mysql", "pg@9.20", "native@9.20", "pg", "native"]
    assert sorted(names, key=report_order) == ["native", "native@9.20", "pg", "pg@9.20",
                                               "mysql"]
    assert base_name("pg@9.20") == "pg" and base_name("pg") == "pg"


@pytest.mark.parametrize("name, says", [
    ("nsd@9.20", "nsd is not named"), ("pdns-gpgsql@9.18", "is not named"),
    ("pg@9.99", "BIND '9.99'"), ("oracle@9.20", "unknown server")])
def test_another_bind_only_for_named_rows_it_knows(name: str, says: str) -> None:
    with pytest.raises(UserError, match=says) as info:
        get_server(name)
    assert "\n" not in str(info.value)
