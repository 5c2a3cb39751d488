"""Output helpers shared by every command: formats, JSON to stdout, rich tables, exit codes."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path

from rich.console import Console

from topology.sourcefile import write_atomic

# Exit codes, like diff: 0 clean, 1 something to report, 2 could not do the job.
EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_TROUBLE = 2


class Format(StrEnum):
    table = "table"
    json = "json"


def console() -> Console:
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 200)


def err_console() -> Console:
    return Console(stderr=True, soft_wrap=True)


def emit_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def write_or_print(text: str, output: Path | None) -> None:
    """Print to stdout, or write the file atomically (nothing half-written on failure)."""
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        write_atomic(output, text)
        err_console().print(f"wrote {output}")
