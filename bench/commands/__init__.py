"""One module per CLI subcommand, each with `add_parser(subparsers)` and `run(args) -> int`."""

from __future__ import annotations

from base.errors import UserError


def positive_counts(text: str, option: str) -> list[int]:
    """A comma list of whole numbers of at least 1 (`--threads 1,2,4`, `--zones-counts ...`)."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError as exc:
        raise UserError(f"{option} takes a comma list of numbers, not {text!r}") from exc
    if not values or min(values) < 1:
        raise UserError(f"{option} needs counts of at least 1")
    return values
