"""A person's text in a request (a reason, a target, a port, an --until), checked once for the API's bodies
(api.py) and the page's forms (web.py) alike: surrounding whitespace stripped; a C0 or C1 control character (NUL,
ESC, a newline inside the text, ...) refused with the field named, since the text is written to logs, tickets,
terminals and the audit log as it is; a required text empty after the strip refused as an empty one is. The length
caps stay the models' (`Field(max_length=...)`)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

# C0 (NUL..US), DEL and C1 (U+0080..U+009F): what a terminal or a log reader may act on
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class PersonTextError(ValueError):
    """The text cannot be taken as it is; the message says why, without repeating the text."""


def check_text(value: str, *, required: bool = True) -> str:
    """The text stripped, or PersonTextError."""
    text = value.strip()
    bad = CONTROL.search(text)
    if bad is not None:
        raise PersonTextError(
            f"contains a control character (U+{ord(bad.group()):04X}); write it as plain text on one line"
        )
    if required and not text:
        raise PersonTextError("is empty; say it in words")
    return text


def _pydantic(value: str) -> str:
    try:
        return check_text(value)
    except PersonTextError as e:
        raise PydanticCustomError("person_text", str(e)) from None


def _pydantic_optional(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return check_text(value, required=False) or None
    except PersonTextError as e:
        raise PydanticCustomError("person_text", str(e)) from None


# What the OpenAPI schema says of them (as strict as the check or stricter: no control character anywhere, and a
# required text holds something besides whitespace)
_PLAIN = r"[^\x00-\x1f\x7f-\x9f]*"
Text = Annotated[
    str, AfterValidator(_pydantic), Field(json_schema_extra={"pattern": rf"^{_PLAIN}[^\s\x00-\x1f\x7f-\x9f]{_PLAIN}$"})
]  # a required text: a reason, a target, a port
OptionalText = Annotated[
    str | None, AfterValidator(_pydantic_optional), Field(json_schema_extra={"pattern": rf"^{_PLAIN}$"})
]  # an --until: absent or blank is none
