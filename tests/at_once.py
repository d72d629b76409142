"""For tests whose fixtures start several servers or runs: each on a thread of its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack
from functools import partial
from typing import TypeVar

K = TypeVar("K")
T = TypeVar("T")


def results_at_once(calls: Mapping[K, Callable[[], T]], workers: int | None = None
                    ) -> dict[K, T]:
    """Each call on a thread of its own (at most workers at a time; default: all), its result
    by key; the first failure raised once every one has finished.

    A store's start or a bench run is mostly waiting on a database server, a loader or a
    fixed-length load, so several go on in the time of the longest."""
    with ThreadPoolExecutor(workers or len(calls)) as pool:
        started = {key: pool.submit(call) for key, call in calls.items()}
    return {key: future.result() for key, future in started.items()}


def entered_at_once(stack: ExitStack, managers: dict[str, AbstractContextManager[T]]
                    ) -> dict[str, T]:
    """Each context entered on a thread of its own, its exit on the stack; the first failure
    raised once every one has finished (the stack then stops those that started)."""
    return results_at_once({name: partial(stack.enter_context, manager)
                            for name, manager in managers.items()})
