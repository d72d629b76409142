"""`run --signed`: what serving a signed zone costs, against the same zones unsigned.

Every query carries the DO bit (dnsperf's and the prober's `-D`, the answer check with DO): a
validating resolver always sets it, and it is what makes native BIND add signatures and
proofs. The data set is signed once with BIND's own tools (zonedata/signing.py) before any
store starts, and both variants are asked the same query file, derived from the unsigned
zones.

For each server, native BIND first (each variant's answers are checked against native BIND's
over the same variant), the store is loaded with the unsigned zones and measured, then loaded
with the signed zones and measured, so the two cells of a pair are measured minutes apart.
Each cell runs `run`'s phases up to the loaded latency (not update visibility: a record
written unsigned into a signed zone is not this question), then asks the check queries once
more as dnsperf asks them, to count UDP replies that came back truncated: dnsperf counts a
truncated reply at its truncated size and does not retry over TCP, so its response size is
only the whole answer's where nothing was truncated.
"""

from __future__ import annotations

import dataclasses
import statistics

import dns.exception
import dns.flags
import dns.message
import dns.query

from bench.measure.cells import Cell
from bench.measure.datasets import Stream
from bench.measure.progress import StepProgress
from bench.measure.results import Results, save_results
from bench.measure.runner import (
    CHECK_ANSWERS,
    LOADED_LATENCY,
    MEASURE_QPS,
    STARTUP,
    UNLOADED_LATENCY,
    WARM_UP,
    Measuring,
    Phase,
    Profile,
    Runner,
    Setup,
)
from bench.measure.serving import LoadedStore
from bench.measure.signed_cells import SignedCell
from bench.measure.startup import disk_usage
from servers import ServerKind

UNSIGNED, SIGNED = "unsigned", "signed"
# The EDNS0 payload dnsperf -D advertises (its MAX_EDNS_PACKET): the reply check asks the same.
DNSPERF_EDNS_PAYLOAD = 4096


class VariantRunner(Runner):
    """The runner over one variant of the data set; its cells are recorded as SignedCells
    with what holding that variant cost the store."""

    def __init__(self, profile: Profile, setup: Setup, results: Results, variant: str,
                 progress: StepProgress) -> None:
        super().__init__(profile, setup, results, phases=SIGNED_PHASES)
        self.variant = variant
        self.progress = progress
        self.pending: SignedCell | None = None

    def run_cell(self, loaded: LoadedStore, threads: int, connections: int | None = None) -> None:
        """run's cell, with the store's size on disk read after its load, before the server
        starts."""
        size = disk_usage(loaded.directory) if loaded.directory is not None else None
        self.pending = SignedCell(self.variant, Cell(loaded.server.name, threads, 0),
                                  zones=loaded.load.zones, records=loaded.load.records,
                                  store_bytes=size, load_seconds=loaded.load.seconds)
        super().run_cell(loaded, threads, connections)

    def _record(self, cell: Cell) -> None:
        """The cell with its variant and store figures, saved; a store that failed before any
        cell (run_server's fallback) is recorded without store figures."""
        point = dataclasses.replace(self.pending or SignedCell(self.variant, cell), cell=cell)
        self.pending = None
        if any(p.key == point.key for p in self.results.signed):
            return  # measured already: run_server's fallback after a later failure
        self.results.signed.append(point)
        save_results(self.results, self.setup.out_dir)

    def reply_sizes(self, m: Measuring) -> None:
        """The check queries once over UDP as dnsperf -D sends them (RD, DO, EDNS 4096):
        how many replies were truncated, and their mean size on the wire."""
        assert self.pending is not None
        sizes, truncated = [], 0
        for qname, rdtype in self.check:
            query = dns.message.make_query(qname, rdtype, use_edns=0, want_dnssec=True,
                                           payload=DNSPERF_EDNS_PAYLOAD)
            try:
                reply = dns.query.udp(query, "127.0.0.1", port=m.server.port, timeout=2)
            except dns.exception.Timeout:
                continue
            sizes.append(len(reply.to_wire()))
            truncated += bool(reply.flags & dns.flags.TC)
        self.pending.replies, self.pending.truncated = len(sizes), truncated
        self.pending.reply_bytes = statistics.fmean(sizes) if sizes else None


class SignedRunner(Runner):
    """Every server over the unsigned and the signed variant of one data set, the two cells
    of a server measured one after the other."""

    def __init__(self, profile: Profile, setup: Setup, results: Results,
                 signed: Stream) -> None:
        super().__init__(profile, setup, results, phases=SIGNED_PHASES)
        per_cell = [phase.expected_s(profile) for phase in self.phases]
        cells = 2 * (1 + len(setup.servers)) * len(setup.threads)
        self.progress = StepProgress(per_cell * cells)
        self.variants = [
            VariantRunner(profile, self._setup_of(name, stream), results, name, self.progress)
            for name, stream in ((UNSIGNED, setup.stream), (SIGNED, signed))]

    def _setup_of(self, variant: str, stream: Stream) -> Setup:
        run_dir = self.setup.run_dir / variant
        run_dir.mkdir(parents=True, exist_ok=True)
        return dataclasses.replace(self.setup, stream=stream, run_dir=run_dir, dnssec=True)

    def run_server(self, server: ServerKind) -> None:
        for variant in self.variants:
            variant.run_server(server)


# run's phases up to the loaded latency, then the reply check (module docstring).
SIGNED_PHASES: tuple[Phase, ...] = (
    STARTUP, CHECK_ANSWERS, WARM_UP, UNLOADED_LATENCY, MEASURE_QPS, LOADED_LATENCY,
    Phase("reply sizes", lambda p: 0.5 + p.check_queries * 0.001, VariantRunner.reply_sizes),
)
