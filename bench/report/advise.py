"""The advice (bench/measure/advice.py) in words: the terminal's and a design review's markdown,
one figure, and a self-contained HTML page of the same (the figure a data: URI, no fetch).

Every figure is printed with what its brackets are, the results directory it comes from, where
it was measured (zones, round trip, threads, reads) and how it stands to the requirement
(measured there, interpolated between two points, or the nearest measured point), and the
flags a reader must not miss: measured before the rule (rounds and intervals), a
load-generator lower bound.
"""

from __future__ import annotations

import base64
import html
import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.measure.advice import (
    CAPACITY_NO_RTT,
    EARLY,
    FAILS,
    LOWER_BOUND,
    MEETS,
    NO_SWEEP,
    P99_AT_PEAK,
    SIGNED_COST,
    STARTUP_ZONES,
    SWEEP_BEYOND,
    SWEEP_BRACKET,
    SWEEP_RTT,
    SWEEP_ZONES,
    TUNE_RTT,
    TUNE_WHOLE_MS,
    UNDECIDED,
    WRITES_HERE,
    Advice,
    Check,
    Estimate,
    Missing,
    Requirement,
    ServerAdvice,
)
from bench.measure.catalogue import LOAD_GENERATOR, NOT_OFFERED
from bench.report.format import NONE, fmt_number

FIGURE = "advice.png"
# The flags a figure's line names, in this order.
_FLAG_WORDS = {EARLY: "before the rule", LOWER_BOUND: "a load-generator lower bound",
               LOAD_GENERATOR: "the load generator set the pace",
               NOT_OFFERED: "a step the load generator offered short"}
_MISSING_WORDS = {
    NO_SWEEP: "a breaking point", SWEEP_ZONES: "the breaking point at the zone count",
    SWEEP_RTT: "the breaking point at the round trip",
    SWEEP_BEYOND: "the breaking point past one load generator's reach (load from another "
                  "host: docs/method/load-from.md)",
    SWEEP_BRACKET: "loads inside the breaking point's bracket", P99_AT_PEAK: "p99 at the peak",
    TUNE_RTT: "threads and connections at the round trip",
    STARTUP_ZONES: "startup and memory at the zone count",
    WRITES_HERE: "reads beside writes at the write rate, the peak and the zone count",
    SIGNED_COST: "signed zones against unsigned"}
_NO_COMMAND_WORDS = {
    TUNE_WHOLE_MS: "no command takes it: `tune --db-rtt` adds whole milliseconds 1-5",
    CAPACITY_NO_RTT: "no command takes it yet: `capacity` adds no round trip and records none "
                     "over a lent database (`tune --db-rtt` measures the closed loop there)"}
_WHY_WORDS = {"past": "the peak is past its breaking point",
              "bracket": "the peak lies inside its breaking point's bracket",
              "lower bound": "its breaking point is a load-generator lower bound under the peak",
              "unmeasured": "not measured", "over": "over", "straddles": "its interval spans",
              "ceiling": "short of", "not asked": "not asked for",
              "not written": "its store is not written live",
              "refuses": "not served", "no signatures": "served without signatures"}


# ---------------------------------------------------------------- one figure in words

def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return NONE
    decimals = 0 if abs(value) >= 100 else 1 if abs(value) >= 1 else 2
    return f"{fmt_number(value, decimals)}{unit}"


def _count(value: float) -> str:
    return f"{value:,.0f}"


def figure_text(e: Estimate, unit: str = "") -> str:
    """"2.7 ms [2.2–3.3]": the value with its interval, "≥" before a lower bound."""
    if e.value is None:
        return NONE
    text = _number(e.value, unit)
    if LOWER_BOUND in e.flags:
        return f"≥ {text}"
    if e.low is None or e.high is None:
        return text
    low, high = _number(e.low), _number(e.high)
    return text if low == high == _number(e.value) else f"{text} [{low}–{high}]"


def conditions_text(e: Estimate) -> str:
    words = []
    for name, value in e.conditions:
        if name == "zones":
            words.append(f"{_count(value)} zones")
        elif name == "rtt_ms":
            words.append("database local" if value == 0 else f"database {value:g} ms away")
        elif name == "threads":
            words.append(f"{value:g} thread{'s' if value != 1 else ''}")
        elif name == "reads_per_s":
            words.append(f"{_count(value)} reads/s")
    return ", ".join(words)


