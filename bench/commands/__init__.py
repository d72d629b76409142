"""One module per CLI subcommand, each with `add_parser(subparsers)` and `run(args) -> int`."""

from __future__ import annotations

from base.errors import UserError
from servers import get_server, selected_servers


def positive_counts(text: str, option: str) -> list[int]:
    """A comma list of whole numbers of at least 1 (`--threads 1,2,4`, `--zones-counts ...`)."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError as exc:
        raise UserError(f"{option} takes a comma list of numbers, not {text!r}") from exc
    if not values or min(values) < 1:
        raise UserError(f"{option} needs counts of at least 1")
    return values


def signable_servers(text: str, command: str) -> list[str]:
    """--drivers over signed data: 'all' less the servers that cannot serve a signed zone
    (said in one line); naming one of them is an error."""
    names = selected_servers(text)
    unable = {name: reason for name in names
              if (reason := get_server(name).cannot_serve_signed) is not None}
    if unable and text != "all":
        name, reason = next(iter(unable.items()))
        raise UserError(f"{command} cannot measure {name}: {reason}")
    if unable:
        print(f"{command} leaves out {', '.join(unable)}: "
              f"{'; '.join(dict.fromkeys(unable.values()))}", flush=True)
    return [name for name in names if name not in unable]
