"""A paused leader can never touch a switch (docs/ha.md, "Fencing"): real processes on a real nats-server (the
lease), a real PostgreSQL (the shared state) and the twin. The leader pauses itself (SIGSTOP) at a step of its first
port action; the standby takes over and finishes the action; the old leader is woken (SIGCONT) and from then on sends
nothing to any switch and writes nothing to the state: the new leader's outcome stands."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from drivers.inventory import load_inventory
from drivers.registry import get_driver
from fabricd.bus import LocalBus
from lab.control_client import inject
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import (
    TTL,
    admin_enabled,
    eos_sessions,
    hot_pair,
    receiver,
    twin_fixture,
    wait_for,
    write_config,
)

from .test_bgp_service_twin import enabled
from .test_jira_backend import TOKEN as JIRA_TOKEN
from .test_jira_backend import USER as JIRA_USER
from .test_jira_backend import FakeJira

pytestmark = [pytest.mark.distributed, pytest.mark.slow]
PORT = "leaf-g0-r0:Ethernet1/1"
CHILD = "tests.twin.fabricd.service.paused_child"
# the twin of small-pod (every switch EOS), or of the spec a test names (`indirect` parametrization)
twin = twin_fixture()


def calls(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("step", ["connected", "committed"])
def test_a_paused_leader_woken_after_a_takeover_touches_nothing(
    step: str, twin: TwinThread, nats_bus: LocalBus, postgres_url: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, twin.inventory, state={"url": postgres_url}, bus={"urls": [nats_bus.url]},
                          ha={"enabled": True, "lease_ttl_s": TTL},
                          remediation={"mode": "auto", "revert_in_s": 60, "verify_timeout_s": 5})  # fmt: skip
    record = tmp_path / "calls.jsonl"
    device = PORT.split(":")[0]
    with hot_pair(config, tmp_path, a=["-m", CHILD, str(config), device, step, str(record)]) as (a, b):
        inject(twin.state_dir, "link_flap", {"port": PORT, "count": 8, "period_s": 0.3})
        wait_for(lambda: any(c["call"] == f"pause:{step}" for c in calls(record)), 30)
        a.pause()  # the whole leader, parked between two switch calls
        record.with_suffix(".go").touch()  # it goes on from there once woken
        # the standby takes the lease and finishes the action the paused leader began
        wait_for(lambda: b.role() == "leader", 15)
        wait_for(lambda: [x["status"] for x in b.get("/api/v1/actions")["actions"]] == ["done"], 30)
        assert not admin_enabled(twin, device, PORT.split(":")[1])
        before = (b.get("/api/v1/actions")["actions"], b.get("/api/v1/ports/disabled")["ports"],
                  b.get("/api/v1/tickets")["tickets"])  # fmt: skip
        audit_before = len(
            b.get(
                "/api/v1/audit",
            )["audit"]
        )

        woke = time.time()
        a.wake()
        wait_for(lambda: any(c["call"] == f"woke:{step}" for c in calls(record)), 10)
        time.sleep(3 * TTL)  # time for the old leader to do whatever it would
        late = [c for c in calls(record) if c["t"] >= woke and not c["call"].startswith(("woke:", "pause:"))]
        assert late == [], late  # not one call to any switch after waking
        after = (b.get("/api/v1/actions")["actions"], b.get("/api/v1/ports/disabled")["ports"],
                 b.get("/api/v1/tickets")["tickets"])  # fmt: skip
        assert after == before  # the new leader's outcome stands, nothing rewritten
        new_audit = b.get("/api/v1/audit")["audit"][: len(b.get("/api/v1/audit")["audit"]) - audit_before]
        assert all(r["actor"] != "a" for r in new_audit), new_audit
        assert not admin_enabled(twin, device, PORT.split(":")[1])
        assert a.role() == "standby"  # it knows it is no longer the leader
        assert "fenced" in a.log.read_text() or "left to the leader" in a.log.read_text()


def _leader_row_holders(db: Any) -> set[int]:
    """PostgreSQL sessions holding the leader row: inside a fenced write (state/fence.py's check; only a leader makes
    those, a standby's writes are not fenced)."""
    rows = db.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'relation' AND relation = 'leader'::regclass AND granted"
        " AND pid <> pg_backend_pid()"
    ).fetchall()
    return {int(r[0]) for r in rows}