def basis_text(e: Estimate) -> str:
    """How the figure stands to the requirement on its axis."""
    basis = e.basis
    if basis is None:
        return ""
    axis = basis.axis
    if len(basis.measured) == 2:
        a, b = basis.measured
        return f"interpolated between {_count(a)} and {_count(b)} {axis}"
    if basis.measured[0] == basis.wanted:
        return ""
    return f"nearest measured: {_count(basis.measured[0])} {axis}"


def source_text(e: Estimate) -> str:
    """"(capacity-2026-11-26; 1,000 zones, 1 thread; interpolated ...; before the rule)"."""
    parts = ["; ".join(e.runs)] if e.runs else []
    parts += [text for text in (conditions_text(e), basis_text(e)) if text]
    parts += [word for flag, word in _FLAG_WORDS.items() if flag in e.flags
              and not (flag == NOT_OFFERED and LOWER_BOUND in e.flags)]
    return f"({'; '.join(parts)})" if parts else ""


def with_source(text: str, e: Estimate) -> str:
    source = source_text(e)
    return f"{text} {source}" if source else text


# ---------------------------------------------------------------- a server in words

def requirement_text(req: Requirement) -> str:
    parts = [f"{_count(req.zones)} zones", f"{_count(req.peak_qps)} QPS at peak",
             f"p99 under {req.p99_ms:g} ms",
             "the database local" if req.db_rtt_ms == 0 else
             f"the database {req.db_rtt_ms:g} ms away"]
    if req.writes_per_s:
        parts.append(f"{req.writes_per_s:g} writes/s")
    if req.signed:
        parts.append("signed zones")
    return ", ".join(parts)


def check_text(check: Check, req: Requirement) -> str:
    """One check as a clause: what it measured against the requirement."""
    e = check.estimate
    peak = _count(req.peak_qps)
    if check.kind == "headroom":
        if e is None:
            return "breaking point not measured"
        return with_source(f"headroom {_headroom(e)} over {peak} QPS", e)
    if check.kind == "p99" and e is not None:
        return with_source(f"p99 at {peak} QPS {figure_text(e, ' ms')}"
                           f"{_against(check, req.p99_ms, 'ms')}", e)
    if check.kind == "read_p99" and e is not None:
        return with_source(f"read p99 at {req.writes_per_s:g} writes/s {figure_text(e, ' ms')}"
                           f"{_against(check, req.p99_ms, 'ms')}", e)
    if check.kind == "writes":
        return _writes_clause(check, req)
    if check.kind == "signed":
        return f"signed zones: {_WHY_WORDS.get(check.why, 'served with their signatures')}" + (
            f": {check.note}" if check.note else "")
    return f"{check.kind}: {_WHY_WORDS.get(check.why, check.why)}"


def _headroom(e: Estimate) -> str:
    """"1.6–2.0x" (the bracket over the peak), "≥ 0.89x" for a lower bound."""
    if e.value is None:
        return f"< {_times(e.high)}x" if e.high is not None else NONE
    if LOWER_BOUND in e.flags or e.high is None:
        return f"≥ {_times(e.value)}x"
    return f"{_times(e.value)}–{_times(e.high)}x"


def _times(value: float) -> str:
    """A multiple in two significant digits (0.045, 0.36, 1.6, 23)."""
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def _against(check: Check, limit: float, unit: str) -> str:
    if check.verdict == MEETS:
        return ""
    word = {"over": "over", "straddles": "across"}.get(check.why, _WHY_WORDS.get(check.why, ""))
    return f", {word} {limit:g} {unit}"


def _writes_clause(check: Check, req: Requirement) -> str:
    e = check.estimate
    rate = f"{req.writes_per_s:g} writes/s"
    if check.why == "not written":
        return f"writes: {_WHY_WORDS['not written']} ({check.note}; {'; '.join(e.runs)})" \
            if e is not None else f"writes: {_WHY_WORDS['not written']}"
    if e is None:
        return f"writes at {rate}: not measured"
    if check.verdict == MEETS:
        return with_source(f"writes: kept up with {figure_text(e, '/s')}", e)
    return with_source(f"writes: at most {figure_text(e, '/s')}, {_WHY_WORDS[check.why]} "
                       f"{rate}", e)


