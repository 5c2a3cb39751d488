"""The shape of a JSON document, for the places fabricd builds or stores one (ticket bodies, evidence, API answers):
a named type instead of `Any`, so mypy checks what goes in."""

from __future__ import annotations

from typing import TypeAlias

JsonValue: TypeAlias = "str | int | float | bool | list[JsonValue] | dict[str, JsonValue] | None"
JsonDict: TypeAlias = "dict[str, JsonValue]"
