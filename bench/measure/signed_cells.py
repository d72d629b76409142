"""The cells of `run --signed` (results.json's "signed"): one server over the unsigned or the
signed variant of one data set, with what holding that variant costs the store and the sizes
of its replies."""

from __future__ import annotations

from dataclasses import dataclass

from bench.measure.cells import Cell
from bench.measure.serial import Section


@dataclass
class SignedCell:
    """`run --signed`: one server over one variant of the data set ("unsigned", or "signed":
    the same zones signed), every query with the DO bit: the runner's figures, with what
    holding that variant costs the store (its files on disk after the load, the load's time)
    and the replies to the check queries over UDP (how many, how many truncated, their mean
    size on the wire)."""

    variant: str
    cell: Cell
    zones: int = 0
    records: int = 0
    store_bytes: int | None = None
    load_seconds: float | None = None
    replies: int = 0
    truncated: int = 0
    reply_bytes: float | None = None

    @property
    def server(self) -> str:
        return self.cell.server

    @property
    def key(self) -> tuple[str, int, str]:
        return self.server, self.cell.threads, self.variant


SECTION = Section("signed", list[SignedCell], always=True)
