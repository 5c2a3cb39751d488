"""One transaction-capable SSH session to a SONiC switch, through netmiko.

SONiC logs an SSH user into bash (`admin@leaf1:~$`). netmiko 4.x has no community-SONiC driver (`dell_sonic`
enters Dell's sonic-cli; `edgecore_sonic` is a plain `LinuxSSH`), and its maintainers point SONiC users at
`linux` (ktbyers/netmiko#3517), which is what this uses. Every command runs as `CMD; echo "fabricd-rc=$?"` so its
exit status is known, not guessed from output.

The transaction, on SONiC's Generic Config Updater (sonic-utilities `config/main.py`):
- load: write the JSON patch with a quoted heredoc, read it back, `config apply-patch -d` (dry run: the
  switch validates it against its YANG models and changes nothing).
- commit: `config checkpoint NAME`, start the revert timer, `config apply-patch FILE`.
- confirm / rollback: decided by whoever creates the lock directory first (below); rollback is
  `config rollback NAME`. A confirm also persists (`config save -y`), as napalm's EOS confirm writes memory.

SONiC has no commit timer, so the switch gets one of its own: a detached background job
`nohup sh -c 'sleep N; mkdir LOCK 2>/dev/null && cat PIDFILE >/dev/null 2>&1 && sudo -n config rollback NAME &&
sudo -n config delete-checkpoint NAME' &`. It runs on the switch, so a controller that dies or loses the network
still gets its change reverted. `mkdir` is atomic: the confirm (or fabricd's own rollback) and the timer both try to
create LOCK, and only the winner acts, so a confirm racing the timer's expiry can never leave the switch half
reverted or a confirmed change rolled back. The lock is won only with the commit's pid file (PIDFILE) still there,
by the timer as by fabricd: whoever ends the commit removes it first, so a lock freed after that decides nothing (a
late confirm of an old leader, or the timer of a commit an old leader decided and never finished). The job can
only be killed after LOCK is won, while it is still sleeping, so `kill PID` never hits a reused pid. Commands use
`sudo -n`: a switch whose sudo asks for a password fails at once with "a password is required" instead of hanging
the session.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
import shlex
import time
from collections.abc import Callable, Collection
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from netmiko.exceptions import NetmikoBaseException

from drivers.base import ConfigRejectedError, DriverError, PortMark, Resumed
from drivers.drain_policy import DRAIN_MAP, drain_map_used_by_others, drain_route_map
from drivers.inventory import DeviceAccess
from drivers.marks import Mark, parse_mark, with_mark, without_mark
from drivers.sonic.patch import (
    HEREDOC_END,
    Op,
    PatchError,
    json_pointer,
    patch_commands,
    patch_from_commands,
    patch_text,
)
from drivers.sonic.render import fabricd_port_name, sonic_port_name
from drivers.ssh import SSH_ERROR, open_ssh

DEVICE_TYPE = "linux"
_RC = re.compile(r"^fabricd-rc=(\d+)[ \t\r]*$", re.MULTILINE)
_PID = re.compile(r"fabricd-pid=(\d+)")
_FAILED = (NetmikoBaseException, SSH_ERROR, OSError, EOFError)
# Generous: the updater validates the whole config against YANG and applies table by table (tens of seconds).
_CONFIG_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class _Pending:
    checkpoint: str
    pid: int
    lock: str
    decided: bool = False  # this session already holds the lock (it took the decision over in resume)


class SonicSession:
    def __init__(self, access: DeviceAccess, timeout_s: float = 30.0):
        self.device = access.name
        self.guard: Callable[[], None] | None = None
        self._access = access
        self._timeout = timeout_s
        self._conn = open_ssh(access, DEVICE_TYPE, timeout_s, self._clean, auth_timeout=timeout_s,
                              banner_timeout=timeout_s)  # fmt: skip
        # The prompt netmiko found at login (`admin@leaf1:~` + `$`): waiting for it saves a prompt probe per command.
        self._prompt = re.escape(self._conn.base_prompt) + r"[$#]"
        # Unique per session: two controllers (or two runs) never share a checkpoint, file or lock.
        self._tag = f"fabricd-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"
        self._commits = 0
        self._file = f"/tmp/{self._tag}.json"
        self._loaded = False
        self._load_key: str | None = None  # the name load() was given for the commit that follows
        self._pending: _Pending | None = None
        # A leader's session, once it has raised the switch's fence to its token (`_raise_fence`): the token file
        # every command it sends is checked against on the switch (`_fenced`).
        self._fence: str | None = None
        # Interactive bash would expand `!` in heredoc lines (history expansion); switch it off for this login.
        try:
            self._run("set +H")
        except DriverError:
            with suppress(*_FAILED):
                self._conn.disconnect()
            raise

    # --- plumbing -------------------------------------------------------------------------------------------
    def _clean(self, e: BaseException | str) -> str:
        """An error message without the password, in case a library echoes its arguments."""
        text = (str(e).strip() or type(e).__name__) if isinstance(e, BaseException) else e
        secret = self._access.password.get_secret_value()
        return text.replace(secret, "***") if secret else text

    def _run(self, command: str, timeout_s: float | None = None) -> tuple[int, str]:
        """(exit status, output) of one shell command, the guard asked first (every command goes through here or
        `_upload`)."""
        if self.guard is not None:
            self.guard()
        line = command if self._fence is None else _fenced(self._fence, command)
        try:
            out = str(
                self._conn.send_command(
                    f'{line}; echo "fabricd-rc=$?"',
                    expect_string=self._prompt,
                    read_timeout=timeout_s or self._timeout,
                )
            )
        except _FAILED as e:
            raise DriverError(self.device, f"'{command.split(';')[0][:60]}' failed: {self._clean(e)}") from None
        found = list(_RC.finditer(out))
        if not found:
            raise DriverError(self.device, f"'{command[:60]}' gave no exit status; is the login shell bash?")
        last = found[-1]
        if self._fence is not None and _FENCED_OFF in out[: last.start()]:
            raise DriverError(self.device, f"refused by the switch: a newer leader has raised its fence ({self._fence}"
                              f" is gone); '{command.split(';')[0][:60]}' was not run")  # fmt: skip
        return int(last.group(1)), out[: last.start()].rstrip("\r\n")

    def _ok(self, command: str, what: str, timeout_s: float | None = None) -> str:
        status, out = self._run(command, timeout_s)
        if status != 0:
            raise DriverError(self.device, f"{what} failed (exit {status}): {self._clean(_summary(out))}")
        return out

    # --- reading --------------------------------------------------------------------------------------------
    def facts(self) -> dict[str, Any]:
        version = _fields(self._ok("show version", "show version"))
        return {
            "hostname": self._ok("hostname", "hostname").strip(),
            "vendor": "SONiC",
            "os_version": version.get("SONiC Software Version", ""),
            "model": version.get("HwSKU", ""),
            "platform": version.get("Platform", ""),
            "serial_number": version.get("Serial Number", ""),
            "interface_list": sorted(self.interfaces_up()),
        }

    def running_config(self) -> str:
        """`show runningconfiguration all`: the running CONFIG_DB as config_db.json (plus FRR's text as bgpraw)."""
        out = self._ok("show runningconfiguration all", "show runningconfiguration all", _CONFIG_TIMEOUT_S)
        text = out[out.find("{") :] if "{" in out else out
        try:
            json.loads(text)
        except json.JSONDecodeError as e:
            problem = f"show runningconfiguration all is not JSON (line {e.lineno}: {e.msg})"
            raise DriverError(self.device, problem) from None
        return text

    def port_key(self, port: str) -> str:
        return sonic_port_name(port)

    def interfaces_up(self) -> dict[str, bool]:
        rows = _table(self._ok("show interfaces status", "show interfaces status"))
        return {r["Interface"]: r.get("Oper", "") == "up" for r in rows if "Interface" in r}

    # --- the transaction ------------------------------------------------------------------------------------
    def load(self, commands: list[str], *, key: str | None = None) -> str:
        """Upload the plan's patch and have the switch dry-run it; returns what the updater says it would do.
        `key`: the name of the commit that follows (its checkpoint and revert timer), unless it names its own."""
        if self._pending is not None:
            raise DriverError(self.device, "a commit is still pending; confirm or roll it back first")
        try:
            patch = patch_from_commands(commands)
        except PatchError as e:
            raise DriverError(self.device, str(e)) from None
        self._upload(patch)
        status, out = self._run(f"sudo -n config apply-patch --dry-run {self._file}", _CONFIG_TIMEOUT_S)
        if status != 0:
            with suppress(DriverError):
                self.discard()
            raise ConfigRejectedError(self.device, f"refused the patch: {self._clean(_summary(out))}")
        self._loaded, self._load_key = True, key
        return "\n".join(line for line in out.splitlines() if line.strip() != "** DRY RUN EXECUTION **") + "\n"

    def _upload(self, patch: list[Op]) -> None:
        body = patch_text(patch)
        if self.guard is not None:
            self.guard()
        try:
            # The heredoc's lines are no command: no echo check, wait for the prompt after its end marker.
            self._conn.send_command(
                f"cat > {self._file} <<'{HEREDOC_END}'\n{body}{HEREDOC_END}",
                expect_string=self._prompt,
                cmd_verify=False,
                read_timeout=self._timeout,
            )
        except _FAILED as e:
            raise DriverError(self.device, f"writing {self._file} failed: {self._clean(e)}") from None
        written = self._ok(f"cat {self._file}", f"reading back {self._file}")
        try:
            same = json.loads(written[written.find("[") :]) == patch
        except json.JSONDecodeError:
            same = False
        if not same:
            raise DriverError(self.device, f"{self._file} on the switch is not the patch that was sent; not applied")

    def commit(self, revert_in_s: int, *, key: str | None = None) -> None:
        """Checkpoint, arm the switch's revert timer, apply. A refused apply is rolled back here and then."""
        if not self._loaded:
            raise DriverError(self.device, "nothing loaded to commit")
        key = key if key is not None else self._load_key
        self._commits += 1
        # A key is committed again only after resume() found nothing pending under it, but a decided commit's timer
        # may still sleep (its decider died before stopping it): a new attempt never reuses a name the switch still
        # holds a trace of, or that timer would wake to find the new attempt's pid file and roll it back.
        name = f"{self._tag}-{self._commits}"
        if key is not None:
            traces = self._attempts(key)
            if any(traces.values()):
                raise DriverError(self.device, f"a commit under {key} is still pending; resume it first")
            name = _next_attempt(key, traces)
        lock = f"/tmp/{name}.decided"
        self._ok(f"sudo -n config checkpoint {name}", f"config checkpoint {name}")
        # The timer, too, acts only while the pid file is there: a new leader that finds the lock taken by an old
        # leader that decided and never finished (fenced off or dead) removes the pid file and frees the lock, and
        # the timer must not then win it and roll back to this checkpoint, undoing whatever was committed since.
        timer = (
            f"sleep {int(revert_in_s)}; mkdir {lock} 2>/dev/null && cat {_pidfile(name)} >/dev/null 2>&1"
            f" && sudo -n config rollback {name} && sudo -n config delete-checkpoint {name}"
        )
        detached = f"nohup sh -c {shlex.quote(timer)} >/dev/null 2>&1 </dev/null &"
        # The timer's pid is also kept on the switch, so a fabricd that dies here can find and decide it (resume).
        status, out = self._run(f'{detached} echo "fabricd-pid=$!"; echo $! > {_pidfile(name)}')
        found = _PID.search(out)
        if status != 0 or found is None:
            with suppress(DriverError):
                self._run(f"sudo -n config delete-checkpoint {name}")
            raise DriverError(self.device, f"could not start the revert timer: {self._clean(_summary(out))}")
        self._pending = _Pending(name, int(found.group(1)), lock)
        self._loaded = False
        # The timer is already counting: the apply has to finish within it, or the timer wins the lock.
        status, out = self._run(f"sudo -n config apply-patch {self._file}", max(float(revert_in_s), self._timeout))
        if status != 0:
            problem = self._clean(_summary(out))
            try:
                self.rollback()
            except DriverError as e:
                raise DriverError(
                    self.device,
                    f"apply-patch failed ({problem}) and so did the rollback ({e}); the switch reverts"
                    f" to checkpoint {name} when its timer ends in {revert_in_s} s",
                ) from None
            raise ConfigRejectedError(self.device, f"refused the patch: {problem}; rolled back to {name}")

    def confirm(self) -> None:
        """Take the decision from the timer, persist (`config save -y`), then stop the timer and clean up. A
        save that fails is rolled back, so a confirmed change is never one a reboot would silently drop."""
        pending = self._pending
        if pending is None:
            raise DriverError(self.device, "no pending commit to confirm")
        if not self._decide(pending):
            self._pending = None
            raise DriverError(
                self.device,
                f"too late to confirm: the revert timer or a newer leader decided {pending.checkpoint}"
                " first (rolled back)",
            )
        # The timer still sleeps (it never got the lock) and stays armed until the save is done.
        status, out = self._run("sudo -n config save -y", _CONFIG_TIMEOUT_S)
        if status != 0:
            self._undo(pending)
            raise DriverError(
                self.device, f"config save failed ({self._clean(_summary(out))}); rolled back to {pending.checkpoint}"
            )
        self._pending = None
        self._finish(pending)

    def rollback(self) -> None:
        """Undo the pending commit now (a timer that already won the lock is rolling back by itself), or
        discard an uncommitted candidate."""
        pending = self._pending
        if pending is None:
            self.discard()
            return
        if not pending.decided and self._run(f"cat {_pidfile(pending.checkpoint)}")[0] != 0:
            self._pending = None  # decided elsewhere (a new leader confirmed or ended it): nothing of ours to undo
            return
        if not self._decide(pending):
            self._pending = None  # the timer got there first and is reverting the switch itself
            return
        self._undo(pending)

    def _decide(self, pending: _Pending) -> bool:
        """Create the lock directory: True if this session, not the timer nor anyone else, decides the commit's fate.
        Whoever decided it before removes the pid file, then the lock (`_finish`): a lock won after that finds no
        pid file and is given back (a late confirm of an old leader whose commit a new leader ended decides
        nothing)."""
        if pending.decided:
            return True
        if self._run(f"mkdir {pending.lock}")[0] != 0:
            return False
        if self._run(f"cat {_pidfile(pending.checkpoint)} >/dev/null")[0] != 0:
            self._run(f"rmdir {pending.lock}")  # decided and finished elsewhere: not ours to decide
            return False
        return True

    def _undo(self, pending: _Pending) -> None:
        """Roll back to the checkpoint while holding the lock; on failure hand the lock back to the timer."""
        status, out = self._run(f"sudo -n config rollback {pending.checkpoint}", _CONFIG_TIMEOUT_S)
        if status != 0:
            self._run(f"rmdir {pending.lock}")  # the timer, still armed, tries again when it ends
            raise DriverError(
                self.device,
                f"config rollback {pending.checkpoint} failed: {self._clean(_summary(out))}; the"
                " switch's timer tries again when it ends",
            )
        self._pending = None
        self._finish(pending)

    def _finish(self, pending: _Pending) -> None:
        """Stop the timer (still sleeping: it never got the lock, so its pid is its own) and clean up; the
        decision is made, so a failure here leaves litter, never a wrong config."""
        with suppress(DriverError):
            self._run(f"kill {pending.pid}")
            self._run(f"rm -f {_pidfile(pending.checkpoint)}")  # first: a lock won after the next line decides nothing
            self._run(f"rmdir {pending.lock}")
            self._run(f"sudo -n config delete-checkpoint {pending.checkpoint}")
            self.discard()

    def discard(self) -> None:
        self._loaded = False
        self._ok(f"rm -f {self._file}", f"removing {self._file}")

    def _ports(self) -> dict[str, dict[str, Any]]:
        """CONFIG_DB's PORT table (from the running configuration)."""
        table = json.loads(self.running_config()).get("PORT", {})
        return table if isinstance(table, dict) else {}

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
        """PORT|<port> admin_status (and the description's mark) through the same patch/commit path (so it carries
        the revert timer)."""
        name = sonic_port_name(port)
        patch: list[Op] = [
            {"op": "add", "path": json_pointer("PORT", name, "admin_status"), "value": "up" if up else "down"}
        ]
        old = description if description is not None else str(self._ports().get(name, {}).get("description", ""))
        new = with_mark(old, mark) if mark is not None and not up else without_mark(old)
        if new != old:
            where = json_pointer("PORT", name, "description")
            patch.append({"op": "add", "path": where, "value": new} if new else {"op": "remove", "path": where})
        self.load(patch_commands(patch))
        self.commit(revert_in_s, key=key)

    def shift_traffic(self, away: bool, revert_in_s: int, *, key: str | None = None) -> None:
        # TSA/TSB act at once (no checkpoint to confirm): fabricd runs TSB itself if the shift is not verified
        self._ok("sudo TSA" if away else "sudo TSB", "traffic shift away" if away else "traffic shift back")

    def shift_session(
        self, peer_address: str, asn: int, away: bool, revert_in_s: int, *, key: str | None = None
    ) -> None:
        # FRR's running config through vtysh, acting at once (SONiC's split mode does not save it: a reboot drops
        # it, as it drops TSA's effect until the startup TSA service runs); fabricd undoes it itself if unverified
        bgp = [f"router bgp {asn}", "address-family ipv4 unicast"]
        if away:
            cmds = ["configure terminal", *drain_route_map(asn), "exit", *bgp,
                    f"neighbor {peer_address} route-map {DRAIN_MAP} out", "end"]  # fmt: skip
        else:
            cmds = ["configure terminal", *bgp, f"no neighbor {peer_address} route-map {DRAIN_MAP} out"]
            frr = self._ok("sudo -n vtysh -c 'show running-config'", "vtysh -c 'show running-config'")
            if not drain_map_used_by_others(frr, peer_address):  # the definition goes with its last use
                cmds += ["exit", "exit", f"no {drain_route_map(asn)[0]}"]
            cmds += ["end"]
        what = f"drain policy on BGP neighbour {peer_address}" if away else f"BGP neighbour {peer_address} back"
        self._ok("sudo -n vtysh " + " ".join(f"-c {shlex.quote(c)}" for c in cmds), what)

    def lldp_neighbors(self) -> dict[str, list[dict[str, str]]]:
        """`show lldp table` (sonic-utilities' lldpshow: LocalPort, RemoteDevice, RemotePortID, Capability,
        RemotePortDescr)."""
        out: dict[str, list[dict[str, str]]] = {}
        for row in _table(self._ok("show lldp table", "show lldp table")):
            local = row.get("LocalPort", "")
            if not local.startswith("Ethernet"):
                continue  # the closing rule and the "Total entries displayed" line
            out.setdefault(fabricd_port_name(local), []).append({
                "remote_system_name": row.get("RemoteDevice", ""),
                "remote_port": row.get("RemotePortID", ""),
                "remote_port_description": row.get("RemotePortDescr", ""),
                "remote_system_description": "",
            })  # fmt: skip
        return out

    def bgp_summary(self) -> dict[str, Any]:
        """FRR's `vtysh -c 'show bgp summary json'` (what bgpmon reads to write STATE_DB's NEIGH_STATE_TABLE): the
        source of the BGP neighbours' state where that table has no rows (FRR in unified or split mode)."""
        out = self._ok("vtysh -c 'show bgp summary json'", "vtysh -c 'show bgp summary json'")
        text = out[out.find("{") :] if "{" in out else out
        try:
            got = json.loads(text)
        except json.JSONDecodeError as e:
            raise DriverError(self.device, f"show bgp summary json is not JSON (line {e.lineno}: {e.msg})") from None
        if not isinstance(got, dict):
            raise DriverError(self.device, "show bgp summary json is not a JSON object")
        return got

    def port_aliases(self) -> dict[str, str]:
        """What a neighbour's LLDP names this switch's ports by: lldpmgrd advertises a port's alias, else its SONiC
        name (reference/maintenance-lldp-bgp-state.md)."""
        out = {}
        for name, row in self._ports().items():
            out[name] = fabricd_port_name(name)
            alias = row.get("alias") if isinstance(row, dict) else None
            if isinstance(alias, str) and alias:
                out[alias] = fabricd_port_name(name)
        return out

    def port_marks(self) -> dict[str, PortMark]:
        out = {}
        for name, row in self._ports().items():
            mark = parse_mark(str(row.get("description", "")))
            if mark is not None:
                out[fabricd_port_name(name)] = PortMark(mark, row.get("admin_status", "down") == "up")
        return out

    def resume(self, key: str) -> Resumed:
        """A pending commit leaves its timer's pid in /tmp/NAME.pid until it is decided (NAME: the key, or the key
        and the attempt, `_next_attempt`). SONiC keeps no record of a confirmed one (the checkpoint is deleted), so
        that is "none": applying the same patch again is a no-op."""
        if self._pending is not None:
            raise DriverError(self.device, "a commit is still pending in this session; confirm or roll it back first")
        names = [n for n, has_pid in self._attempts(key).items() if has_pid]
        if not names:
            return "none"
        name = names[-1]  # one attempt at a time: an attempt starts only once resume found the one before decided
        status, out = self._run(f"cat {_pidfile(name)}")
        if status != 0 or not out.strip().isdigit():
            return "none"
        pending = _Pending(name, int(out.strip()), f"/tmp/{name}.decided")
        if not self._decide(pending):
            # Decided elsewhere: by the timer (it reverted, or is reverting, the switch by itself) or by an old leader
            # fenced off or dead before it finished (its change stays; the caller does its step again). Without the
            # pid file the timer, still asleep in the second case, does nothing when it ends; the lock stays, so
            # the name is not used again while that timer may still sleep.
            self._run(f"rm -f {_pidfile(name)}")
            return "none"
        self._pending = dataclasses.replace(pending, decided=True)
        return "pending"

    def _attempts(self, key: str) -> dict[str, bool]:
        """The names the switch holds a trace of (a pid file or a lock) for commits under `key`, oldest first:
        name -> whether its pid file is there (the commit may still be pending)."""
        status, out = self._run("ls /tmp/ 2>/dev/null")
        if status != 0:
            raise DriverError(self.device, f"could not list /tmp: {self._clean(_summary(out))}")
        found: dict[str, bool] = {}
        for m in re.finditer(rf"(?<![\w-]){re.escape(key)}(_r\d+)?\.(pid|decided)\b", out):
            name = key + (m.group(1) or "")
            found[name] = found.get(name, False) or m.group(2) == "pid"
        return dict(sorted(found.items(), key=lambda kv: _attempt_number(kv[0])))

    def abort_stale(self, below: int, keep: Collection[str]) -> list[str]:
        """The switch's fence raised to `below` first (`_raise_fence`): from then on no command of an older leader
        runs here, even one already past its own fence check when its leader was paused. Then an old leader's
        commits still pending under their timers (their pid files, /tmp/fabricd_t<token>_*.pid) are rolled back,
        as `resume` + `rollback` would for our own: each was begun before the fence rose, and so before any commit
        of this leader here (this runs before each), so its checkpoint holds nothing of this leader's."""
        status, out = self._run("ls /tmp/ 2>/dev/null")
        if status != 0:
            raise DriverError(self.device, f"could not list /tmp: {self._clean(_summary(out))}")
        out = self._raise_fence(below, out)  # what /tmp holds once it rose: nothing older comes after
        names = {m.group(0)[: -len(".pid")] for m in _STALE_PID.finditer(out)}
        ended = []
        for name in sorted({_ATTEMPT.sub("", n) for n in names}):  # a key's attempts: resume finds the last one
            token = int(name.split("_", 2)[1][1:])
            if token >= below or name in keep:
                continue
            if self.resume(name) == "pending":
                self.rollback()
                ended.append(name)
        return ended

    def _raise_fence(self, token: int, listing: str) -> str:
        """Make `token` the switch's leader token: the older leaders' token files go and this one's is written, in
        one command under the lock every fenced command runs under (`_fenced`), so an older leader's command
        already on its way either ran whole before this (and `abort_stale` ends what it left) or is refused. A
        newer leader's file there: this session's leader is fenced off (its state guard says so too). Returns what /tmp
        holds once it rose (listed under the same lock)."""
        leads = {int(m.group(1)) for m in _LEAD.finditer(listing)}
        if newer := [t for t in leads if t > token]:
            raise DriverError(self.device, f"a newer leader (token {max(newer)}) has raised this switch's fence; this"
                              f" leader's token is {token}: not acting here")  # fmt: skip
        older = " ".join(_lead_file(t) for t in sorted(leads) if t < token)
        script = (f"rm -f {older}; " if older else "") + f"echo {token} > {_lead_file(token)} && ls /tmp/"
        self._fence = None
        out = self._ok(f"flock -o {_FENCE_LOCK} sh -c {shlex.quote(script)}", "raising the switch's leader fence")
        self._fence = _lead_file(token)
        return out

    def abandon(self) -> None:
        """Disconnect without a word: a commit pending here is left to the switch's timer (or the new leader)."""
        self._pending = None
        self._loaded = False
        with suppress(*_FAILED):
            self._conn.disconnect()

    def release(self) -> bool:
        """Closed (an SSH session is not kept between transactions: it would hold a login on the switch)."""
        self.close()
        return False

    def close(self) -> None:
        """Close; a commit still pending is rolled back now (else the switch's timer reverts it)."""
        try:
            if self._pending is not None:
                with suppress(DriverError):
                    self.rollback()
        finally:
            with suppress(*_FAILED):
                self._conn.disconnect()


_STALE_PID = re.compile(r"\bfabricd_t\d+_[A-Za-z0-9_]+\.pid\b")
# The switch's fence (HA): the newest leader's token file, and the lock every fenced command and every raise runs
# under (util-linux flock(1), on every SONiC image: Debian's essential util-linux). `-o`: a background job the
# command starts (the revert timer) does not keep the lock. /tmp is tmpfs: after a reboot no leader's file is
# there, so no command of any leader runs until one raises the fence again (before its next commit).
_LEAD = re.compile(r"\bfabricd_lead_t(\d+)\b")
_FENCE_LOCK = "/tmp/fabricd_lead.lock"
_FENCED_OFF = "fabricd-fenced-off"


def _lead_file(token: int) -> str:
    return f"/tmp/fabricd_lead_t{token}"


def _fenced(lead: str, command: str) -> str:
    """`command` run only while `lead` (this leader's token file) is on the switch, checked under the fence's lock
    so a raise cannot fall between the check and the command; a refusal prints _FENCED_OFF. The command runs in a
    shell of its own, so its lists and background jobs (`... & echo $!`) mean what they meant alone."""
    check = f"cat {lead} >/dev/null 2>&1"
    script = f"{check} || echo {_FENCED_OFF}; {check} && sh -c {shlex.quote(command)}"
    return f"flock -o {_FENCE_LOCK} sh -c {shlex.quote(script)}"


def _pidfile(name: str) -> str:
    return f"/tmp/{name}.pid"


_ATTEMPT = re.compile(r"_r(\d+)$")


def _attempt_number(name: str) -> int:
    m = _ATTEMPT.search(name)
    return int(m.group(1)) if m else 1


def _next_attempt(key: str, traces: Collection[str]) -> str:
    """The name of the next commit under `key`: the key itself if the switch holds no trace of it, else the key
    with the attempt number after the last one (`KEY_r2`, `KEY_r3`...)."""
    if not traces:
        return key
    return f"{key}_r{max(_attempt_number(n) for n in traces) + 1}"


def _summary(out: str) -> str:
    """The updater's `Error: ...` (click's failure text) if there is one, else the last line of output."""
    lines = [line.rstrip() for line in out.splitlines()]
    for i, line in enumerate(lines):
        if line.startswith("Error: "):
            rest = [x for x in lines[i + 1 :] if x.strip()][:2]
            return " ".join([line.removeprefix("Error: "), *rest])
    tail = [line for line in lines if line.strip()]
    return tail[-1] if tail else "no output"


def _fields(out: str) -> dict[str, str]:
    """`Key: value` lines (show version)."""
    pairs = (line.partition(":") for line in out.splitlines())
    return {k.strip(): v.strip() for k, sep, v in pairs if sep}


def _table(out: str) -> list[dict[str, str]]:
    """A SONiC show table (header, a line of dashes per column, rows) as dicts, columns cut at the dashes."""
    lines = out.splitlines()
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() and set(line.strip()) <= {"-", " "}:
            spans = [m.span() for m in re.finditer(r"-+", line)]
            header = lines[i - 1]
            names = [header[a:b].strip() or f"column{n}" for n, (a, b) in enumerate(spans)]
            return [
                {n: row[a:b].strip() for n, (a, b) in zip(names, spans, strict=True)}
                for row in lines[i + 1 :]
                if row.strip()
            ]
    return []
