"""A person's text on the server side (issue 54): the API's bodies and the page's forms check it with one validator
(surface/person_text.py): stripped, a control character refused with a 400 naming the field, whitespace only
refused as empty is; the text log names it escaped, so a reason cannot forge a log line."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient

from fabricd.service.daemon import Service
from fabricd.service.logs import TextFormatter
from fabricd.service.surface.api import create_app
from fabricd.service.surface.person_text import PersonTextError, check_text

from .test_access import make
from .test_web import login

CONTROL = "the control character (U+{:04X}); write it as plain text on one line"


@pytest.mark.parametrize(
    ("text", "out"),
    [("  optic swap \n", "optic swap"), ("a\x00", "U+0000"), ("a\x1b[31mred", "U+001B"), ("one\ntwo", "U+000A"),
     ("c1\x9b", "U+009B"), ("   ", "is empty; say it in words"), ("[/] [bold]x", "[/] [bold]x")],
)  # fmt: skip
def test_check_text(text: str, out: str) -> None:
    if out.startswith("U+") or out.startswith("is empty"):
        with pytest.raises(PersonTextError) as e:
            check_text(text)
        assert out in str(e.value) and "\n" not in str(e.value)
    else:
        assert check_text(text) == out


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        ("/api/v1/maintenance", {"kind": "switch", "target": "spine-r0-0", "reason": "   "},
         "reason: is empty; say it in words"),
        ("/api/v1/maintenance", {"kind": "switch", "target": "spine-r0-0", "reason": "x\x1b]0;owned\x07"},
         "reason: contains a control character (U+001B); write it as plain text on one line"),
        ("/api/v1/maintenance", {"kind": "switch", "target": "spine-r0-0", "reason": "ok", "until": "2030-01-01Z\x00"},
         "until: contains a control character (U+0000); write it as plain text on one line"),
        ("/api/v1/maintenance", {"kind": "switch", "target": "spine-r0-0\n", "reason": "a\nb"},
         "reason: contains a control character (U+000A); write it as plain text on one line"),
        ("/api/v1/maintenance/undrain", {"target": "spine\x00"},
         "target: contains a control character (U+0000); write it as plain text on one line"),
        ("/api/v1/mode", {"mode": "observe", "reason": "\t"}, "reason: is empty; say it in words"),
        ("/api/v1/actions/1/reject", {"reason": "no\x85more"},
         "reason: contains a control character (U+0085); write it as plain text on one line"),
    ],
)  # fmt: skip
def test_the_api_refuses_control_characters_and_blank_reasons(svc: Service, path: str, body: dict[str, object],
                                                              error: str) -> None:  # fmt: skip
    c = TestClient(create_app(svc))
    admin = {"Authorization": f"Bearer {make(c, 'ada', 'admin')}"}
    r = c.post(path, json=body, headers=admin)
    assert (r.status_code, r.json()["error"]) == (400, error)
    assert svc.state.drains.all() == []


def test_the_page_forms_refuse_control_characters(svc: Service) -> None:
    c = TestClient(create_app(svc))
    csrf = login(c, make(c, "ada", "admin"))
    r = c.post("/ui/mode", data={"csrf": csrf, "mode": "approve", "reason": "why\x1b[2J"})
    assert r.status_code == 400 and "reason: contains a control character (U+001B)" in r.text
    r = c.post("/ui/actions/1/reject", data={"csrf": csrf, "reason": "no\x00"})
    assert r.status_code == 400 and "reason: contains a control character (U+0000)" in r.text


def test_a_log_line_shows_a_persons_text_escaped() -> None:
    forged = "swap\n2026-11-29 08:00:00 INFO fabricd: forged \x1b]0;title\x07"
    record = logging.LogRecord("fabricd.maintenance", logging.INFO, __file__, 1, "drain %d begun: %s", (3, forged),
                               None)  # fmt: skip
    line = TextFormatter("%(levelname)s %(name)s: %(message)s").format(record)
    assert line == (
        "INFO fabricd.maintenance: drain 3 begun: swap\\n2026-11-29 08:00:00 INFO fabricd: forged \\x1b]0;title\\x07"
    )
    assert "\n" not in line
