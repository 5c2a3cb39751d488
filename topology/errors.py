"""The one error root of fabricd and the input errors of the topology layer.

Every message says what is wrong and what to do, so the CLI can print it as one line.
`FabricdError` lives here because `topology` imports nothing of ours; `fabricd` re-exports it.
"""

from __future__ import annotations


class FabricdError(Exception):
    """Root of every error fabricd raises on purpose: the CLI prints it as one line and exits with `exit_code`
    (2, "could not do the job": 0 and 1 are a clean result and a result with findings, never an error)."""

    exit_code: int = 2


def one_line(text: str) -> str:
    """`text` with its line breaks folded into `; ` (a library's multi-line report inside one of our lines)."""
    return "; ".join(part.strip() for part in text.splitlines() if part.strip())


class InputError(FabricdError):
    """A file the user gave us is missing, malformed or inconsistent."""

    def __init__(self, source: str, problem: str, *, line: int | None = None, field: str | None = None):
        self.source = source
        self.problem = problem
        self.line = line
        self.field = field
        where = source if line is None else f"{source}:{line}"
        what = problem if field is None else f"field '{field}': {problem}"
        super().__init__(f"{where}: {what}")


class SpecError(InputError):
    """The fabric spec is invalid."""


class CablingError(InputError):
    """A cabling file (YAML/JSON, LLDP tables, containerlab topology) is invalid."""


class OutputError(FabricdError):
    """A result could not be written where the user asked."""
