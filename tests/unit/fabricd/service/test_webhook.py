"""The webhook ticket backend against httpx.MockTransport: payload, idempotency, retries, and no leaked secrets."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from fabricd.service.state import Ticket
from fabricd.service.tickets.base import TicketError
from fabricd.service.tickets.webhook import WebhookBackend

TOKEN = "wh-T0KEN-never-logged"
PASSWORD = "pa55-in-the-url"
URL = "https://hooks.example.com/fabricd"
T0 = 1_700_000_000_000_000_000

Handler = Callable[[httpx.Request], httpx.Response]


BASE = Ticket(
    id=7, fault="link_flap:gpu-g0-000:nic0--leaf-g0-r0:Ethernet1/1", kind="link_flap", device="leaf-g0-r0",
    port="Ethernet1/1", status="open", title="link flap on leaf-g0-r0:Ethernet1/1",
    body={"evidence": {"this_end": {"if.carrier-transitions": 12}}, "actions": []}, escalation=False,
    recurrences=0, external_ref=None, created_ts=T0, updated_ts=T0 + 5, resolved_ts=None, resolved_by=None,
)  # fmt: skip


def ticket(**changes: Any) -> Ticket:
    return dataclasses.replace(BASE, **changes)


class Recorder:
    """A webhook receiver: answers each request with the next scripted response (or raises it)."""

    def __init__(self, *script: int | Exception) -> None:
        self.script = list(script)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, Exception):
            raise step
        return httpx.Response(step, json={"ok": step < 300})


def backend(
    receiver: Recorder, *, url: str = URL, token: str | None = TOKEN, retries: int = 3
) -> tuple[WebhookBackend, list[float]]:
    sleeps: list[float] = []
    b = WebhookBackend(
        url,
        None if token is None else SecretStr(token),
        retries=retries,
        backoff_s=0.5,
        sleep=sleeps.append,
        transport=httpx.MockTransport(receiver),
    )
    return b, sleeps


def test_success_sends_the_ticket_as_json() -> None:
    rx = Recorder(201)
    b, sleeps = backend(rx)
    assert b.publish(ticket()) == "webhook:7"
    (req,) = rx.requests
    assert (req.method, str(req.url)) == ("POST", URL)
    assert req.headers["content-type"] == "application/json"
    assert req.headers["idempotency-key"] == f"fabricd-ticket-7-{T0 + 5}"
    assert req.headers["authorization"] == f"Bearer {TOKEN}"
    payload = json.loads(req.content)
    assert payload == {"source": "fabricd", "ticket": ticket().to_dict()}
    assert payload["ticket"]["body"]["evidence"]["this_end"]["if.carrier-transitions"] == 12
    assert sleeps == []
    assert b.resolved([ticket()]) == []  # one-way


def test_no_token_no_authorization_header() -> None:
    rx = Recorder(200)
    b, _ = backend(rx, token=None)
    b.publish(ticket())
    assert "authorization" not in rx.requests[0].headers


def test_a_new_version_has_a_new_key() -> None:
    rx = Recorder(200)
    b, _ = backend(rx)
    b.publish(ticket())
    b.publish(ticket(updated_ts=T0 + 6))
    keys = [r.headers["idempotency-key"] for r in rx.requests]
    assert keys == [f"fabricd-ticket-7-{T0 + 5}", f"fabricd-ticket-7-{T0 + 6}"]


@pytest.mark.parametrize("first", [500, 502, 503, 429])
def test_retryable_status_then_success_keeps_the_key(first: int) -> None:
    rx = Recorder(first, first, 200)
    b, sleeps = backend(rx)
    assert b.publish(ticket()) == "webhook:7"
    assert len(rx.requests) == 3
    assert {r.headers["idempotency-key"] for r in rx.requests} == {f"fabricd-ticket-7-{T0 + 5}"}
    assert [json.loads(r.content) for r in rx.requests[1:]] == [json.loads(rx.requests[0].content)] * 2
    assert sleeps == [0.5, 1.0]  # exponential backoff, injected: no real waiting


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_error_is_not_retried(status: int) -> None:
    rx = Recorder(status)
    b, sleeps = backend(rx)
    with pytest.raises(TicketError) as e:
        b.publish(ticket())
    assert len(rx.requests) == 1 and sleeps == []
    assert str(e.value) == f"webhook {URL}: ticket 7 not delivered (HTTP {status}); will retry"


def test_server_errors_until_the_retries_run_out() -> None:
    rx = Recorder(503)
    b, sleeps = backend(rx, retries=4)
    with pytest.raises(TicketError, match=r"ticket 7 not delivered \(HTTP 503\)"):
        b.publish(ticket())
    assert len(rx.requests) == 5
    assert sleeps == [0.5, 1.0, 2.0, 4.0]


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ConnectError(f"cannot connect to https://user:{PASSWORD}@hooks.example.com (token {TOKEN})"),
        httpx.ReadTimeout("timed out"),
        httpx.RemoteProtocolError("server hung up"),
    ],
)
def test_network_errors_are_retried_then_reported(exc: Exception) -> None:
    rx = Recorder(exc)
    b, sleeps = backend(rx, retries=3)
    with pytest.raises(TicketError) as e:
        b.publish(ticket())
    assert len(rx.requests) == 4  # retries + 1 attempts
    assert sleeps == [0.5, 1.0, 2.0]
    assert f"({type(exc).__name__})" in str(e.value)
    assert PASSWORD not in str(e.value) and TOKEN not in str(e.value)
    assert e.value.__cause__ is None and e.value.__context__ is None  # no chained exception text either


def test_network_error_then_success() -> None:
    rx = Recorder(httpx.ConnectError("refused"), 200)
    b, sleeps = backend(rx)
    assert b.publish(ticket()) == "webhook:7"
    assert len(rx.requests) == 2 and sleeps == [0.5]
    assert rx.requests[0].headers["idempotency-key"] == rx.requests[1].headers["idempotency-key"]


def test_zero_retries_is_one_attempt() -> None:
    rx = Recorder(500)
    b, sleeps = backend(rx, retries=0)
    with pytest.raises(TicketError):
        b.publish(ticket())
    assert len(rx.requests) == 1 and sleeps == []


@pytest.mark.parametrize(
    ("url", "server"),
    [
        ("https://hooks.example.com:8443/hook?api_key=QUERY-SECRET", "https://hooks.example.com:8443/hook"),
        (f"https://fabricd:{PASSWORD}@hooks.example.com/hook?api_key=QUERY-SECRET", "https://hooks.example.com/hook"),
    ],
)
def test_secrets_never_in_the_error(url: str, server: str) -> None:
    rx = Recorder(500)
    b, _ = backend(rx, url=url, retries=1)
    with pytest.raises(TicketError) as e:
        b.publish(ticket())
    # The credentials were used (httpx turns user:password@ into basic auth, which takes the Authorization
    # header over the bearer token) ...
    req = rx.requests[0]
    assert req.url.params["api_key"] == "QUERY-SECRET"
    if PASSWORD in url:
        assert req.url.password == PASSWORD and req.headers["authorization"].startswith("Basic ")
    else:
        assert req.headers["authorization"] == f"Bearer {TOKEN}"
    # ... but the message names the server only.
    msg = str(e.value)
    assert msg == f"webhook {server}: ticket 7 not delivered (HTTP 500); will retry"
    for secret in (TOKEN, PASSWORD, "QUERY-SECRET", "fabricd:"):
        assert secret not in msg
    assert TOKEN not in repr(b.__dict__)  # the token is held as a SecretStr


def test_the_guard_is_asked_before_every_attempt_and_a_refusal_sends_nothing_more() -> None:
    # a leader fenced off during the backoff (paused, then woken after a takeover) sends no retry
    receiver = Recorder(503)
    b, _ = backend(receiver, retries=3)
    asked: list[int] = []

    def guard() -> None:
        asked.append(len(receiver.requests))
        if len(asked) > 1:
            raise TicketError("ticket hand-off stopped: fenced")

    with pytest.raises(TicketError, match="fenced"):
        b.publish(ticket(), guard)
    assert asked == [0, 1] and len(receiver.requests) == 1
