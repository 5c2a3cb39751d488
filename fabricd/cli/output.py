"""Output helpers shared by every command: formats, JSON to stdout, rich tables, exit codes."""

from __future__ import annotations

import json
import re
import sys
from enum import StrEnum
from pathlib import Path

from rich.console import Console
from rich.text import Text

from topology.sourcefile import write_atomic

# Exit codes, like diff: 0 clean, 1 something to report, 2 could not do the job.
EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_TROUBLE = 2


class Format(StrEnum):
    table = "table"
    json = "json"


# What a terminal acts on instead of showing: C0 (NUL, newline, CR, ESC, ...), DEL, C1 (CSI, OSC as one character),
# and Unicode's line separators and invisible direction/zero-width controls (text that reads other than it is).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")
# A table cell shows at most this much of a text (a reason, a summary); the whole is in --format json.
CELL_LIMIT = 200


def shown(value: object, limit: int | None = None) -> str:
    """A person's text, or anything else from the API, as data for a terminal: every control character written out
    as Python writes it (`\\x1b`, `\\n`, `\\x00`, `\\u202e`), and at most `limit` characters (the cut marked `…`).
    Print what it returns as a rich Text (`line`, `cell`), never as markup."""
    text = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(value))
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def line(text: object) -> Text:
    """A line made with data in it, to print as it is: no markup, no highlighting, controls escaped (`shown`)."""
    return Text(shown(text))


def cell(value: object) -> Text:
    """A table cell of data: as `line`, capped at CELL_LIMIT characters; None is empty."""
    return Text("" if value is None else shown(value, CELL_LIMIT))


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
