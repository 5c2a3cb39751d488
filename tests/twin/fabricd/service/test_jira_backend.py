"""The Jira ticket backend against a fake Jira REST server over a real socket, driven by the real `jira` library.

The fake implements only what the library sends for these operations (every request is logged and the tests check
the paths): serverInfo, field, search (Data Center) and search/jql (Cloud), issue create/get, comment list/add. It
checks the basic-auth header on every request, like Jira.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from jira import JIRA
from pydantic import SecretStr

from fabricd.service.config import JiraSettings, SecretRef
from fabricd.service.state import Ticket
from fabricd.service.tickets.base import TicketError
from fabricd.service.tickets.jira_backend import JiraBackend

USER = "fabricd-bot"
TOKEN = "s3cr3t-T0KEN-do-not-log"
BASIC = base64.b64encode(f"{USER}:{TOKEN}".encode()).decode()
API = "/rest/api/2/"
T0 = 1_700_000_000_000_000_000


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+0000"


class FakeJira:
    """Issues and comments in memory; `requests` logs (method, path, query) of everything the client sent."""

    def __init__(self, deployment: str = "Server", project: str = "FAB") -> None:
        self.deployment = deployment
        self.project = project
        self.issues: dict[str, dict[str, Any]] = {}
        self.comments: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[tuple[str, str, dict[str, list[str]]]] = []
        self.fail: int | None = None  # answer every request with this status
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> FakeJira:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- test helpers --------------------------------------------------------------------------------------------
    def paths(self, method: str | None = None) -> list[str]:
        return [p for m, p, _ in self.requests if method is None or m == method]

    def add_issue(self, labels: list[str] | None = None, status: str = "To Do") -> str:
        with self.lock:
            return self._create({"summary": "made by hand", "labels": labels or []}, status)

    def set_status(self, key: str, status: str, resolutiondate: str | None = None) -> None:
        self.issues[key]["fields"]["status"] = {"name": status}
        self.issues[key]["fields"]["resolutiondate"] = resolutiondate

    # --- the REST API ----------------------------------------------------------------------------------------
    def _create(self, fields: dict[str, Any], status: str = "To Do") -> str:
        n = len(self.issues) + 1
        key = f"{self.project}-{n}"
        now = _now()
        self.issues[key] = {
            "id": str(10000 + n),
            "key": key,
            "self": f"{self.url}{API}issue/{10000 + n}",
            "fields": {
                **fields,
                "status": {"name": status},
                "created": now,
                "resolutiondate": None,
                "statuscategorychangedate": now,
            },
        }
        self.comments[key] = []
        return key

    def _search(self, q: dict[str, Any], cloud: bool) -> tuple[int, Any]:
        jql = str(q.get("jql", ""))
        wanted = q.get("fields") or ["*all"]
        if m := re.fullmatch(r'project = "([^"]+)" AND labels = "([^"]+)" ORDER BY created ASC', jql):
            hits = [
                i
                for i in self.issues.values()
                if i["key"].startswith(m.group(1) + "-") and m.group(2) in i["fields"].get("labels", [])
            ]
        elif m := re.fullmatch(r"key in \(([A-Z0-9_, -]+)\)", jql):
            keys = [k.strip() for k in m.group(1).split(",")]
            missing = [k for k in keys if k not in self.issues]
            validate = str(q.get("validateQuery", "true")).lower() != "false"
            if missing and (cloud or validate):
                msg = f"An issue with key '{missing[0]}' does not exist for field 'key'."
                return 400, {"errorMessages": [msg], "errors": {}}
            hits = [self.issues[k] for k in keys if k in self.issues]
        else:
            return 400, {"errorMessages": [f"fake Jira cannot parse JQL {jql!r}"], "errors": {}}
        issues = [_only(i, wanted) for i in hits[: int(q.get("maxResults", 50))]]
        if cloud:
            return 200, {"issues": issues, "isLast": True}
        return 200, {"startAt": 0, "maxResults": int(q.get("maxResults", 50)), "total": len(hits), "issues": issues}

    def handle(self, method: str, path: str, q: dict[str, Any], auth: str, body: Any) -> tuple[int, Any]:
        if self.fail is not None:  # a broken server that echoes what it got, credentials included
            return self.fail, {"errorMessages": [f"internal error handling request with Authorization: {auth}"]}
        if auth != f"Basic {BASIC}":
            return 401, {"errorMessages": ["You are not authenticated. Authentication required to perform this."]}
        if not path.startswith(API):
            return 404, {"errorMessages": ["no such resource"]}
        res = path[len(API) :]
        if res == "serverInfo":
            return 200, {"baseUrl": self.url, "version": "9.12.0", "versionNumbers": [9, 12, 0],
                         "deploymentType": self.deployment, "serverTitle": "fake"}  # fmt: skip
        if res == "field":
            return 200, [
                {"id": "status", "name": "Status", "clauseNames": ["status"]},
                {"id": "labels", "name": "Labels", "clauseNames": ["labels"]},
                {"id": "resolutiondate", "name": "Resolved", "clauseNames": ["resolutiondate", "resolved"]},
            ]
        if res in ("search", "search/jql"):
            if (res == "search/jql") != (self.deployment == "Cloud"):
                return 410, {"errorMessages": [f"{res} is not the search API of a {self.deployment} Jira"]}
            return self._search(body if method == "POST" else q, cloud=res == "search/jql")
        if res == "issue" and method == "POST":
            f = body["fields"]
            if f["project"] != {"key": self.project} or f["issuetype"] != {"name": "Task"}:
                return 400, {"errorMessages": [], "errors": {"project": "bad project or issue type"}}
            if not f.get("summary") or "\n" in f["summary"] or any(" " in label for label in f["labels"]):
                return 400, {"errorMessages": [], "errors": {"summary": "bad summary or labels"}}
            key = self._create(dict(f))
            return 201, {"id": self.issues[key]["id"], "key": key, "self": self.issues[key]["self"]}
        if m := re.fullmatch(r"issue/([A-Z0-9_]+-\d+)(/comment)?", res):
            key = m.group(1)
            if key not in self.issues:
                return 404, {"errorMessages": ["Issue does not exist or you do not have permission to see it."]}
            if not m.group(2) and method == "GET":
                wanted = q["fields"][0].split(",") if "fields" in q else ["*all"]
                return 200, _only(self.issues[key], wanted)
            comments = self.comments[key]
            if method == "POST":
                c = {"id": str(20000 + sum(len(v) for v in self.comments.values())), "body": body["body"],
                     "created": _now(), "author": {"name": USER}}  # fmt: skip
                comments.append(c)
                return 201, c
            shown = list(reversed(comments)) if q.get("orderBy") == ["-created"] else list(comments)
            shown = shown[: int(q.get("maxResults", ["5000"])[0])]
            return 200, {"startAt": 0, "maxResults": len(shown), "total": len(comments), "comments": shown}
        return 404, {"errorMessages": [f"fake Jira has no {method} {res}"]}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                u = urlsplit(self.path)
                q: dict[str, Any] = parse_qs(u.query)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw) if raw else None
                with fake.lock:
                    fake.requests.append((self.command, u.path, q))
                    if u.path.endswith(("/search", "/search/jql")):  # fields come as repeated parameters
                        q = {k: (v if k == "fields" else v[0]) for k, v in q.items()}
                    status, answer = fake.handle(self.command, u.path, q, self.headers.get("Authorization", ""), body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json;charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


def _only(issue: dict[str, Any], wanted: list[str]) -> dict[str, Any]:
    fields = issue["fields"] if "*all" in wanted else {k: v for k, v in issue["fields"].items() if k in wanted}
    return {"id": issue["id"], "key": issue["key"], "self": issue["self"], "fields": dict(fields)}


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(params=["Server", "Cloud"])
def fake(request: pytest.FixtureRequest) -> Iterator[FakeJira]:
    with FakeJira(deployment=request.param) as f:
        yield f


def settings(url: str) -> JiraSettings:
    return JiraSettings(url=url, project="FAB", username=USER, token=SecretRef(env="FABRICD_JIRA_TOKEN"))


def backend(url: str, token: str = TOKEN) -> JiraBackend:
    return JiraBackend(settings(url), SecretStr(token))


def ticket(**kw: Any) -> Ticket:
    t = Ticket(
        id=7, fault="link_flap:leaf1:Ethernet1/1--spine1:Ethernet1/1", kind="link_flap", device="leaf1",
        port="Ethernet1/1", status="open", title="Link leaf1:Ethernet1/1 -- spine1:Ethernet1/1 is flapping",
        body={
            "summary": "leaf1:Ethernet1/1 went down 6 times in 60 s",
            "evidence": {"flaps": 6, "window_s": 60, "rx_power_dbm": {"leaf1": -14.2, "spine1": -3.1}},
            "no_action_reason": "observe mode",
            "likely_repair": "clean the connector on leaf1:Ethernet1/1 (low receive power on that end only)",
        },
        escalation=False, recurrences=0, external_ref=None, created_ts=T0, updated_ts=T0,
        resolved_ts=None, resolved_by=None,
    )  # fmt: skip
    return replace(t, **kw)


def comments_on(fake: FakeJira, key: str) -> list[str]:
    return [c["body"] for c in fake.comments[key]]


# --- publish ---------------------------------------------------------------------------------------------------
def test_create_files_one_issue_with_summary_labels_and_a_readable_description(fake: FakeJira) -> None:
    b = backend(fake.url)
    assert fake.requests == []  # the client is created on first use
    t = ticket()
    key = b.publish(t)
    assert key == "FAB-1"
    issue = fake.issues["FAB-1"]["fields"]
    assert issue["summary"] == t.title
    assert issue["labels"] == ["fabricd", "link_flap", f"fabricd-ticket-7-{T0}"]
    d = issue["description"]
    for part in ("went down 6 times", "leaf1", "Ethernet1/1", "rx_power_dbm", "observe mode", "clean the connector"):
        assert part in d
    assert d.index("Evidence") < d.index("No action taken because") < d.index("Likely repair")
    # What the library really sent: server info, the label search (crash safety), then the create.
    search = "/rest/api/2/search/jql" if fake.deployment == "Cloud" else "/rest/api/2/search"
    assert fake.paths("GET")[0] == "/rest/api/2/serverInfo"
    assert search in fake.paths("GET")
    assert fake.paths("POST") == ["/rest/api/2/issue"]


def test_publishing_the_same_version_again_adds_no_comment(fake: FakeJira) -> None:
    b = backend(fake.url)
    key = b.publish(ticket())
    saved = ticket(external_ref=key)
    assert b.publish(saved) == key
    assert b.publish(saved) == key
    assert comments_on(fake, "FAB-1") == []
    # Saving the reference bumps updated_ts but changes nothing a reader sees: still no comment.
    assert b.publish(replace(saved, updated_ts=T0 + 1)) == key
    assert comments_on(fake, "FAB-1") == []
    assert fake.paths("POST") == ["/rest/api/2/issue"]


def test_an_update_is_one_comment_per_version(fake: FakeJira) -> None:
    b = backend(fake.url)
    key = b.publish(ticket())
    body = {**ticket().body, "action": "disabled leaf1:Ethernet1/1 (auto mode)"}
    del body["no_action_reason"]
    newer = ticket(external_ref=key, updated_ts=T0 + 10, recurrences=2, body=body)
    for _ in range(3):
        assert b.publish(newer) == key
    [comment] = comments_on(fake, "FAB-1")
    assert "seen again 2 times" in comment
    assert "disabled leaf1:Ethernet1/1 (auto mode)" in comment
    assert f"version {T0 + 10}" in comment
    assert "came back" not in comment
    # A later version is one more comment.
    b.publish(replace(newer, updated_ts=T0 + 20, recurrences=3))
    assert len(comments_on(fake, "FAB-1")) == 2
    assert fake.paths("POST").count("/rest/api/2/issue/FAB-1/comment") == 2


def test_a_crash_between_create_and_saving_the_key_reuses_the_issue(fake: FakeJira) -> None:
    fake.add_issue(labels=["fabricd", "link_flap", "fabricd-ticket-7-999"])  # same id, older state database
    b = backend(fake.url)
    first = b.publish(ticket())
    assert first == "FAB-2"
    # fabricd crashed before saving FAB-2: the ticket comes back without a reference.
    assert backend(fake.url).publish(ticket()) == first
    assert backend(fake.url).publish(ticket(updated_ts=T0 + 5)) == first
    assert sorted(fake.issues) == ["FAB-1", "FAB-2"]
    assert fake.paths("POST").count("/rest/api/2/issue") == 1
    assert comments_on(fake, "FAB-2") == []  # updated_ts moved but nothing visible changed


def test_a_reference_from_another_backend_files_a_jira_issue(fake: FakeJira) -> None:
    assert backend(fake.url).publish(ticket(external_ref="webhook:7")) == "FAB-1"


def test_a_fault_back_after_the_issue_was_closed_is_a_comment_not_a_transition(fake: FakeJira) -> None:
    b = backend(fake.url)
    key = b.publish(ticket())
    assert key is not None
    fake.set_status(key, "Done", resolutiondate="2020-01-01T00:00:00.000+0000")
    t = ticket(external_ref=key)
    assert b.resolved([t]) == [7]  # people closed it
    # fabricd resolved it, then the fault came back and fabricd re-opened the ticket.
    back = replace(t, updated_ts=T0 + 100, recurrences=1)
    assert b.publish(back) == key
    [comment] = comments_on(fake, key)
    assert "came back after this issue was closed" in comment and "status Done" in comment
    assert not any("transition" in p for p in fake.paths())
    assert fake.issues[key]["fields"]["status"] == {"name": "Done"}
    # Closed before that comment: not resolved again at the next sync (no resolve/re-open loop) ...
    assert b.resolved([back]) == []
    # ... until someone closes the issue again.
    fake.set_status(key, "Closed", resolutiondate="2099-01-01T00:00:00.000+0000")
    assert b.resolved([back]) == [7]


# --- resolved --------------------------------------------------------------------------------------------------
def test_resolved_reports_the_open_tickets_whose_issues_are_done(fake: FakeJira) -> None:
    keys = [fake.add_issue() for _ in range(4)]
    fake.set_status(keys[0], "Done")
    fake.set_status(keys[1], "In Progress")
    fake.set_status(keys[2], "resolved")  # status names compare without case
    fake.set_status(keys[3], "Done")
    tickets = [
        ticket(id=1, external_ref=keys[0]),
        ticket(id=2, external_ref=keys[1]),
        ticket(id=3, external_ref=keys[2]),
        ticket(id=4, external_ref=keys[3], status="resolved"),  # already resolved in fabricd
        ticket(id=5, external_ref=None),
        ticket(id=6, external_ref="webhook:6"),
    ]
    assert backend(fake.url).resolved(tickets) == [1, 3]
    search = "/rest/api/2/search/jql" if fake.deployment == "Cloud" else "/rest/api/2/search"
    assert fake.paths().count(search) == 1


def test_resolved_searches_fifty_keys_at_a_time(fake: FakeJira) -> None:
    keys = [fake.add_issue() for _ in range(120)]
    for k in keys[::10]:
        fake.set_status(k, "Done")
    tickets = [ticket(id=i + 1, external_ref=k) for i, k in enumerate(keys)]
    assert backend(fake.url).resolved(tickets) == [i + 1 for i in range(0, 120, 10)]
    search = "/rest/api/2/search/jql" if fake.deployment == "Cloud" else "/rest/api/2/search"
    assert fake.paths().count(search) == 3
    jqls = [q["jql"][0] for _, p, q in fake.requests if p == search]
    assert [j.count(",") + 1 for j in jqls] == [50, 50, 20]


def test_resolved_survives_a_deleted_issue(fake: FakeJira) -> None:
    a, b = fake.add_issue(), fake.add_issue()
    fake.set_status(b, "Done")
    tickets = [ticket(id=1, external_ref=a), ticket(id=2, external_ref=b), ticket(id=3, external_ref="FAB-99")]
    assert backend(fake.url).resolved(tickets) == [2]


def test_resolved_without_jira_tickets_asks_nothing(fake: FakeJira) -> None:
    assert backend(fake.url).resolved([ticket(), ticket(id=2, status="resolved", external_ref="FAB-1")]) == []
    assert fake.requests == []


# --- failures --------------------------------------------------------------------------------------------------
def _assert_safe(err: TicketError, url: str, ticket_ids: str = "ticket 7") -> None:
    msg = str(err)
    assert url in msg and ticket_ids in msg
    assert TOKEN not in msg and BASIC not in msg
    assert err.__cause__ is None and err.__suppress_context__  # tracebacks never print the JIRAError (headers)


def test_a_server_error_is_a_ticket_error_without_the_token(fake: FakeJira) -> None:
    fake.fail = 500
    b = backend(fake.url)
    with pytest.raises(TicketError) as err:
        b.publish(ticket())
    _assert_safe(err.value, fake.url)
    assert "HTTP 500" in str(err.value)
    assert "***" in str(err.value)  # the echoed header was scrubbed
    with pytest.raises(TicketError) as err:
        b.resolved([ticket(external_ref="FAB-1"), ticket(id=8, external_ref="FAB-2")])
    _assert_safe(err.value, fake.url, "tickets 7, 8")
    # The server recovers: the next call succeeds with a fresh client.
    fake.fail = None
    assert b.publish(ticket()) == "FAB-1"


def test_a_server_error_after_connecting_is_a_ticket_error(fake: FakeJira) -> None:
    b = backend(fake.url)
    key = b.publish(ticket())
    fake.fail = 503
    with pytest.raises(TicketError) as err:
        b.publish(ticket(external_ref=key, updated_ts=T0 + 1, recurrences=1))
    _assert_safe(err.value, fake.url)
    assert "HTTP 503" in str(err.value)


def test_a_wrong_token_is_refused_by_the_server_and_reported_without_it(fake: FakeJira) -> None:
    wrong = "wrong-token-also-secret"
    with pytest.raises(TicketError) as err:
        backend(fake.url, token=wrong).publish(ticket())
    assert "HTTP 401" in str(err.value)
    assert wrong not in str(err.value)
    _assert_safe(err.value, fake.url)
    assert fake.issues == {}


def test_an_unreachable_server_fails_fast_without_credentials_in_the_message() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    url = f"http://127.0.0.1:{port}/jira?token={TOKEN}"  # config refuses user:password@; a query may still carry one
    start = time.monotonic()
    with pytest.raises(TicketError) as err:
        backend(url).publish(ticket())
    assert time.monotonic() - start < 3  # no library retries with 20 s sleeps
    _assert_safe(err.value, f"http://127.0.0.1:{port}/jira")
    assert "cannot connect" in str(err.value)


def test_the_client_is_built_once_on_first_use_with_the_configured_options(fake: FakeJira) -> None:
    made: list[dict[str, Any]] = []

    def factory(**kw: Any) -> JIRA:
        made.append(kw)
        return JIRA(**kw)

    b = JiraBackend(settings(fake.url), SecretStr(TOKEN), client_factory=factory, timeout_s=3)
    assert made == [] and fake.requests == []
    key = b.publish(ticket())
    b.resolved([ticket(external_ref=key)])
    assert made == [{"server": fake.url, "basic_auth": (USER, TOKEN), "max_retries": 0, "timeout": 3}]
    assert fake.paths().count("/rest/api/2/serverInfo") == 1