def settings_text(s: ServerAdvice) -> str:
    f = s.figures
    words = []
    threads, connections = f.get("threads"), f.get("connections")
    if threads is not None and threads.value is not None:
        setting = f"threads {threads.value:g}"
        if connections is not None and connections.value is not None:
            setting += f", connections {connections.value:g}"
        tuned = f.get("tuned_qps")
        if tuned is not None:
            setting += f": {figure_text(tuned)} QPS closed loop there"
        words.append(with_source(setting, tuned or threads))
    if "cache_mib" in f:
        cache = f"store cache {_number(f['cache_mib'].value)} MiB"
        hit = f.get("cache_hit")
        if hit is not None:
            cache += f", {_number(hit.value)}% of its reads hits"
        words.append(with_source(cache, hit or f["cache_mib"]))
    return "; ".join(words)


def expectations(s: ServerAdvice, req: Requirement) -> Iterator[str]:
    """What else the operator may expect at the requirement, one clause each."""
    f = s.figures
    zones = _count(req.zones)
    if "startup_s" in f:
        memory = f.get("rss_mib")
        text = f"startup at {zones} zones {figure_text(f['startup_s'], ' s')}"
        if memory is not None:
            text += f", named {figure_text(memory, ' MiB')}"
        yield with_source(text, f["startup_s"])
    if "scale_qps" in f:
        yield _with_share(f"closed loop at {zones} zones {figure_text(f['scale_qps'])} QPS",
                          f["scale_qps"], f.get("scale_share"), "its QPS", where=True)
    if "visible_p99_ms" in f:
        yield with_source(f"each write visible within {figure_text(f['visible_p99_ms'], ' ms')}"
                          f" at p99 at {req.writes_per_s:g} writes/s", f["visible_p99_ms"])
    if "cpu_per_read_us" in f:
        yield _with_share(f"CPU per read {figure_text(f['cpu_per_read_us'], ' us')}",
                          f["cpu_per_read_us"], f.get("read_cost_share"),
                          "its cost without writes")
    if "signed_share" in f:
        yield with_source(f"signed zones answered at {_number(f['signed_share'].value)}% of "
                          "its unsigned QPS", f["signed_share"])


def _with_share(text: str, figure: Estimate, share: Estimate | None, of: str, *,
                where: bool = False) -> str:
    """A figure's clause with its source, and the share another figure sets it at (", N% of"
    what `of` names, and with where the share's own conditions) where there is one."""
    if share is not None:
        text += f", {_number(share.value)}% of {of}"
        if where:
            text += f" at {conditions_text(share)}"
    return with_source(text, figure)


def reasons(s: ServerAdvice, req: Requirement, verdict: str) -> str:
    """The checks with this verdict, as one line."""
    return "; ".join(check_text(c, req) for c in s.checks if c.verdict == verdict)


def missing_text(missing: list[Missing], servers: int) -> str:
    """What one command measures: each kind, with its servers when the command has several."""
    by_kind: dict[str, list[str]] = {}
    for m in missing:
        by_kind.setdefault(_MISSING_WORDS.get(m.kind, m.kind), []).append(m.server)
    if servers == 1:
        return "; ".join(by_kind)
    return "; ".join(f"{kind} ({', '.join(dict.fromkeys(names))})"
                     for kind, names in by_kind.items())


# ---------------------------------------------------------------- the page

@dataclass
class Item:
    text: str
    sub: list[str] = field(default_factory=list)


@dataclass
class Block:
    """A heading ("h1", "h2"), a paragraph ("p"), a list ("ol", "ul") or the figure ("img")."""

    kind: str
    text: str = ""
    items: list[Item] = field(default_factory=list)


