"""A person's text is data wherever the CLI shows it (issue 54): a reason, a note, a title or anything else the API
answers is never read as Rich markup (`[/]` does not crash, `[bold]` shows as typed), its control characters (ESC
and OSC sequences, CR, newlines, NUL) are written out visibly instead of reaching the terminal, and a table cell is
capped. The API's answers are fed the way test_status_output.py feeds them."""

from __future__ import annotations

from typing import Any

import pytest

from fabricd.cli import main
from fabricd.cli.output import CELL_LIMIT, shown
from fabricd.cli.service_cmd import ApiClient
from tests.unit.cli.test_status_output import HEALTH

# every trap at once: markup that closes nothing, markup that would style, an OSC retitling the terminal, an ANSI
# colour, a newline that would forge a line, a CR that would overwrite it, and NUL
EVIL = "ok [/] [bold]no[/bold] \x1b]0;title\x07 \x1b[31mred\nforged\rover\x00end"
SHOWN = "ok [/] [bold]no[/bold] \\x1b]0;title\\x07 \\x1b[31mred\\nforged\\rover\\x00end"
RAW = ("\x1b", "\x07", "\x00", "\r")  # never in what the CLI prints
API = "http://127.0.0.1:1"


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], answers: dict[str, Any],
        *args: str) -> tuple[int, str]:  # fmt: skip
    monkeypatch.setattr(ApiClient, "call", lambda self, method, path, *a, **k: answers[path])
    code = main([*args, "--api", API])
    out, err = capsys.readouterr()
    assert err == "" and not any(c in out for c in RAW), (out, err)
    return code, out


def table_row(out: str, first: str) -> list[str]:
    """The cells of the table row whose first cell is `first` (rich's box: │ a │ b │)."""
    (row,) = [r for r in out.splitlines() if r.startswith(f"│ {first} ")]
    return [c.strip() for c in row.strip("│").split("│")]


def test_shown_escapes_every_control_and_caps() -> None:
    assert shown(EVIL) == SHOWN
    assert shown("\x9b2J \u202egnp.exe \x7f\t") == "\\x9b2J \\u202egnp.exe \\x7f\\t"  # C1 CSI, bidi, DEL, tab
    assert shown("x" * 10, 5) == "xxxx…" and shown("x" * 5, 5) == "x" * 5


DRAIN = {"id": 7, "kind": "link", "target": "leaf-g0-r0:Ethernet1/1", "state": "drained", "actor": "ops",
         "reason": EVIL, "created_ts": 0, "until_ts": None, "steps": ["guard: ok", "shut"], "done": 2,
         "detail": "[red]", "step": 2, "overran": False}  # fmt: skip


