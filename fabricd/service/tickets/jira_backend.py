"""Tickets as Jira issues, through the `jira` library (REST API v2: Jira Cloud and Data Center).

One issue per fabricd ticket, labelled `fabricd-ticket-<id>-<created_ts>`: before creating an issue the backend
searches for that label, so a crash between creating the issue and saving its key is still one issue (the creation
time keeps the label unique when a fresh state database starts counting ids from 1 again).

Updates are comments ending in a marker that names the ticket version (`updated_ts`) and a digest of what a reader
sees (title, body, status, recurrences). The same version twice adds nothing, and neither does a new version that
changed nothing visible (saving the external reference bumps `updated_ts`). fabricd never drives Jira's workflow:
people close issues there and `resolved` reports it. A fault that comes back after its issue was closed gets a comment
saying so, and `resolved` does not report that ticket again until someone closes the issue after that comment
(otherwise the re-opened ticket would be resolved again at the next sync).

Errors become `TicketError` naming the server (without credentials) and the ticket. Never the exception text: a
`JIRAError` prints the request headers, and with them the basic-auth token.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from jira import JIRA, JIRAError
from pydantic import SecretStr

from ..config import JiraSettings
from ..state import Ticket
from .base import TicketError

log = logging.getLogger("fabricd.tickets.jira")

BATCH = 50  # issue keys per `key in (...)` search
_COMMENTS = 50  # newest comments read to find fabricd's markers
_STATUS_FIELDS = ("status", "resolutiondate", "statuscategorychangedate")
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]*-[1-9][0-9]*$")
_MARKER = re.compile(r"\(fabricd ticket (\d+), version (\d+), digest ([0-9a-f]{12})(, recurred)?\)")

# Body keys fabricd's ticket writers use, in the order a reader wants them; anything else goes under "Other details".
_SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Finding", ("summary", "finding")),
    ("Evidence", ("evidence",)),
    ("Action taken", ("action", "action_taken")),
    ("No action taken because", ("no_action", "no_action_reason", "why_no_action")),
    ("Likely repair", ("likely_repair", "repair", "likely_cause", "recommendation")),
)


class JiraBackend:
    name = "jira"

    def __init__(
        self,
        settings: JiraSettings,
        token: SecretStr,
        *,
        client_factory: Callable[..., Any] | None = None,
        max_retries: int = 0,  # the service retries at the next sync; the library would sleep 20 s+ per retry
        timeout_s: float = 10.0,
    ) -> None:
        self.settings = settings
        self.server = _safe(settings.url)
        self._token = token
        self._factory: Callable[..., Any] = JIRA if client_factory is None else client_factory
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self._client: JIRA | None = None
        self._lock = threading.RLock()  # one request at a time: a requests.Session is not thread-safe
        self._done = {s.casefold() for s in settings.done_statuses}

    # --- the TicketBackend contract --------------------------------------------------------------------------
    def publish(self, ticket: Ticket, guard: Callable[[], None] | None = None) -> str | None:
        ask = guard or (lambda: None)  # before each write (create_issue, add_comment), after the reads before it
        with self._call(f"ticket {ticket.id}", "not published") as j:
            key = ticket.external_ref if _is_key(ticket.external_ref) else None
            if key is None:
                if ticket.external_ref is not None:
                    log.info("ticket %d: reference %r is not a Jira issue; filing one", ticket.id, ticket.external_ref)
                key = self._find(j, ticket)
                if key is None:
                    ask()
                    return self._create(j, ticket)
                log.info("ticket %d: reusing %s (created before fabricd could save its key)", ticket.id, key)
            self._update(j, key, ticket, ask)
            return key

    def resolved(self, tickets: list[Ticket]) -> list[int]:
        refs: dict[str, list[Ticket]] = {}
        for t in tickets:
            if t.status == "open" and t.external_ref is not None and _is_key(t.external_ref):
                refs.setdefault(t.external_ref.upper(), []).append(t)
        keys = sorted(refs)
        out: list[int] = []
        for i in range(0, len(keys), BATCH):
            batch = keys[i : i + BATCH]
            ids = [t.id for k in batch for t in refs[k]]
            with self._call(_which(ids), "not checked") as j:
                for issue in self._statuses(j, batch):
                    key = str(issue.get("key", "")).upper()
                    fields = issue.get("fields") or {}
                    if key not in refs or not self._is_done(fields):
                        continue
                    closed = _closed_at(fields)
                    comments = None if closed is None else self._comments(j, key)
                    for t in refs[key]:
                        if comments is not None and closed is not None and _recurred_after(comments, t.id, closed):
                            continue  # closed before the fault came back; wait for someone to close it again
                        out.append(t.id)
        return sorted(out)

    # --- Jira calls ------------------------------------------------------------------------------------------
    @contextmanager
    def _call(self, which: str, outcome: str) -> Iterator[JIRA]:
        """The client, with every library or transport failure turned into a TicketError safe to log."""
        with self._lock:
            try:
                yield self._jira()
            except (JIRAError, requests.RequestException, ValueError, KeyError, TypeError, AttributeError) as e:
                msg = f"jira {self.server}: {which} {outcome} ({self._problem(e)}); will retry"
                raise TicketError(msg) from None

    def _jira(self) -> JIRA:
        if self._client is None:  # created on first use: constructing it already talks to the server
            self._client = self._factory(
                server=self.settings.url,
                basic_auth=(self.settings.username, self._token.get_secret_value()),
                max_retries=self.max_retries,
                timeout=self.timeout_s,
            )
        assert self._client is not None
        return self._client

    def _find(self, j: JIRA, ticket: Ticket) -> str | None:
        jql = f"project = {_q(self.settings.project)} AND labels = {_q(_label(ticket))} ORDER BY created ASC"
        r = j.search_issues(jql, maxResults=1, fields=["status"], json_result=True)
        issues = r.get("issues") or []
        return str(issues[0]["key"]) if issues else None

    def _create(self, j: JIRA, ticket: Ticket) -> str:
        fields = {
            "project": {"key": self.settings.project},  # by key and name: no project or createmeta lookups
            "issuetype": {"name": self.settings.issue_type},
            "summary": " ".join(ticket.title.split())[:255] or f"fabricd ticket {ticket.id}",
            "description": "\n".join([*_describe(ticket), "", _marker(ticket)]),
            "labels": ["fabricd", re.sub(r"\s+", "_", ticket.kind) or "fabricd-fault", _label(ticket)],
        }
        key = str(j.create_issue(fields=fields, prefetch=False).key)
        log.info("ticket %d: filed %s", ticket.id, key)
        return key

    def _update(self, j: JIRA, key: str, ticket: Ticket, ask: Callable[[], None]) -> None:
        raw = j.issue(key, fields="status,description").raw or {}
        fields = raw.get("fields") or {}
        texts = [str(fields.get("description") or ""), *(str(c.get("body") or "") for c in self._comments(j, key))]
        mine = [m for text in texts for m in _MARKER.finditer(text) if int(m.group(1)) == ticket.id]
        if any(int(m.group(2)) == ticket.updated_ts for m in mine):
            return  # this version is already there
        if mine and mine[-1].group(3) == _digest(ticket):
            return  # a new version, but nothing a reader would see changed
        recurred = ticket.status == "open" and self._is_done(fields)
        ask()
        j.add_comment(key, _comment(ticket, str((fields.get("status") or {}).get("name", "")), recurred))
        log.info("ticket %d: commented on %s%s", ticket.id, key, " (recurred after it was closed)" if recurred else "")

    def _comments(self, j: JIRA, key: str) -> list[dict[str, Any]]:
        """The newest comments, oldest first."""
        found = j.comments(key, order_by="-created", max_results=_COMMENTS)
        raws = [c.raw for c in found if c.raw]
        return sorted(raws, key=lambda c: int(c.get("id") or 0))

    def _statuses(self, j: JIRA, keys: list[str]) -> list[dict[str, Any]]:
        try:
            r = j.search_issues(
                f"key in ({', '.join(keys)})",
                maxResults=len(keys),
                fields=list(_STATUS_FIELDS),
                validate_query=False,  # Data Center: a deleted key is a warning, not an error
                json_result=True,
            )
            return list(r.get("issues") or [])
        except JIRAError as e:
            if e.status_code != 400:
                raise
        # Cloud refuses the whole query when one key is gone (deleted, or moved where we cannot see): one by one.
        found = []
        for key in keys:
            try:
                found.append(j.issue(key, fields=",".join(_STATUS_FIELDS)).raw or {})
            except JIRAError as e:
                if e.status_code != 404:
                    raise
                log.warning("jira %s: issue %s no longer exists; its ticket stays open in fabricd", self.server, key)
        return found

    def _is_done(self, fields: dict[str, Any]) -> bool:
        return str((fields.get("status") or {}).get("name", "")).casefold() in self._done

    def _problem(self, e: Exception) -> str:
        if isinstance(e, JIRAError):
            text = " ".join(str(e.text or "").split())
            problem = f"HTTP {e.status_code}" if e.status_code else "Jira error"
            problem += f": {text[:200]}" if text else ""
        elif isinstance(e, requests.Timeout):
            problem = f"no answer within {self.timeout_s:g} s"
        elif isinstance(e, requests.ConnectionError):
            problem = "cannot connect"
        elif isinstance(e, requests.RequestException):
            problem = type(e).__name__
        else:
            problem = f"unexpected answer: {type(e).__name__}"
        return self._scrub(problem)

    def _scrub(self, text: str) -> str:
        """`text` without the token, plain or in the basic-auth header (a server may echo what it was sent)."""
        secret = self._token.get_secret_value()
        if not secret:
            return text
        basic = base64.b64encode(f"{self.settings.username}:{secret}".encode()).decode()
        for s in (basic, secret):
            text = text.replace(s, "***")
        return text


# --- rendering -------------------------------------------------------------------------------------------------
def _describe(ticket: Ticket) -> list[str]:
    """The ticket as Jira wiki text: what was found, where, evidence, what fabricd did or why not, likely repair."""
    body = dict(ticket.body)
    lines = [f"*fabricd ticket {ticket.id}*: {ticket.kind}" + (", escalated" if ticket.escalation else "")]
    port = f", port {_text(ticket.port)}" if ticket.port else ""
    lines.append(f"*Where:* device {_text(ticket.device)}{port}")
    for heading, keys in _SECTIONS:
        for k in keys:
            if body.get(k) not in (None, "", [], {}):
                lines += _section(heading, body.pop(k))
            body.pop(k, None)
    rest = {k: v for k, v in body.items() if v not in (None, "", [], {})}
    if rest:
        lines += _section("Other details", rest)
    return lines


def _comment(ticket: Ticket, jira_status: str, recurred: bool) -> str:
    n = ticket.recurrences
    seen = f"; seen again {n} time{'s' if n != 1 else ''}" if n else ""
    lines = [f"*fabricd update*: the ticket is {ticket.status} in fabricd{seen}."]
    if recurred:
        lines += [
            "",
            f"*The fault came back after this issue was closed* (status {_text(jira_status)}): fabricd re-opened its "
            "ticket. Please re-open this issue or check the repair; fabricd does not change the issue's status, and "
            "treats the fault as fixed once the issue is closed again.",
        ]
    lines += ["", *_describe(ticket), "", _marker(ticket, recurred=recurred)]
    return "\n".join(lines)


def _section(heading: str, value: Any) -> list[str]:
    if isinstance(value, dict | list | tuple):
        return [f"*{heading}:*", "{noformat}", *_block(value), "{noformat}"]
    return [f"*{heading}:* {_text(str(value))}"]


def _block(value: Any) -> list[str]:
    items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
    out = []
    for k, v in items:
        shown = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
        out.append(f"{k}: {shown}" if k is not None else f"- {shown}")
    return [line.replace("{noformat}", "{ noformat}") for line in out]


def _text(s: str) -> str:
    """Free text safe in wiki markup: braces start macros, brackets links."""
    return re.sub(r"([{}\[\]])", r"\\\1", s)


def _marker(ticket: Ticket, *, recurred: bool = False) -> str:
    tail = ", recurred" if recurred else ""
    return f"(fabricd ticket {ticket.id}, version {ticket.updated_ts}, digest {_digest(ticket)}{tail})"


def _digest(ticket: Ticket) -> str:
    seen = {
        "title": ticket.title,
        "body": ticket.body,
        "status": ticket.status,
        "recurrences": ticket.recurrences,
        "escalation": ticket.escalation,
    }
    return hashlib.sha256(json.dumps(seen, sort_keys=True, default=str).encode()).hexdigest()[:12]


# --- helpers ---------------------------------------------------------------------------------------------------
def _label(ticket: Ticket) -> str:
    return f"fabricd-ticket-{ticket.id}-{ticket.created_ts}"


def _is_key(ref: str | None) -> bool:
    return ref is not None and _KEY.match(ref) is not None


def _q(s: str) -> str:
    """A JQL string literal."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _which(ids: list[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:5]) + (", ..." if len(ids) > 5 else "")
    return f"ticket{'s' if len(ids) > 1 else ''} {shown}"


def _closed_at(fields: dict[str, Any]) -> datetime | None:
    """When the issue was closed, on Jira's clock (None when the workflow records neither date)."""
    times = [_time(fields.get(f)) for f in ("resolutiondate", "statuscategorychangedate")]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _recurred_after(comments: list[dict[str, Any]], ticket_id: int, closed: datetime) -> bool:
    """Did fabricd say the ticket's fault came back after the issue was closed?"""
    for c in comments:
        created = _time(c.get("created"))
        if created is None or created <= closed:
            continue
        for m in _MARKER.finditer(str(c.get("body") or "")):
            if int(m.group(1)) == ticket_id and m.group(4):
                return True
    return False


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        t = datetime.fromisoformat(str(value))  # Jira: 2024-05-01T12:34:56.789+0000
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def _safe(url: str) -> str:
    """The URL without user:password@, query or fragment (tokens hide there)."""
    try:
        p = urlsplit(url)
    except ValueError:
        return "(invalid Jira URL)"
    return urlunsplit((p.scheme, p.netloc.rpartition("@")[2], p.path, "", ""))