def page(advice: Advice, with_figure: bool) -> list[Block]:
    req = advice.requirement
    blocks = [Block("h1", f"Advice: {requirement_text(req)}"), Block("p", _preamble(advice))]
    ranked = advice.by_verdict(MEETS)
    if ranked:
        blocks += [Block("h2", "Meets the requirement, most headroom first"),
                   Block("ol", items=[_ranked_item(s, req) for s in ranked])]
    else:
        blocks.append(Block("p", "**No server meets the requirement** on these results."))
    undecided = advice.by_verdict(UNDECIDED)
    if undecided:
        blocks += [Block("h2", "Undecided, until a measurement decides"),
                   Block("ul", items=[_undecided_item(s, req) for s in undecided])]
    fell = advice.by_verdict(FAILS)
    if fell:
        blocks += [Block("h2", "Fell out"),
                   Block("ul", items=[Item(f"**{s.server}**: {reasons(s, req, FAILS)}")
                                      for s in fell])]
    if with_figure:
        blocks.append(Block("img", "Breaking point of each server (nearest measured) against "
                                   "the peak"))
    if with_figure:
        blocks.append(Block("p", LEGEND))
    commands = advice.commands()
    no_command = [m for s in advice.servers for m in s.deciding() if m.command is None]
    if commands or no_command:
        blocks.append(Block("h2", "Measurements the advice lacks"))
        blocks.append(Block("ul", items=[
            *(Item(f"`{command.text()}`: {missing_text(taken, len(command.servers))}")
              for command, taken in commands),
            *(Item(f"{_MISSING_WORDS.get(kind, kind)} ({', '.join(servers)}): "
                   f"{_NO_COMMAND_WORDS.get(why, why)}")
              for (kind, why), servers in _grouped(no_command).items())]))
    return blocks


def _grouped(missing: list[Missing]) -> dict[tuple[str, str], list[str]]:
    """Measurements no command takes, by what and why, with their servers."""
    found: dict[tuple[str, str], list[str]] = {}
    for m in missing:
        found.setdefault((m.kind, m.no_command), []).append(m.server)
    return found


def _preamble(advice: Advice) -> str:
    machine = f", {advice.machine}" if advice.machine else ""
    return (f"From {len(advice.runs)} results directories (BIND {advice.bind}{machine}: that "
            "machine's figures); how to read a line: docs/method/advise.md.")


# How to read a line, under the page (the terminal's text leaves it to the method).
LEGEND = ("In brackets after a figure, its interval: for the headroom, the offered rates of "
          "the last load held and the first failed, over the peak; for p99 at the peak, the "
          "capacity steps' two repeats; for `writes`, the 95% interval. Then the results "
          "directory it comes from, where it was measured, and whether it lies between two "
          "measured points (interpolated) or is the nearest one outside them (never "
          "extrapolated). \"Before the rule\": measured in one block of runs, without an "
          "interval, before rounds; \"≥\": a load-generator lower bound.")


def _ranked_item(s: ServerAdvice, req: Requirement) -> Item:
    settings = settings_text(s)
    head = f"**{s.server}**" + (f": {settings}" if settings else "")
    sub = [check_text(c, req) for c in s.checks]
    return Item(head, [*sub, *expectations(s, req)])


def _undecided_item(s: ServerAdvice, req: Requirement) -> Item:
    """The checks still open; those it meets, in the page only (the terminal's line stays
    one)."""
    return Item(f"**{s.server}**: {reasons(s, req, UNDECIDED)}",
                [check_text(c, req) for c in s.checks if c.verdict == MEETS])


# ---------------------------------------------------------------- markdown and HTML

def markdown(blocks: list[Block]) -> str:
    lines: list[str] = []
    for block in blocks:
        if block.kind == "h1":
            lines += [f"# {block.text}", ""]
        elif block.kind == "h2":
            lines += [f"## {block.text}", ""]
        elif block.kind == "p":
            lines += [block.text, ""]
        elif block.kind == "img":
            lines += [f"![{block.text}]({FIGURE})", ""]
        else:
            lines += [*_list_lines(block), ""]
    return "\n".join(lines)


def plain(blocks: list[Block]) -> str:
    """The page for a terminal: no marks, no blank lines, the figure left out."""
    lines: list[str] = []
    for block in blocks:
        if block.kind in ("h1", "h2", "p"):
            lines.append(_unmarked(block.text) + (":" if block.kind == "h2" else ""))
        elif block.kind in ("ol", "ul"):
            lines += _list_lines(block, _unmarked, subs=block.kind == "ol")
    return "\n".join(lines) + "\n"


def _list_lines(block: Block, shown: Callable[[str], str] = str, *,
                subs: bool = True) -> list[str]:
    """A numbered ("ol") or bulleted list, an item a line (its text as shown() gives it) and,
    with subs, its sub-items below it, indented past its mark."""
    lines = []
    for number, item in enumerate(block.items, 1):
        mark = f"{number}." if block.kind == "ol" else "-"
        lines.append(f"{mark} {shown(item.text)}")
        if subs:
            lines += [f"{' ' * (len(mark) + 1)}- {shown(sub)}" for sub in item.sub]
    return lines