def _stop_inside_a_fenced_write(proc: subprocess.Popen[bytes], db: Any, within_s: float) -> int:
    """SIGSTOP the process (the only one making fenced writes) while pg_locks shows its session holding the leader
    row (watched in a tight loop; a stop that lands just after the commit is undone and tried again); returns the
    session's pid."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if _leader_row_holders(db):
            proc.send_signal(signal.SIGSTOP)
            time.sleep(0.05)
            if held := _leader_row_holders(db):
                return held.pop()
            proc.send_signal(signal.SIGCONT)
    raise AssertionError(f"never stopped inside a fenced write within {within_s} s")


def test_a_leader_paused_inside_a_fenced_write_neither_holds_the_takeover_nor_takes_the_lease_back(
    twin: TwinThread, nats_bus: LocalBus, postgres_url: str, tmp_path: Path
) -> None:
    """Every fenced write share-locks the leader row until its commit. The leader is stopped while it holds it: the
    standby's claim does not wait for the pause (it ends the stuck session), it leads within a lease and a second,
    and the old leader, woken, stands by: the lease is never taken back."""
    import psycopg

    config = write_config(tmp_path, twin.inventory, state={"url": postgres_url}, bus={"urls": [nats_bus.url]},
                          ha={"enabled": True, "lease_ttl_s": TTL}, remediation={"mode": "observe"})  # fmt: skip
    with hot_pair(config, tmp_path) as (a, b), psycopg.connect(postgres_url, autocommit=True) as db:
        # a flapping port: the leader records the incident every detector pass, each a fenced write
        inject(twin.state_dir, "link_flap", {"port": PORT, "count": 200, "period_s": 0.3})
        session = _stop_inside_a_fenced_write(a.proc, db, 60)
        stopped = time.monotonic()
        wait_for(lambda: b.role() == "leader", TTL + 3, every_s=0.05)
        took = time.monotonic() - stopped
        assert took < TTL + 1.5, f"the standby led {took:.2f} s after the leader stopped"
        assert session not in _leader_row_holders(db)  # its stuck write was ended, nothing of it written
        time.sleep(TTL)  # still paused: the new leader keeps its lease (nothing of it waits on the old one)
        assert b.role() == "leader"

        a.wake()
        wait_for(lambda: a.role() == "standby", 10)
        time.sleep(3 * TTL)  # time for the woken one to do whatever it would
        assert (a.role(), b.role()) == ("standby", "leader")
        leads = [e["what"] for e in b.get("/api/v1/audit?limit=1000")["audit"] if e["what"].endswith(" leads")]
        assert leads == ["b leads", "a leads"], leads  # newest first: the lease changed hands once
        # Its write ended by the claim failed, and it writes nothing as a standby: it is not broken (before, it said
        # `failing`, `state.writable: false` and exported fabricd_state_writable 0 as long as it stood by, and the
        # critical alert FabricdStateUnwritable fired on a healthy standby).
        health = a.get("/api/v1/health")
        assert (health["status"], health["state"]["writable"], health["ha"]["role"]) == ("ok", True, "standby"), health
        metrics = httpx.get(f"{a.url}/metrics", timeout=10).text
        assert "\nfabricd_state_writable 1.0\n" in metrics


@pytest.mark.parametrize("twin", ["small-pod", "small-sonic"], indirect=True, ids=["eos", "sonic"])
def test_a_late_confirm_of_an_old_leader_finds_nothing_to_commit(
    twin: TwinThread, nats_bus: LocalBus, postgres_url: str, tmp_path: Path
) -> None:
    """The leader is stopped inside its confirm, after every check it makes, its deciding request about to go out
    (EOS: the commit of its config session; SONiC: the `mkdir` of the commit's decision lock, on leaf-g0-r0, a SONiC
    leaf of small-sonic). The standby takes over: it does not resume the old leader's transaction but ends it (EOS:
    the config session; SONiC: rolls the checkpoint back and removes its pid file, which the lock is won only with)
    and commits the step anew under its own token's name, and is held just before its own confirm. The old leader
    is woken: its request goes out and decides nothing. The new leader confirms: one action, done, one finding, the
    port down. (Before, on EOS, the new leader resumed the old session: the late request committed it, the new
    leader's confirm failed and recorded the action failed, and the port was adopted again: two actions and two
    findings for one fault. On SONiC the new leader's rollback has freed the lock by then, so the late `mkdir` would
    win it: the switch's fence refuses it now (the new leader raised it before its commit, drivers/sonic/session.py);
    behind that, the guard asked before the next command and the pid-file check the lock is won only with refuse
    the decision: with none of them, the late confirm won the decision (`late-commit:ok`) and went on to
    `config save` the new leader's unconfirmed change.)"""
    spec = EXAMPLES / f"{twin.spec.name}.yaml"
    config = write_config(tmp_path, twin.inventory, spec=str(spec), state={"url": postgres_url},
                          bus={"urls": [nats_bus.url]}, ha={"enabled": True, "lease_ttl_s": TTL},
                          remediation={"mode": "auto", "revert_in_s": 60, "verify_timeout_s": 5})  # fmt: skip
    device, port = PORT.split(":")
    old_calls, new_calls = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with hot_pair(config, tmp_path, a=["-m", CHILD, str(config), device, "confirming", str(old_calls)],
                  b=["-m", CHILD, str(config), device, "confirm", str(new_calls)]) as (a, b):  # fmt: skip
        inject(twin.state_dir, "link_flap", {"port": PORT, "count": 8, "period_s": 0.3})
        wait_for(lambda: any(c["call"] == "pause:confirming" for c in calls(old_calls)), 30)
        a.pause()
        old_calls.with_suffix(".go").touch()
        wait_for(lambda: b.role() == "leader", 15)
        wait_for(lambda: any(c["call"] == "pause:confirm" for c in calls(new_calls)), 30)

        a.wake()  # its commit request goes out now
        wait_for(lambda: [c["call"] for c in calls(old_calls) if c["call"].startswith("late-commit")], 10)
        new_calls.with_suffix(".go").touch()
        wait_for(lambda: [x["status"] for x in b.get("/api/v1/actions")["actions"]] != ["running"],
                 30)  # fmt: skip
        time.sleep(3 * TTL)  # reconcile passes: a port down with no record of it would be adopted again
        assert [c["call"] for c in calls(old_calls) if c["call"].startswith("late-commit")] == ["late-commit:refused"]
        actions = b.get("/api/v1/actions")["actions"]
        assert [(x["status"], x["token"] == b.get("/api/v1/health")["ha"]["token"]) for x in actions] == [
            ("done", True)
        ], actions
        assert len(b.get("/api/v1/findings")["findings"]) == 1
        assert not enabled(twin, device, port)
        assert a.role() == "standby"


def _older_sessions(twin: TwinThread, device: str, token: int) -> dict[str, str]:
    """The transactions of a token older than `token` on the switch: EOS, its config sessions uncommitted or pending
    under a commit timer; SONiC, its commits pending under their revert timer (a pid file in /tmp)."""
    if twin.process.twin.switch(device).platform == "eos":
        found = {name: state for name, state in eos_sessions(twin, device).items() if state != "completed"}
    else:
        access = load_inventory(twin.inventory).access(device)
        session: Any = get_driver(access.platform).connect(access, timeout_s=15)  # over SSH, as an engineer would
        try:
            listing = session._run("ls /tmp/")[1]
        finally:
            session.close()
        found = {m.group(1): "pending" for m in re.finditer(r"\b(fabricd_t\w+)\.pid\b", listing)}
    return {name: state for name, state in found.items()
            if name.startswith("fabricd_t") and int(name[9:].split("_")[0]) < token}  # fmt: skip


@pytest.mark.parametrize("twin", ["small-pod", "small-sonic"], indirect=True, ids=["eos", "sonic"])
@pytest.mark.parametrize("woken", ["after-confirm", "between-commit-and-confirm", "gc-pause"])
def test_a_late_request_of_a_paused_leader_leaves_nothing_on_the_switch(
    woken: str, twin: TwinThread, nats_bus: LocalBus, postgres_url: str, tmp_path: Path
) -> None:
    """The leader is stopped after every fence check of its first action, its change request (`configure session
    fabricd_t<old>_a1_... / shutdown / description / commit timer`) about to go out. The standby takes over and does
    the action under its own token. The old leader is woken 15 s after it stopped, after the new leader confirmed
    (its late session is then committed under its timer: before, every commit on that switch was refused for the
    timer's 60 s, so the next disable there failed and the flapping port stayed up), or between the new leader's
    commit and its confirm (its late commit refused, its session left uncommitted holding a shutdown and a mark:
    before, it stayed). Afterwards no session of the old token is left on the switch (the new leader's sweep or its
    next commit ended it), and the next flap on that switch is acted on: its port disabled. A GC-length stop (0.1 s,
    within the lease) changes nothing: the leader's request goes out, its action is done, nothing is left pending.
    SONiC (leaf-g0-r0 of small-sonic): every command is its own request, each after the guard, so the late request
    is one command: the one that starts the revert timer and writes its pid file, the checkpoint taken. The new
    leader raised the switch's fence before its commit (drivers/sonic/session.py), so the switch refuses it, woken
    before or after the new leader's confirm. (Before, it ran: a timer and pid file under the old token, which the
    new leader's sweep then ended by rolling back to the old leader's checkpoint, taken before the new leader's
    shutdown: the flapping port came back up, woken after the confirm as between the commit and the confirm.)"""
    spec = EXAMPLES / f"{twin.spec.name}.yaml"
    sonic = twin.spec.name == "small-sonic"
    config = write_config(tmp_path, twin.inventory, spec=str(spec), state={"url": postgres_url},
                          bus={"urls": [nats_bus.url]},
                          ha={"enabled": True, "lease_ttl_s": TTL},
                          remediation={"mode": "auto", "revert_in_s": 60, "verify_timeout_s": 5})  # fmt: skip
    device, port = PORT.split(":")
    later = "Ethernet2/1" if sonic else "Ethernet7/1"  # another port (on small-sonic's leaf, the other server's)
    old_calls, new_calls = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    b_argv = ["-m", CHILD, str(config), device, "confirm", str(new_calls)] if woken.startswith("between") else None
    with hot_pair(config, tmp_path, a=["-m", CHILD, str(config), device, "request", str(old_calls)],
                  b=b_argv) as (a, b):  # fmt: skip
        inject(twin.state_dir, "link_flap", {"port": PORT, "count": 8, "period_s": 0.3})
        wait_for(lambda: any(c["call"] == "pause:request" for c in calls(old_calls)), 30)
        a.pause()
        stopped = time.monotonic()
        old_calls.with_suffix(".go").touch()
        if woken == "gc-pause":
            time.sleep(0.1)
            a.wake()
            leader = a
        else:
            wait_for(lambda: b.role() == "leader", 15)
            leader = b
        token = int(leader.get("/api/v1/health")["ha"]["token"])
        if woken.startswith("between"):
            wait_for(lambda: any(c["call"] == "pause:confirm" for c in calls(new_calls)), 30)
        elif woken == "after-confirm":
            wait_for(lambda: [x["status"] for x in b.get("/api/v1/actions")["actions"]] == ["done"], 30)
            time.sleep(max(0.0, 15 - (time.monotonic() - stopped)))
        if woken != "gc-pause":
            a.wake()  # its change request goes out now
        late = wait_for(lambda: [c["call"] for c in calls(old_calls) if c["call"].startswith("late-request")], 10)
        # EOS: after the confirm the switch takes it (committed under its timer); before it, EOS refuses a second
        # timer. SONiC: the switch's fence refuses it once a newer leader has raised it.
        refused = woken.startswith("between") or (sonic and woken != "gc-pause")
        assert late == ["late-request:refused" if refused else "late-request:ok"]
        if woken.startswith("between"):
            new_calls.with_suffix(".go").touch()
        wait_for(lambda: [x["status"] for x in leader.get("/api/v1/actions")["actions"]] == ["done"], 30)
        # nothing of the old token stays on the switch: ended by the new leader's sweep (every 5 s)
        wait_for(lambda: _older_sessions(twin, device, token) == {}, 12)
        assert not enabled(twin, device, port)

        inject(twin.state_dir, "link_flap", {"port": f"{device}:{later}", "count": 8, "period_s": 0.3})
        wait_for(lambda: [x["status"] for x in leader.get("/api/v1/actions")["actions"]] == ["done", "done"], 40)
        assert not enabled(twin, device, later)
        assert _older_sessions(twin, device, token + 1) == {}  # nothing pending of any leader, this one's too
        assert a.role() == ("leader" if woken == "gc-pause" else "standby")


class HeldReceiver:
    """A webhook receiver that holds the first delivery until told, then answers it 503; the rest get 200. Every
    request is recorded with when it came and the idempotency key it carried."""

    def __init__(self) -> None:
        self.requests: list[tuple[float, str, int]] = []  # (time, Idempotency-Key, status answered)
        self.first_arrived, self.answer_first = threading.Event(), threading.Event()
        self.server, self.url = receiver(self._answer)

    def _answer(self, request: BaseHTTPRequestHandler, body: bytes) -> int:
        first = not self.first_arrived.is_set()
        if first:
            self.first_arrived.set()
            self.answer_first.wait(60)
        status = 503 if first else 200
        self.requests.append((time.time(), request.headers["Idempotency-Key"], status))
        return status


def test_a_leader_paused_during_the_ticket_hand_off_sends_nothing_more_once_woken(
    twin: TwinThread, nats_bus: LocalBus, postgres_url: str, tmp_path: Path
) -> None:
    """The leader is stopped while the webhook holds its delivery of a new ticket; the webhook then answers it 503.
    The standby takes over and delivers the ticket (200). The old leader, woken, gets its 503 and sends no retry (its
    guard refuses before every attempt) and records nothing; every version reached the receiver once with a 2xx.
    (Before: the woken leader retried after its backoff, a second delivery of the same version.)"""
    hook = HeldReceiver()
    config = write_config(tmp_path, twin.inventory, state={"url": postgres_url}, bus={"urls": [nats_bus.url]},
                          ha={"enabled": True, "lease_ttl_s": TTL}, remediation={"mode": "observe"},
                          tickets={"backend": "webhook", "sync_interval_s": 1,
                                   "webhook": {"url": hook.url, "retries": 3, "timeout_s": 60}})  # fmt: skip
    try:
        with hot_pair(config, tmp_path) as (a, b):
            inject(twin.state_dir, "link_flap", {"port": PORT, "count": 8, "period_s": 0.3})
            assert hook.first_arrived.wait(30)
            a.pause()  # the leader, its delivery in flight
            hook.answer_first.set()
            wait_for(lambda: b.role() == "leader", 15)
            wait_for(lambda: any(status == 200 for _, _, status in hook.requests), 30)  # the new leader delivered it
            wait_for(lambda: not [t for t in b.get("/api/v1/tickets")["tickets"]
                                  if t["synced_ts"] != t["updated_ts"]], 30)  # fmt: skip
            delivered = list(hook.requests)

            woke = time.time()
            a.wake()
            time.sleep(3 * TTL)  # past the webhook's backoff: a retry would have come
            late = [r for r in hook.requests if r[0] >= woke]
            assert late == [], late  # nothing more from the woken leader (nor any redelivery by the new one)
            assert hook.requests == delivered
            taken = [key for _, key, status in hook.requests if status == 200]
            assert taken and len(taken) == len(set(taken)), hook.requests  # each version taken once
            assert a.role() == "standby"
    finally:
        hook.answer_first.set()
        hook.server.shutdown()


class HeldJira(FakeJira):
    """The fake Jira of test_jira_backend.py, holding the first search for a ticket's label (the look-up before a
    create) until told, then answering it as things stand then. Every request is recorded with when it came and the
    Host it was sent to (each fabricd is given the server under a name of its own, so the test tells them apart)."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, str, str, str]] = []  # (time, Host, method, path)
        self.first_search, self.answer_first = threading.Event(), threading.Event()
        super().__init__()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake, base = self, super()._handler()

        class Held(base):  # type: ignore[valid-type,misc]  # the fake's handler class, made at run time
            def _serve(self) -> None:
                fake.seen.append((time.time(), self.headers.get("Host", ""), self.command, self.path.split("?")[0]))
                if "labels" in unquote(self.path) and not fake.first_search.is_set():
                    fake.first_search.set()
                    fake.answer_first.wait(60)
                super()._serve()

            do_GET = do_POST = _serve

        return Held


def test_a_leader_paused_during_the_jira_hand_off_files_no_second_issue_once_woken(
    twin: TwinThread, nats_bus: LocalBus, postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Jira backend looks for the ticket's label before it creates an issue (a crash between the create and
    saving the key stays one issue). The leader is stopped while Jira holds that look-up, which is then answered:
    no issue yet. The standby takes over, finds none either and files the issue. The old leader, woken, reads its
    answer (no issue) and would create a second one: its guard, asked before the create, refuses; it sends nothing
    more and records nothing. One issue, one create, across the failover. (Without the guard before the create, the
    woken leader filed a second issue for the same ticket: no look-up stood between its answer and its create.)"""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)  # the children talk to the fake on loopback
    jira_token = tmp_path / "jira.token"
    jira_token.write_text(JIRA_TOKEN)
    jira_token.chmod(0o600)
    jira = HeldJira()
    with jira:
        port = jira.url.rsplit(":", 1)[1]
        config = write_config(tmp_path, twin.inventory, state={"url": postgres_url}, bus={"urls": [nats_bus.url]},
                              ha={"enabled": True, "lease_ttl_s": TTL}, remediation={"mode": "observe"},
                              tickets={"backend": "jira", "sync_interval_s": 1,
                                       "jira": {"url": jira.url, "project": "FAB", "username": JIRA_USER,
                                                "token": {"file": str(jira_token)}}})  # fmt: skip
        old, new = f"localhost:{port}", f"127.0.0.1:{port}"  # one server, a name for each fabricd
        try:
            with hot_pair(config, tmp_path, a_env={"FABRICD_TICKETS__JIRA__URL": f"http://{old}"}) as (a, b):
                inject(twin.state_dir, "link_flap", {"port": PORT, "count": 8, "period_s": 0.3})
                assert jira.first_search.wait(30)
                assert {host for _, host, _, _ in jira.seen} == {old}  # the look-up held is the leader's
                a.pause()  # the leader, its look-up in flight
                jira.answer_first.set()  # answered now: no issue yet (it waits in the stopped leader's socket)
                wait_for(lambda: b.role() == "leader", 15)
                wait_for(lambda: len(jira.issues) == 1, 30)  # the new leader filed it
                wait_for(lambda: [t["external_ref"] for t in b.get("/api/v1/tickets")["tickets"]
                                  if t["synced_ts"] == t["updated_ts"]] == ["FAB-1"], 30)  # fmt: skip
                tickets = b.get("/api/v1/tickets")["tickets"]

                woke = time.time()
                a.wake()
                time.sleep(3 * TTL)  # time for the woken one to do whatever it would
                late = [r for r in jira.seen if r[0] >= woke and r[1] == old]
                assert late == [], late  # not one request from the woken leader
                creates = [(host, path) for _, host, method, path in jira.seen if method == "POST"]
                assert creates == [(new, "/rest/api/2/issue")], creates  # one create, the new leader's; no comment
                assert list(jira.issues) == ["FAB-1"]
                assert b.get("/api/v1/tickets")["tickets"] == tickets  # nothing rewritten
                assert a.role() == "standby"
                assert "ticket hand-off stopped" in a.log.read_text()
        finally:
            jira.answer_first.set()
