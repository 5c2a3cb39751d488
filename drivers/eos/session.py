"""One transaction-capable connection to an EOS switch through napalm's `eos` driver over eAPI.

napalm does the EOS specifics: a named config session per candidate, `show session-config ... diffs` for the
device-side diff, `commit timer HH:MM:SS` so the switch reverts on its own unless confirmed. We only map its
exceptions onto ours so one device's failure carries its name and never a secret.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Collection
from typing import Any, TypeVar

import pyeapi.eapilib
from napalm import get_network_driver
from napalm.base.exceptions import (
    CommitError,
    ConnectionException,
    MergeConfigException,
    ReplaceConfigException,
)

from drivers.base import ConfigRejectedError, DriverError, PortMark, Resumed, UnreachableError
from drivers.drain_policy import DRAIN_MAP, drain_map_used_by_others, drain_route_map
from drivers.eos.render import port_admin_lines
from drivers.inventory import DeviceAccess
from drivers.marks import Mark, parse_mark, with_mark, without_mark

# pyeapi logs every transport error with its traceback (eapilib: `_LOGGER.exception`) and then raises it; the session
# turns that exception into one line naming the switch, so the logged copy is only a traceback on stderr (`fabricd
# validate --inventory` with one switch down) or in the service's log.
logging.getLogger("pyeapi.eapilib").setLevel(logging.CRITICAL)

# What napalm/pyeapi raise when the switch cannot be reached or refuses the login.
R = TypeVar("R")
_UNREACHABLE = (ConnectionException, pyeapi.eapilib.ConnectionError, ConnectionError, OSError, TimeoutError)
_FAILED = (CommitError, pyeapi.eapilib.CommandError, pyeapi.eapilib.EapiError, *_UNREACHABLE)


class EosSession:
    def __init__(self, access: DeviceAccess, timeout_s: float = 30.0):
        self.device = access.name
        self.guard: Callable[[], None] | None = None
        optional: dict[str, Any] = {"transport": access.eapi.transport}
        if access.eapi.port is not None:
            optional["port"] = access.eapi.port
        cls = get_network_driver("eos")
        self._napalm = cls(
            access.host,
            access.username,
            access.password.get_secret_value(),
            timeout=int(timeout_s),
            optional_args=optional,
        )
        try:
            self._napalm.open()
        except _UNREACHABLE as e:
            raise UnreachableError(self.device, f"cannot open eAPI at {access.host}: {_clean(e, access)}") from None
        self._access = access
        self._pending = False

    def _fail(self, what: str, e: BaseException) -> DriverError:
        return DriverError(self.device, f"{what} failed: {_clean(e, self._access)}")

    def _ask(self) -> None:
        if self.guard is not None:
            self.guard()

    def _run(self, commands: list[str], encoding: str = "json") -> list[Any]:
        """One eAPI request, the guard asked first: every request fabricd sends goes through here or `_napalm`."""
        self._ask()
        out: list[Any] = self._napalm.device.run_commands(commands, encoding=encoding)
        return out

    def _call(self, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """A napalm call (one request, or reads only), the guard asked first."""
        self._ask()
        return fn(*args, **kwargs)

    def facts(self) -> dict[str, Any]:
        try:
            facts: dict[str, Any] = self._call(self._napalm.get_facts)
        except _FAILED as e:
            raise self._fail("get_facts", e) from None
        return facts

    def running_config(self) -> str:
        try:
            running: str = self._call(self._napalm.get_config, retrieve="running")["running"]
        except _FAILED as e:
            raise self._fail("show running-config", e) from None
        return running

    def port_key(self, port: str) -> str:
        return port  # EOS names are fabricd's names

    def interfaces_up(self) -> dict[str, bool]:
        try:
            interfaces = self._call(self._napalm.get_interfaces)
        except _FAILED as e:
            raise self._fail("show interfaces", e) from None
        return {name: bool(info["is_up"]) for name, info in interfaces.items()}

    def load(self, commands: list[str], *, key: str | None = None) -> str:
        if key is not None and self._napalm.config_session is None:
            self._napalm.config_session = key  # napalm opens `configure session <config_session>` when one is set
        try:
            self._call(self._napalm.load_merge_candidate, config="\n".join(commands))
        except (MergeConfigException, ReplaceConfigException) as e:
            raise ConfigRejectedError(self.device, f"rejected the candidate: {_clean(e, self._access)}") from None
        except _FAILED as e:
            raise self._fail("loading the candidate", e) from None
        try:
            diff: str = self._call(self._napalm.compare_config)
        except _FAILED as e:
            self.discard()
            raise self._fail("compare_config", e) from None
        return diff

    def commit(self, revert_in_s: int) -> None:
        try:
            self._call(self._napalm.commit_config, revert_in=revert_in_s)
        except _FAILED as e:
            raise self._fail(f"commit with a {revert_in_s} s revert timer", e) from None
        self._pending = True

    def confirm(self) -> None:
        """napalm's confirm_commit in two requests (not three: its `show version` only dates the timer), the guard
        asked before each: the session must still be pending under its timer, then its commit and `write memory`.
        A session ended meanwhile (a new leader's abort_stale) is gone: EOS refuses to commit it."""
        name = self._napalm.config_session
        try:
            if name is None or self._state_of(name) != "pendingCommitTimer":
                raise CommitError("No pending commit-confirm found!")
            self._run([f"configure session {name} commit", "write memory"], encoding="text")
        except _FAILED as e:
            raise self._fail("confirming the commit", e) from None
        self._napalm.config_session, self._pending = None, False

    def rollback(self) -> None:
        try:
            if self._pending:
                # Not napalm's rollback(): when the session is no longer pending (its timer fired, or someone else
                # confirmed or ended it) napalm falls back to `configure replace flash:rollback-0`, which would put
                # back the whole config as it was before our commit, undoing whatever was committed since.
                session = self._napalm.config_session
                if session is not None and self._state_of(session) == "pendingCommitTimer":
                    self._run([f"configure session {session} abort", "write memory"])
                self._napalm.config_session = None
                self._pending = False
            else:
                self._call(self._napalm.discard_config)
        except _FAILED as e:
            raise self._fail("rollback (the switch still reverts by itself when its timer ends)", e) from None

    def _sessions(self) -> dict[str, Any]:
        # Through napalm's own eAPI connection (pyeapi's Node), the command napalm's has_pending_commit reads.
        data: dict[str, Any] = self._run(["show configuration sessions detail"])[0]
        return data

    def _state_of(self, name: str, data: dict[str, Any] | None = None) -> str:
        """A config session's state ("pendingCommitTimer", "completed", "pending", ...; "" when unknown)."""
        data = self._sessions() if data is None else data
        if data.get("commitTimerSessionName") == name:  # EOS 4.32+ names it at the top level (napalm reads both)
            return "pendingCommitTimer"
        return str(data.get("sessions", {}).get(name, {}).get("state", ""))

    def abort_stale(self, below: int, keep: Collection[str]) -> list[str]:
        try:
            data = self._sessions()
            ended = []
            names = set(data.get("sessions", {})) | {str(data.get("commitTimerSessionName") or "")}
            for name in sorted(names):
                m = _LEADER_SESSION.match(name)
                if m is None or int(m.group(1)) >= below or name in keep:
                    continue
                if self._state_of(name, data) in ("pendingCommitTimer", "pending"):
                    self._run([f"configure session {name} abort"])
                    ended.append(name)
            if ended:
                self._run(["write memory"])
            return ended
        except _FAILED as e:
            raise self._fail("ending an old leader's config sessions", e) from None

    def abandon(self) -> None:
        self._napalm.config_session = None  # napalm's close would abort it on the switch
        self._pending = False

    def discard(self) -> None:
        try:
            self._call(self._napalm.discard_config)
        except _FAILED as e:
            raise self._fail("discarding the candidate", e) from None

    def _descriptions(self, port: str | None = None) -> dict[str, Any]:
        """`show interfaces [P] description`: {port: {description, interfaceStatus, lineProtocolStatus}}."""
        command = "show interfaces description" if port is None else f"show interfaces {port} description"
        try:
            data = self._run([command])[0]
        except _FAILED as e:
            raise self._fail(command, e) from None
        rows: dict[str, Any] = data.get("interfaceDescriptions", {})
        return rows

    def set_port_admin(
        self,
        port: str,
        up: bool,
        revert_in_s: int,
        *,
        key: str | None = None,
        mark: Mark | None = None,
        description: str | None = None,
    ) -> None:
        old = description
        if old is None:
            old = str(self._descriptions(port).get(port, {}).get("description", ""))
        new = with_mark(old, mark) if mark is not None and not up else without_mark(old)
        self._commit_now(port_admin_lines(port, up, None if new == old else new), revert_in_s, key)

    def shift_traffic(self, away: bool, revert_in_s: int, *, key: str | None = None) -> None:
        # EOS maintenance mode: the System unit quiesced takes the switch out of its BGP peers' paths
        self._shift(["maintenance", "unit System", "quiesce" if away else "no quiesce"], revert_in_s, key)

    def shift_session(
        self, peer_address: str, asn: int, away: bool, revert_in_s: int, *, key: str | None = None
    ) -> None:
        if away:
            lines = [*drain_route_map(asn), f"router bgp {asn}", f"neighbor {peer_address} route-map {DRAIN_MAP} out"]
        else:
            lines = [f"router bgp {asn}", f"no neighbor {peer_address} route-map {DRAIN_MAP} out"]
            if not drain_map_used_by_others(self.running_config(), peer_address):
                lines += [f"no {drain_route_map(asn)[0]}"]  # the definition the drain added goes with its last use
        self._shift(lines, revert_in_s, key)

    def _shift(self, lines: list[str], revert_in_s: int, key: str | None) -> None:
        """A drain's step, committed and confirmed under config session `key`, resumable: a step taken again (a
        fabricd killed in it, a new leader) looks for its session by name first. Pending under its timer: it is
        this step's own change, confirmed now; completed, or loaded and never committed: the step is committed
        again under a name of its own (`KEY_r2`, `KEY_r3`...; EOS refuses to enter a completed or pending session
        again), which is harmless (maintenance mode and a route map are states, not toggles)."""
        if key is None:
            self._commit_now(lines, revert_in_s, None)
            self.confirm()
            return
        try:
            data = self._sessions()
        except _FAILED as e:
            raise self._fail(f"looking for config session {key}", e) from None
        known = {str(n) for n in data.get("sessions", {})} | {str(data.get("commitTimerSessionName") or "")}
        attempts = sorted((n for n in known if n == key or _is_attempt(n, key)), key=_attempt_number)
        last = attempts[-1] if attempts else None
        if last is not None and self._state_of(last, data) == "pendingCommitTimer":
            self._napalm.config_session, self._pending = last, True
            self.confirm()
            return
        if last is not None and self._state_of(last, data) == "pending":
            with contextlib.suppress(*_FAILED):  # loaded, never committed: it would hold the config lock
                self._run([f"configure session {last} abort"], encoding="text")
        name = key if last is None else f"{key}_r{_attempt_number(last) + 1}"
        self._commit_now(lines, revert_in_s, name)
        self.confirm()

    def _commit_now(self, lines: list[str], revert_in_s: int, key: str | None) -> None:
        """`lines` into config session `key` and its commit under the revert timer, in one eAPI request: what
        napalm's load_merge_candidate + commit_config(revert_in) do in six (a lock check, the session, the diff, two
        reads for a pending commit, a rollback-0 copy our rollback never uses). EOS runs a request's commands in
        order and stops at the first error, so a refused line never reaches the commit; EOS itself refuses a second
        commit timer. The session is napalm's afterwards: confirm_commit and rollback act on it."""
        name = key or f"napalm_{time.time_ns() % 1_000_000}"
        timer = time.strftime("%H:%M:%S", time.gmtime(revert_in_s))
        commands = [f"configure session {name}", *lines, "end", f"configure session {name} commit timer {timer}"]
        try:
            self._run(commands, encoding="text")
        except pyeapi.eapilib.CommandError as e:
            with contextlib.suppress(*_FAILED):  # uncommitted, it would hold the switch's config lock
                self._run([f"configure session {name} abort"], encoding="text")
            raise ConfigRejectedError(self.device, f"rejected the change: {_clean(e, self._access)}") from None
        except _FAILED as e:
            # The request may have reached the switch: the rollback looks for the session and aborts it if pending
            # (or the switch's timer reverts it).
            self._napalm.config_session, self._pending = name, True
            raise self._fail(f"commit with a {revert_in_s} s revert timer", e) from None
        self._napalm.config_session, self._pending = name, True

    def port_aliases(self) -> dict[str, str]:
        return {}  # EOS's LLDP advertises the interface name

    def lldp_neighbors(self) -> dict[str, list[dict[str, str]]]:
        try:
            detail: dict[str, list[dict[str, Any]]] = self._call(self._napalm.get_lldp_neighbors_detail)
        except _FAILED as e:
            raise self._fail("show lldp neighbors detail", e) from None
        keys = ("remote_system_name", "remote_port", "remote_port_description", "remote_system_description")
        return {port: [{k: str(n.get(k) or "") for k in keys} for n in ns] for port, ns in detail.items()}

    def port_marks(self) -> dict[str, PortMark]:
        out = {}
        for name, row in self._descriptions().items():
            mark = parse_mark(str(row.get("description", "")))
            if mark is not None:
                out[name] = PortMark(mark, row.get("interfaceStatus") != "adminDown")
        return out

    def resume(self, key: str) -> Resumed:
        try:
            state = self._state_of(key)
            if not state:
                return "none"
            if state == "pendingCommitTimer":
                self._napalm.config_session = key  # napalm's confirm_commit and rollback act on this session
                self._pending = True
                return "pending"
            if state == "completed":
                return "confirmed"
            self._run([f"configure session {key} abort"])  # loaded, never committed
            return "none"
        except _FAILED as e:
            raise self._fail(f"looking for config session {key}", e) from None

    def release(self) -> bool:
        """napalm's close without closing: its config session (an unconfirmed commit, a loaded candidate) is aborted,
        and the driver stays open for the next transaction; pyeapi opens a connection per request, so nothing is held
        on the switch meanwhile and the next action skips napalm's `open` (a `show version`)."""
        try:
            self._call(self._napalm.discard_config)
        except _FAILED:
            self.close()
            return False
        self._napalm.config_session, self._pending = None, False
        return True

    def close(self) -> None:
        """Close; napalm aborts an open session on close, so an unconfirmed commit is rolled back now."""
        try:
            self._call(self._napalm.close)
        except _FAILED:
            return  # a dead connection: the switch's own commit timer still reverts anything pending
        finally:
            self._pending = False


_LEADER_SESSION = re.compile(r"^fabricd_t(\d+)_")
_ATTEMPT = re.compile(r"_r(\d+)$")


def _is_attempt(name: str, key: str) -> bool:
    """`name` is a later attempt of the step `key` (`KEY_r2`, ...)."""
    return name.startswith(f"{key}_r") and _ATTEMPT.search(name) is not None and name[len(key) :].count("_") == 1


def _attempt_number(name: str) -> int:
    m = _ATTEMPT.search(name)
    return int(m.group(1)) if m else 1


def _clean(e: BaseException, access: DeviceAccess) -> str:
    """An error message without the password, in case a library echoes its arguments."""
    text = str(e).strip() or type(e).__name__
    secret = access.password.get_secret_value()
    return text.replace(secret, "***") if secret else text
