"""results.json (schema 1): its sections, the Results that holds them, load and save.

{ "schema": 1,
  "meta": {metadata.collect() + every run parameter: profile, threads, connections, duration,
           runs, queue_depth, clients, pin, dataset, loss_threshold, ...},
  "prober_floor": LatencyStats | null,
  then one key per section of SECTIONS, each declared by its measurement's module with its
  entries' dataclasses (bench/measure/serial.py reads and writes them all):
  "cells": [Cell, ...]                     cells.py: one per (server, threads, connections)
  "startup_scaling": [StartupPoint, ...]   startup.py: `startup`, one per (server, zones)
  "capacity": [Curve, ...]                 capacity.py: `capacity`, one per (server, threads)
  "tuning": Tuning | null                  tuning.py: `tune`: where the database was, what
                                           round trip was added, processes/CPU scaling, the
                                           recommended setting
  "scale": [SizeCell, ...]                 scale_cells.py: `scale`, one per (server, zones,
                                           records per zone, query mix)
  "signed": [SignedCell, ...]              signed_cells.py: `run --signed`, one per (server,
                                           threads, data variant: unsigned or signed)
  "instructions": Instructions             instructions.py: Valgrind's instructions per
                                           answered query, per server and repeat
  "faults": Faults                         faults.py: a steady load through a script of
                                           database faults, per second and per fault
  "writes": Writes                         writes.py: reads at a fixed rate while the store
                                           is written
  "updates": Updates }                     updates.py: RFC 2136 updates per second by records
                                           per message, with and without TSIG, and the
                                           answers after them
The sections from "instructions" on are written only by their command; a key missing from an
older file reads as an empty section.

Raw figures are kept: every dnsperf run (the discarded warm-up one too) with its output, and
every latency sample, so a report can be re-rendered or re-analysed from the file alone.

A new measurement's section: its dataclasses and SECTION in its module, a line in SECTIONS
and a field of Results of the same name; its rendering and comparison are registered in
bench/report/sections.py (tests/test_report.py holds the two lists to each other).
"""

from __future__ import annotations

import json
import lzma
from dataclasses import dataclass, field
from pathlib import Path

from base.errors import UserError
from bench.load.prober import LatencyStats
from bench.measure import (
    capacity,
    cells,
    faults,
    instructions,
    scale_cells,
    signed_cells,
    startup,
    tuning,
    updates,
    writes,
)
from bench.measure.capacity import Curve
from bench.measure.cells import Cell
from bench.measure.faults import Faults
from bench.measure.instructions import Instructions
from bench.measure.scale_cells import SizeCell
from bench.measure.serial import Section, from_json, to_json
from bench.measure.signed_cells import SignedCell
from bench.measure.startup import StartupPoint
from bench.measure.tuning import Tuning
from bench.measure.updates import Updates
from bench.measure.writes import Writes
from servers import report_order

SCHEMA = 1
# Written xz-compressed (lzma preset 6), chosen on the committed files: quick-2026-11-26's
# 1.75 MB of JSON become 130 kB in 0.28 s (gzip -6: 189 kB in 0.02 s), scale-2026-11-25's
# 4.38 MB 754 kB in 2.2 s (gzip: 1,069 kB in 0.1 s); all 87 committed on 2026-11-27, 36.6 MB:
# 5.1 MB (gzip: 7.0 MB). git keeps its objects zlib-compressed already (those 87 took 6.1 MB
# of its pack), so gzip would shrink only the checkout, xz the repository too. Reading a file
# takes under 0.06 s; a save, after each cell, at most about 2 s for the largest run.
RESULTS_FILE = "results.json.xz"
PLAIN_FILE = "results.json"  # earlier versions' files (up to 2026-11-27), or by hand: read too
XZ_PRESET = 6
# A QPS run that lost more than this fraction of its queries is flagged in the report.
DEFAULT_LOSS_THRESHOLD = 0.01

# Every section, in the file's order.
SECTIONS: dict[str, Section] = {section.key: section for section in (
    cells.SECTION, startup.SECTION, capacity.SECTION, tuning.SECTION, scale_cells.SECTION,
    signed_cells.SECTION, instructions.SECTION, faults.SECTION, writes.SECTION,
    updates.SECTION)}


