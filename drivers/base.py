"""The contract every platform driver meets (napalm's transaction vocabulary, as a typing Protocol).

A `Driver` is stateless: it renders intent, plans a diff offline and opens `Session`s. A `Session` is one
connection to one switch and carries the transaction: load a candidate, read the device-side diff, commit
with a revert timer, confirm or roll back. Every call raises `DriverError` (or a subclass) with a message
that names the device and what to do; nothing else escapes a driver.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from policies.intent import DeviceIntent
from topology.errors import FabricdError

from .inventory import DeviceAccess
from .marks import Mark


class DriverError(FabricdError):
    """A switch could not be reached or refused an operation."""

    def __init__(self, device: str, problem: str):
        self.device = device
        super().__init__(f"{device}: {problem}")


class UnreachableError(DriverError):
    """Could not connect or authenticate; nothing was changed on the device."""


class ConfigRejectedError(DriverError):
    """The device refused a config line; the candidate was discarded, nothing was committed."""


@dataclass
class DevicePlan:
    device: str
    diff: str = ""
    commands: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.commands)

    def to_dict(self) -> dict[str, object]:
        return {
            "device": self.device,
            "changed": self.changed,
            "diff": self.diff,
            "commands": self.commands,
            "error": self.error,
        }


Resumed = Literal["none", "pending", "confirmed"]


@dataclass(frozen=True)
class PortMark:
    """A port carrying fabricd's mark, as a switch shows it."""

    mark: Mark
    admin_up: bool


class Session(Protocol):
    device: str
    # Asked before every request to the switch (None: nothing asked); raises to stop the session there. A leader
    # sets it to its fence: between any two requests of a transaction, a confirm's too, a fenced-off leader stops.
    guard: Callable[[], None] | None

    def facts(self) -> dict[str, Any]: ...
    def running_config(self) -> str: ...
    def interfaces_up(self) -> dict[str, bool]:
        """Oper state by the switch's own port names (`port_key` maps a fabricd port name to one)."""
        ...

    def port_key(self, port: str) -> str:
        """The switch's name for a fabricd port name (cabling names like Ethernet4/1 are SONiC's Ethernet24)."""
        ...

    def load(self, commands: list[str], *, key: str | None = None) -> str:
        """Load a merge candidate; returns the device-side diff. Raises ConfigRejectedError. `key` names the
        transaction on the switch (an EOS config session; a SONiC checkpoint and its revert timer, at the commit
        that follows): a leader's name (`fabricd_t<token>_...`) lets a newer leader find and end it
        (`abort_stale`). None: the driver's own name."""
        ...

    def commit(self, revert_in_s: int) -> None:
        """Commit the candidate; the device reverts by itself unless `confirm` comes within the timer."""
        ...

    def confirm(self) -> None: ...
    def rollback(self) -> None:
        """Undo the pending (unconfirmed) commit now, or discard an uncommitted candidate."""
        ...

    def discard(self) -> None: ...
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
        """Commit `shutdown`/`no shutdown` on one port with a revert timer; the caller confirms. `key` names the
        transaction on the switch (an EOS config session, a SONiC checkpoint) so `resume` can find it again.
        In the same commit the port's description gets fabricd's `mark` (a shutdown) or loses it (`up`: any
        mark of fabricd's is removed); the operator's own description is kept (drivers/marks.py). `description`:
        the port's description as the switch streams it (telemetry), so it need not be read first; None: read it."""
        ...

    def shift_traffic(self, away: bool, revert_in_s: int, *, key: str | None = None) -> None:
        """Take the switch's traffic away before maintenance, or bring it back, confirmed (planned maintenance,
        fabricd/service/maintenance.py): EOS maintenance mode (`maintenance` / `unit System` / `quiesce`, committed
        under the revert timer and confirmed), SONiC `TSA` / `TSB` (reference/maintenance-lldp-bgp-state.md)."""
        ...

    def shift_session(
        self, peer_address: str, asn: int, away: bool, revert_in_s: int, *, key: str | None = None
    ) -> None:
        """Take one BGP session's traffic away (or bring it back), confirmed: what the switch advertises to
        `peer_address` is tagged with RFC 8326's GRACEFUL_SHUTDOWN (65535:0) and its AS path prepended 3 times
        (`asn`: the switch's own), so the peer sends nothing over that link while it has another path; a link's
        drain before its ports go down (fabricd/service/maintenance.py). EOS: route map `FABRICD-DRAIN` and
        `neighbor X route-map FABRICD-DRAIN out`, under the revert timer; SONiC: the same in FRR through vtysh."""
        ...

    def lldp_neighbors(self) -> dict[str, list[dict[str, str]]]:
        """What LLDP hears on each port, in the shape of napalm's get_lldp_neighbors_detail() (fabricd's port
        names; remote_system_name, remote_port, remote_port_description, remote_system_description)."""
        ...

    def port_aliases(self) -> dict[str, str]:
        """alias -> port (fabricd's name), for a switch whose LLDP advertises its ports by alias (SONiC: CONFIG_DB
        PORT `alias`, and each SONiC name as itself); {} where LLDP advertises the ports' names (EOS)."""
        ...

    def port_marks(self) -> dict[str, PortMark]:
        """Every port (by fabricd's name) that carries fabricd's mark, with its admin state: what fabricd did to
        this switch, as the switch remembers it."""
        ...

    def resume(self, key: str) -> Resumed:
        """What became of transaction `key`, begun by a fabricd that died before it was decided: "pending" (it is
        committed under its revert timer, and this session now confirms or rolls it back), "confirmed", or "none"
        (never committed, already reverted, or no longer known: begin again). A loaded but uncommitted candidate
        under `key` is discarded (it would hold the switch's config lock)."""
        ...

    def abort_stale(self, below: int, keep: Collection[str]) -> list[str]:
        """End every fabricd transaction on the switch named with a leader token lower than `below` (an old leader's,
        `fabricd_t<token>_...`), except those named in `keep` (actions the new leader resumes under their own name):
        an uncommitted one is discarded, one pending under its revert timer is rolled back. A late command of the old
        leader then finds nothing to act on. Returns the names ended."""
        ...

    def abandon(self) -> None:
        """Let go of the session without another word to the switch (a fenced leader may not touch it): whatever is
        pending stays for the switch's revert timer or the new leader to decide."""
        ...

    def close(self) -> None: ...
    def release(self) -> bool:
        """End what this session holds as `close` does (an unconfirmed commit is rolled back now); True if the session
        may carry the next transaction to this switch (nothing of this one is left in it), False if it was closed."""
        ...


@runtime_checkable
class ReadsFrrBgp(Protocol):
    """A session that reads FRR's BGP summary (SONiC: `vtysh -c 'show bgp summary json'`), FRR's JSON object."""

    def bgp_summary(self) -> dict[str, Any]: ...


class Driver(Protocol):
    platform: str
    running_suffix: str  # file suffix of a saved running config, for offline plans

    def render(self, intent: DeviceIntent) -> str: ...
    def plan(self, device: str, running: str, intended: str, ports: set[str]) -> DevicePlan: ...
    def connect(self, access: DeviceAccess, timeout_s: float = 30.0) -> Session: ...