def test_status_prints_every_text_of_the_health_document_as_data(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    health = {
        **HEALTH, "disabled_ports": 1, "ha": {"enabled": True, "role": "standby", "instance": EVIL, "leader": "a"},
        "state": {"writable": False, "write_failures": 1, "last_error": EVIL},
        "in_flight": [{"action_id": 9, "op": "enable", "port": "leaf-g0-r0:Ethernet1/1", "for_s": 1.0,
                       "detail": EVIL}],
        "to_reapply": [{"port": "leaf-g0-r1:Ethernet2/1", "ticket_id": 3, "rule": "min_uplink_fraction",
                        "reason": EVIL}],
        "maintenance": [DRAIN],
    }  # fmt: skip
    code, out = run(monkeypatch, capsys, {"/api/v1/health": health}, "status")
    assert code == 0
    assert out.splitlines() == [
        "ok  fabricd 0.1.0  mode auto  up 12.0 s",
        f"state: cannot be written (1 failed writes): {SHOWN}; fabricd takes no action until it can",
        "telemetry: 18/18 switches synced, 0 stale",
        "open tickets: 3   ports held down: 1",
        f"  in flight: enable leaf-g0-r0:Ethernet1/1 (action 9, 1 s): {SHOWN}",
        f"  to re-apply: leaf-g0-r1:Ethernet2/1 (ticket 3): the guard refuses (min_uplink_fraction): {SHOWN}; "
        "retried every pass",
        f"maintenance: drain 7 of link leaf-g0-r0:Ethernet1/1: drained (step 2, by ops: {SHOWN}): [red]",
        f"hot standby: {SHOWN} is a standby; the leader is a",
    ]


def test_maintenance_lists_a_reason_with_markup_and_escapes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(monkeypatch, capsys, {"/api/v1/maintenance": {"maintenance": [DRAIN], "overran": []}},
                    "maintenance")  # fmt: skip
    assert code == 0
    assert table_row(out, "7") == ["7", "link", "leaf-g0-r0:Ethernet1/1", "drained", "2/2", "ops", SHOWN,
                                   "1970-01-01 00:00:00Z", "", "[red]"]  # fmt: skip


def test_actions_findings_and_tickets_tables_show_the_text_as_typed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    action = {"id": 4, "op": "disable", "device": "leaf-g0-r0", "port": "Ethernet1/1", "mode": "approve",
              "status": "rejected", "reason": EVIL}  # fmt: skip
    code, out = run(monkeypatch, capsys, {"/api/v1/actions": {"actions": [action]}}, "actions")
    assert code == 0
    assert table_row(out, "4") == ["4", "disable", "leaf-g0-r0", "Ethernet1/1", "approve", "rejected", SHOWN]

    finding = {"id": 5, "kind": "link_flap", "status": "cleared", "device": "leaf-g0-r0", "port": "Ethernet1/1",
               "severity": "warning", "summary": EVIL}  # fmt: skip
    code, out = run(monkeypatch, capsys, {"/api/v1/findings": {"findings": [finding]}}, "findings")
    assert code == 1  # findings listed: 1, as always
    assert table_row(out, "5") == ["5", "link_flap", "cleared", "leaf-g0-r0", "Ethernet1/1", "warning", SHOWN]

    ticket = {"id": 6, "status": "resolved", "kind": "link_flap", "device": "leaf-g0-r0", "port": "Ethernet1/1",
              "recurrences": 0, "title": EVIL}  # fmt: skip
    code, out = run(monkeypatch, capsys, {"/api/v1/tickets": {"tickets": [ticket]}}, "tickets")
    assert code == 0
    assert table_row(out, "6") == ["6", "resolved", "link_flap", "leaf-g0-r0", "Ethernet1/1", "0", SHOWN]


def test_a_long_reason_is_capped_in_a_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    action = {"id": 4, "op": "disable", "device": "d", "port": "p", "mode": "auto", "status": "done",
              "reason": "x" * 5000}  # fmt: skip
    code, out = run(monkeypatch, capsys, {"/api/v1/actions": {"actions": [action]}}, "actions")
    assert code == 0
    rows = [r for r in out.splitlines() if r.startswith("│")]  # the row and its folds
    assert "".join(r.strip("│").split("│")[6].strip() for r in rows) == "x" * (CELL_LIMIT - 1) + "…"


def test_a_ticket_shown_whole_prints_its_notes_and_evidence_as_data(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ticket = {"id": 6, "title": EVIL, "status": "open", "recurrences": 1,
              "body": {"status_note": EVIL, "likely_repair": "reseat", "evidence": {"note": EVIL},
                       "actions": [{"action_id": 4, "op": "disable", "port": "leaf-g0-r0:Ethernet1/1",
                                    "status": "done", "note": EVIL}]}}  # fmt: skip
    code, out = run(monkeypatch, capsys, {"/api/v1/tickets/6": ticket}, "tickets", "--show", "6")
    assert code == 0
    assert out.splitlines() == [
        f"#6 {SHOWN}  (open, 1 recurrences)",
        f"status note: {SHOWN}",
        "likely repair: reseat",
        f"  action 4 disable leaf-g0-r0:Ethernet1/1: done - {SHOWN}",
        "{",
        '  "note": "ok [/] [bold]no[/bold] \\u001b]0;title\\u0007 \\u001b[31mred\\nforged\\rover\\u0000end"',
        "}",
    ]


@pytest.mark.parametrize(
    ("args", "path", "answer", "printed"),
    [
        (["approve", "4"], "/api/v1/actions/4/approve",
         {"id": 4, "status": EVIL, "op": "disable", "device": "d", "port": "p"}, f"action 4: {SHOWN} (disable d:p)"),
        (["reject", "4", "--reason", EVIL], "/api/v1/actions/4/reject",
         {"id": 4, "status": "rejected", "detail": EVIL}, f"action 4: rejected ({SHOWN})"),
        (["release", "d:p", "--reason", EVIL], "/api/v1/holds/release", {"port": "d:p", "note": EVIL},
         f"d:p: {SHOWN}"),
        (["resolve", "6"], "/api/v1/tickets/6/resolve", {"id": 6, "status": EVIL},
         f"ticket 6: {SHOWN}; held-down ports are being re-enabled: d:{SHOWN}"),
        (["mode", "observe", "--reason", EVIL], "/api/v1/mode", {"mode": "observe", "by": EVIL},
         f"remediation mode: observe (by {SHOWN})"),
        (["undrain", "d:p"], "/api/v1/maintenance/undrain",
         {"id": 7, "kind": "port", "target": EVIL, "state": "undrained"}, f"drain 7 of port {SHOWN}: undrained"),
    ],
    ids=["approve", "reject", "release", "resolve", "mode", "undrain"],
)  # fmt: skip
def test_answers_to_requests_are_printed_as_data(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], path: str,
    answer: dict[str, Any], printed: str,
) -> None:  # fmt: skip
    running = {"actions": [{"op": "enable", "ticket_id": 6, "device": "d", "port": EVIL}]}
    before = {"id": 6, "status": "open"}
    code, out = run(monkeypatch, capsys, {path: answer, "/api/v1/actions": running, "/api/v1/tickets/6": before}, *args)
    assert code == 0
    assert out == printed + "\n"


def test_resolving_a_ticket_resolved_before_says_nothing_is_re_enabled(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    resolved = {"id": 6, "status": "resolved"}
    answers = {"/api/v1/tickets/6/resolve": resolved, "/api/v1/actions": {"actions": []}, "/api/v1/tickets/6": resolved}
    code, out = run(monkeypatch, capsys, answers, "resolve", "6")
    assert (code, out) == (0, "ticket 6: resolved; it was resolved before and holds no port down: nothing re-enabled\n")


def test_a_drain_echoes_its_target_and_steps_as_data(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = {"dry_run": False, "drain": {**DRAIN, "done": 1}, "jobs": [EVIL], "steps": [EVIL, "shut"]}
    code, out = run(monkeypatch, capsys, {"/api/v1/maintenance": answer}, "drain", "port", EVIL, "--reason", EVIL)
    assert code == 0
    assert out.splitlines() == [
        f"drain 7 of port {SHOWN}: drained",
        f"jobs whose traffic it carries: {SHOWN}",
        f"  1. {SHOWN} (done)",
        "  2. shut",
    ]


def test_an_error_from_the_api_is_one_line_with_the_text_escaped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import httpx

    monkeypatch.setattr(httpx, "request", lambda *a, **k: httpx.Response(409, json={"error": EVIL}))
    code = main(["resolve", "6", "--api", API])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == f"fabricd: error: {API}/api/v1/tickets/6/resolve: HTTP 409: {SHOWN}\n"


def test_jobs_show_a_job_named_by_its_owner_as_data(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    job = {"id": "j[/]1", "name": EVIL, "priority": None, "gpus": 8, "groups": [0], "rails": [0, 1], "gbps": 10.0,
           "rail_imbalance": 0.0, "outliers": [], "attention": []}  # fmt: skip
    code, out = run(monkeypatch, capsys, {"/api/v1/jobs": {"source": {"configured": True}, "jobs": [job]}}, "jobs")
    assert code == 0
    assert table_row(out, "j[/]1") == ["j[/]1", SHOWN, "-", "8", "0", "0,1", "10", "0 %", "-", "0"]