def _unmarked(text: str) -> str:
    return _INLINE.sub(lambda m: m.group(1) or m.group(2), text)


_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*")


def _inline_html(text: str) -> str:
    """The page's two inline marks, `code` and **bold**, as HTML; everything else escaped."""
    out, last = [], 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[last:match.start()]))
        code, bold = match.groups()
        out.append(f"<code>{html.escape(code)}</code>" if code is not None
                   else f"<strong>{html.escape(bold)}</strong>")
        last = match.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


_STYLE = """body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em;
line-height:1.4;color:#222}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.4em}
code{background:#f2f2f2;padding:0 .2em;font-size:.9em}li{margin:.3em 0}
li li{margin:.1em 0;font-size:.92em}img{max-width:100%}"""


def html_page(blocks: list[Block], png: bytes | None) -> str:
    """The page as one HTML document: inline style, the figure a data: URI, nothing fetched."""
    body = []
    for block in blocks:
        if block.kind in ("h1", "h2", "p"):
            body.append(f"<{block.kind}>{_inline_html(block.text)}</{block.kind}>")
        elif block.kind == "img":
            if png is not None:
                data = base64.b64encode(png).decode("ascii")
                body.append(f'<figure><img id="advice-figure" alt="{html.escape(block.text)}" '
                            f'src="data:image/png;base64,{data}"></figure>')
        else:
            items = []
            for item in block.items:
                sub = "".join(f"<li>{_inline_html(s)}</li>" for s in item.sub)
                items.append(f"<li>{_inline_html(item.text)}"
                             + (f"<ul>{sub}</ul>" if sub else "") + "</li>")
            body.append(f"<{block.kind}>{''.join(items)}</{block.kind}>")
    title = html.escape(blocks[0].text if blocks else "Advice")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{title}</title><style>{_STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


# ---------------------------------------------------------------- the figure

_COLOURS = {MEETS: "#2a7f3f", UNDECIDED: "#d08a00", FAILS: "#9a9a9a"}


def figure_png(advice: Advice) -> bytes:
    """Each server's breaking point (the bracket, or an arrow from a lower bound) on a log
    axis, coloured by its verdict, against the peak."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = [*advice.by_verdict(MEETS), *advice.by_verdict(UNDECIDED),
             *advice.by_verdict(FAILS)]
    shown = [s for s in order if "breaking" in s.figures
             and s.figures["breaking"].value is not None]
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.32 * max(len(shown), 3)))
    for row, s in enumerate(reversed(shown)):
        e = s.figures["breaking"]
        held = e.value or 0.0
        top = e.high if e.high is not None and LOWER_BOUND not in e.flags else held * 1.25
        colour = _COLOURS[s.verdict]
        ax.plot([held, top], [row, row], color=colour, linewidth=6, solid_capstyle="butt")
        if LOWER_BOUND in e.flags or e.high is None:
            ax.annotate("", xy=(top * 1.1, row), xytext=(top, row),
                        arrowprops={"arrowstyle": "->", "color": colour})
    peak = advice.requirement.peak_qps
    ax.axvline(peak, color="#c0392b", linestyle="--", linewidth=1.2,
               label=f"peak {_count(peak)} QPS")
    ax.set_yticks(range(len(shown)), [s.server for s in reversed(shown)])
    ax.set_xscale("log")
    ax.set_xlabel("breaking point: offered QPS, last load held (5% lost) to first failed")
    ax.set_title("Breaking point against the peak (green meets, orange undecided, grey fell "
                 "out)", fontsize=10)
    if not shown:
        ax.text(0.5, 0.5, "no breaking point measured", ha="center", va="center",
                transform=ax.transAxes)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def write_advice(advice: Advice, out: Path) -> list[Path]:
    """advice.md (with advice.png beside it) and advice.html (the figure inside) in out."""
    out.mkdir(parents=True, exist_ok=True)
    png = figure_png(advice)
    blocks = page(advice, with_figure=True)
    written = [out / "advice.md", out / FIGURE, out / "advice.html"]
    written[0].write_text(markdown(blocks))
    written[1].write_bytes(png)
    written[2].write_text(html_page(blocks, png))
    return written