@dataclass
class Results:
    """A results file: its metadata, the prober's floor, and one field per section (named by
    its key in SECTIONS)."""

    meta: dict = field(default_factory=dict)
    prober_floor: LatencyStats | None = None
    cells: list[Cell] = field(default_factory=list)
    startup_scaling: list[StartupPoint] = field(default_factory=list)
    capacity: list[Curve] = field(default_factory=list)
    tuning: Tuning | None = None
    scale: list[SizeCell] = field(default_factory=list)
    signed: list[SignedCell] = field(default_factory=list)
    instructions: Instructions | None = None
    faults: Faults | None = None
    writes: Writes | None = None
    updates: Updates | None = None
    schema: int = SCHEMA

    @property
    def loss_threshold(self) -> float:
        return float(self.meta.get("loss_threshold", DEFAULT_LOSS_THRESHOLD))

    def thread_counts(self) -> list[int]:
        return sorted({c.threads for c in self.cells})

    def servers(self) -> list[str]:
        """Servers present, in the registry's order (unknown names last, alphabetically)."""
        return sorted({c.server for c in self.cells}, key=report_order)

    def cells_for(self, threads: int) -> list[Cell]:
        order = {d: i for i, d in enumerate(self.servers())}
        return sorted((c for c in self.cells if c.threads == threads),
                      key=lambda c: (order[c.server], c.connections))

    def cell(self, server: str, threads: int) -> Cell | None:
        """The cell of (server, threads); with several connection counts, the first."""
        for c in self.cells_for(threads):
            if c.server == server:
                return c
        return None

    def to_dict(self) -> dict:
        data = {"schema": self.schema, "meta": self.meta,
                "prober_floor": to_json(self.prober_floor)}
        for key, section in SECTIONS.items():
            value = getattr(self, key)
            if section.present(value):
                data[key] = to_json(value)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Results:
        schema = data.get("schema")
        if schema != SCHEMA:
            raise UserError(f"results schema {schema!r} is not supported (expected {SCHEMA})")
        found = {key: section.empty() if data.get(key) is None
                 else from_json(section.hint, data[key]) for key, section in SECTIONS.items()}
        return cls(meta=data.get("meta", {}),
                   prober_floor=from_json(LatencyStats | None, data.get("prober_floor")),
                   schema=schema, **found)


def results_path(path: Path) -> Path:
    """A results directory's file (results.json.xz, or an older directory's results.json); a
    path to a file is that file."""
    if not path.is_dir():
        return path
    compressed, plain = path / RESULTS_FILE, path / PLAIN_FILE
    return plain if plain.exists() and not compressed.exists() else compressed


def has_results(directory: Path) -> bool:
    return (directory / RESULTS_FILE).is_file() or (directory / PLAIN_FILE).is_file()


def read_results_file(path: Path) -> dict:
    """The JSON of a results directory's file (or of the file at path), compressed or not."""
    file = results_path(path)
    try:
        if file.suffix == ".xz":
            with lzma.open(file, "rt") as stream:
                return json.load(stream)
        return json.loads(file.read_text())
    except FileNotFoundError as exc:
        raise UserError(f"no results found: {file} does not exist") from exc
    except (OSError, EOFError, lzma.LZMAError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read {file}: {exc}") from exc


def write_results_file(data: dict, directory: Path) -> Path:
    """Write data as directory/results.json.xz, atomically (a crash never leaves half a
    file); it replaces a results.json of an earlier version there (`scale --add-to`)."""
    directory.mkdir(parents=True, exist_ok=True)
    file = directory / RESULTS_FILE
    tmp = file.with_name(file.name + ".tmp")
    with lzma.open(tmp, "wt", preset=XZ_PRESET) as stream:
        stream.write(json.dumps(data, indent=1) + "\n")
    tmp.replace(file)
    (directory / PLAIN_FILE).unlink(missing_ok=True)
    return file


def as_read_back(parameters: dict) -> dict:
    """Parameters as results.json gives them back (a profile's tuples as lists): recorded so,
    the results.md a command writes is the one `bench report` renders from the file later."""
    return json.loads(json.dumps(parameters))


def load_results(path: Path) -> Results:
    """Read a results directory's file (or the file at path)."""
    data = read_results_file(path)
    try:
        return Results.from_dict(data)
    except (TypeError, ValueError, KeyError) as exc:
        raise UserError(f"{results_path(path)} does not follow the results schema: "
                        f"{exc}") from exc


def save_results(results: Results, directory: Path) -> Path:
    return write_results_file(results.to_dict(), directory)
