"""Reading YAML/JSON input files with line numbers for error messages.

Parsing uses libyaml (fast) when available; line numbers are only computed when an error must
name one, by composing the YAML node tree once more.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from topology.errors import InputError, OutputError

_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_text(path: Path, error: type[InputError]) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(str(path), "file not found; check the path") from None
    except IsADirectoryError:
        raise error(str(path), "is a directory, expected a file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(str(path), f"cannot read: {exc}") from None


def is_json(path: Path) -> bool:
    return path.suffix.lower() == ".json"


def load_document(path: Path, error: type[InputError]) -> Any:
    """Load a YAML or JSON file (by extension) into plain Python data."""
    text = read_text(path, error)
    if is_json(path):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise error(str(path), f"invalid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno) from None
    try:
        return yaml.load(text, Loader=_SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise error(str(path), f"invalid YAML: {exc.problem}", line=line) from None
    except yaml.YAMLError as exc:
        raise error(str(path), f"invalid YAML: {exc}") from None


def json_lines(path: str | Path, error: type[InputError], what: str, shape: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) of each non-blank line of a JSON Lines file; unreadable files and lines
    that are not JSON raise `error` naming the file and the line. `shape` tells the user what a line holds."""
    source = str(path)
    try:
        with Path(path).open(encoding="utf-8") as f:
            for n, text in enumerate(f, 1):
                if not text.strip():
                    continue
                try:
                    obj = json.loads(text)
                except ValueError as exc:
                    raise error(source, f"not JSON ({exc}); {shape}", line=n) from exc
                yield n, obj
    except (OSError, UnicodeDecodeError) as exc:
        raise error(source, f"cannot read {what} ({exc}); check the path and that it is UTF-8 text") from exc


def yaml_line(path: Path, loc: Sequence[int | str]) -> int | None:
    """The 1-based line of the deepest YAML node on `loc` (a pydantic error location)."""
    if is_json(path):
        return None
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, yaml.YAMLError):
        return None
    line = None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            found = None
            for key_node, value_node in node.value:
                if key_node.value == key:
                    found = value_node
                    line = key_node.start_mark.line + 1
                    break
            if found is None:
                break
            node = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    if line is None and node is not None:
        line = node.start_mark.line + 1
    return line


def dotted(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def raise_validation_error(path: Path, exc: ValidationError, error: type[InputError]) -> NoReturn:
    """Turn the first pydantic error into one line naming file, line and field."""
    first = exc.errors()[0]
    loc = [p for p in first["loc"] if isinstance(p, int | str)]
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key; remove it or check its spelling"
    elif first["type"] == "missing":
        msg = "required field is missing; add it"
    raise error(str(path), msg, line=yaml_line(path, loc), field=dotted(loc) or None) from None


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and rename, so a failure never leaves a half-written file."""
    write_atomic_bytes(path, text.encode("utf-8"))


def write_atomic_bytes(path: Path, data: bytes) -> None:
    """`write_atomic` for bytes (an image)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(
            f"{path}: cannot write ({exc.strerror}); check that the directory exists and is writable"
        ) from None


M = TypeVar("M", bound=BaseModel)


def load_model(path: Path, model: type[M], error: type[InputError], what: str, keys: str, data: Any = None) -> M:
    """Validate a YAML/JSON mapping file into `model`; errors name the file, the line and the field."""
    if data is None:
        data = load_document(path, error)
    if not isinstance(data, dict):
        raise error(str(path), f"{what} must be a mapping ({keys})")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise_validation_error(path, exc, error)
