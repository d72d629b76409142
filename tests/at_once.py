"""For tests whose fixtures start several servers: each started on a thread of its own."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack
from typing import TypeVar

T = TypeVar("T")


def entered_at_once(stack: ExitStack, managers: dict[str, AbstractContextManager[T]]
                    ) -> dict[str, T]:
    """Each context entered on a thread of its own, its exit on the stack; the first failure
    raised once every one has finished (the stack then stops those that started).

    A store's start is mostly waiting on its database server (initdb, mysql_install_db, slapd)
    and a DNS server's on its zones' load, so several go on in the time of the longest."""
    with ThreadPoolExecutor(len(managers)) as pool:
        entered = {name: pool.submit(stack.enter_context, manager)
                   for name, manager in managers.items()}
    return {name: future.result() for name, future in entered.items()}
