"""Where the repository's parts are, named once."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SCHEMA_DIR = REPO_ROOT / "schemas"
DRIVERS_DIR = REPO_ROOT / "drivers"
