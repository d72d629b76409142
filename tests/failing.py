"""Data that fails on the way in, for tests of what a failed load leaves behind."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class FailsHalfWay(list):
    """A record list whose iteration raises after half the records, as a crash mid-load would."""

    def __iter__(self) -> Iterator[Any]:
        for i, item in enumerate(list.__iter__(self)):
            if i == len(self) // 2:
                raise RuntimeError("load interrupted half-way")
            yield item
