"""`fabricd run` as a leader that pauses itself (SIGSTOP) at one step of its first port action, for
test_fencing_processes.py. Every switch call it makes goes to a JSON-lines file with the time it was made, so the
test can tell what the leader sent after it was woken (SIGCONT). The service is the real one; only its actuator is
wrapped (this test helper swaps the daemon's actuator class before the service is built).

Steps: `connected` (the action's session is open, nothing sent yet), `committed` (the shutdown is committed under
its revert timer, not confirmed), `confirming` (inside the confirm, its deciding request about to go out: on EOS the
commit request, its check of the session sent; on SONiC the `mkdir` of the decision lock. The pause falls after every
check fabricd makes, so the request goes out once woken; its outcome is recorded as `late-commit:ok` or
`late-commit:refused`: on EOS whether the switch committed, on SONiC whether the confirm won the decision), `confirm`
(the confirm is about to be called), `request` (EOS: past every fence check, its first change request about to go
out, `configure session fabricd_t<token>_a<N>_... / shutdown / description / commit timer`; recorded once woken as
`late-request:ok` or `late-request:refused`; SONiC: the command that starts the commit's revert timer, its checkpoint
taken).

Run: python -m tests.twin.fabricd.service.paused_child CONFIG DEVICE STEP CALLS_FILE
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from drivers.base import Session
from fabricd.service import daemon
from fabricd.service.actuator import DriverActuator
from fabricd.service.config import load_config

CONFIG, DEVICE, STEP, CALLS = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
LOCAL = {"abandon", "port_key", "device"}  # no word to the switch


def record(call: str, device: str) -> None:
    with CALLS.open("a") as f:
        f.write(json.dumps({"call": call, "device": device, "t": time.time()}) + "\n")


def pause(step: str) -> None:
    """Park here until the test has stopped the whole process (SIGSTOP: every thread, as a long GC or a frozen VM
    would) and let it go again: the pause falls exactly between two switch calls."""
    record(f"pause:{step}", DEVICE)
    go = CALLS.with_suffix(".go")
    while not go.exists():
        time.sleep(0.01)
    record(f"woke:{step}", DEVICE)


class Recorded:
    def __init__(self, inner: Session, device: str, armed: bool) -> None:
        self.inner, self.device, self.armed = inner, device, armed

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "guard":  # the service's fence, asked by the driver before every request
            setattr(self.inner, name, value)
        else:
            super().__setattr__(name, value)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr) or name in LOCAL:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            record(name, self.device)
            if self.armed and name == "confirm" and STEP == "confirm":
                self.armed = False
                pause("confirm")
            out = attr(*args, **kwargs)
            if self.armed and name == "set_port_admin" and STEP == "committed":
                self.armed = False
                pause("committed")
            return out

        return call


class PausingActuator(DriverActuator):
    paused = False

    def connect(self, device: str) -> Session:
        record("connect", device)
        session = super().connect(device)
        # the marks scan at takeover connects too: the action's session is the one after it that commits
        # (a new leader resumes the old leader's action before its scan: `confirm` pauses in the first one)
        # only an action's session (a leader's sweep of older leaders' transactions connects too, switch.py)
        armed = (device == DEVICE and not PausingActuator.paused and (STEP == "confirm" or _scanned(device))
                 and _for_an_action())  # fmt: skip
        if armed and STEP == "request" and hasattr(session, "_napalm"):  # its change under the revert timer
            PausingActuator.paused = True
            _pause_before_the_request(session, "request", lambda c: " commit timer " in c, "late-request")
        elif armed and STEP == "request":
            PausingActuator.paused = True
            _pause_before_the_timer(session)
        elif armed and STEP == "connected":
            PausingActuator.paused = True
            pause("connected")
        elif armed:
            PausingActuator.paused = True
            if STEP == "confirming" and hasattr(session, "_napalm"):  # `configure session X commit`
                commit = lambda c: c.startswith("configure session") and c.endswith(" commit")  # noqa: E731
                _pause_before_the_request(session, "confirming", commit, "late-commit")
            elif STEP == "confirming":
                _pause_before_the_confirms_decision(session)
        return Recorded(session, device, armed)  # a Session by duck typing


def _pause_before_the_request(session: Session, step: str, matches: Callable[[str], bool], outcome: str) -> None:
    """EOS: park just before the first eAPI request with a command that `matches`, after whatever the driver asks
    before it (its fence checks); record what the switch answered once woken (`<outcome>:ok` or `:refused`)."""
    node = session._napalm.device  # type: ignore[attr-defined]  # napalm's pyeapi Node
    send = node.run_commands

    def run_commands(commands: list[str], *args: Any, **kwargs: Any) -> Any:
        if not any(matches(c) for c in commands):
            return send(commands, *args, **kwargs)
        node.run_commands = send  # once
        pause(step)
        try:
            out = send(commands, *args, **kwargs)
        except Exception:
            record(f"{outcome}:refused", DEVICE)
            raise
        record(f"{outcome}:ok", DEVICE)
        return out

    node.run_commands = run_commands


def _pause_before_the_timer(session: Session) -> None:
    """SONiC: park just before the SSH command that starts the commit's revert timer and writes its pid file (the
    request that makes a change pending: checkpoint taken, patch not yet applied), below the driver's guard, which
    was asked for it already; record whether the switch ran it once woken (`late-request:ok`) or refused it
    (`late-request:refused`: the switch's fence, drivers/sonic/session.py)."""
    inner: Any = session  # a SonicSession: its connection is wrapped here
    conn = inner._conn  # netmiko's connection: below the guard
    send = conn.send_command

    def send_command(command: str, *args: Any, **kwargs: Any) -> Any:
        if "nohup sh -c" not in command:
            return send(command, *args, **kwargs)
        conn.send_command = send  # once
        pause("request")
        out = str(send(command, *args, **kwargs))
        record("late-request:refused" if "fabricd-fenced-off" in out else "late-request:ok", DEVICE)
        return out

    conn.send_command = send_command


def _pause_before_the_confirms_decision(session: Session) -> None:
    """SONiC: park inside the confirm just before the SSH command that decides the pending commit (`mkdir LOCK`, the
    atomic lock its revert timer and a new leader's rollback race for), below the driver's guard, which was asked
    for it already; record whether the confirm won the decision once woken (`_decide`: the lock, and the commit's
    pid file still there)."""
    inner: Any = session  # a SonicSession: its private parts are wrapped here
    conn = inner._conn  # netmiko's connection: below the guard
    send, decide, confirm = conn.send_command, inner._decide, inner.confirm

    def send_command(command: str, *args: Any, **kwargs: Any) -> Any:
        # `mkdir LOCK` (sent as it is, or inside the switch's fence, `flock ... sh -c '... mkdir LOCK'`); not the
        # revert timer's own `mkdir`, which the command that starts it carries
        if "mkdir /tmp/" in command and ".decided" in command and "nohup" not in command:
            conn.send_command = send  # once
            pause("confirming")
        return send(command, *args, **kwargs)

    def deciding(pending: Any) -> bool:
        try:
            won = bool(decide(pending))
        except BaseException:
            record("late-commit:refused", DEVICE)  # refused on the way (its next command fenced off)
            raise
        record("late-commit:ok" if won else "late-commit:refused", DEVICE)
        return won

    def confirming() -> None:
        conn.send_command, inner._decide = send_command, deciding  # only the confirm's decision, not a rollback's
        try:
            confirm()
        finally:
            conn.send_command = send
            del inner._decide

    inner.confirm = confirming


def _for_an_action() -> bool:
    """Called (through the actuator's connect) by a port action's connect-and-commit (switch.py)."""
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "_open_and_set":
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _scanned(device: str) -> bool:
    calls = [json.loads(x) for x in CALLS.read_text().splitlines()] if CALLS.exists() else []
    return any(c["call"] == "port_marks" and c["device"] == device for c in calls)


def main() -> None:
    daemon.DriverActuator = PausingActuator  # type: ignore[attr-defined]
    cfg = load_config(Path(CONFIG))

    async def run() -> None:
        await daemon.Service(cfg).run()

    asyncio.run(run())


if __name__ == "__main__":
    main()
