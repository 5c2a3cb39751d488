"""What remediation works through: the telemetry it reads (`PortView`, implemented by port_view.py) and the switch
sessions it opens (`Actuator`, implemented by actuator.py). Typing Protocols, so tests give fakes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from drivers.base import Session
from topology.jsontypes import JsonDict
from topology.model import Endpoint


class PortView(Protocol):
    """What remediation reads from telemetry."""

    def oper_down(self) -> frozenset[Endpoint]: ...
    def routed_down(self) -> frozenset[Endpoint]:
        """Ports whose BGP session is down (both ends of its link): no routed traffic, whatever their oper state."""
        ...

    def admin_up(self) -> Mapping[Endpoint, bool]:
        """Each port's admin state as telemetry last showed it (a port that never reported it is absent)."""
        ...

    def evidence(self, device: str, port: str) -> JsonDict: ...
    def out_rate_bps(self, device: str, port: str) -> float | None:
        """What the port sends now, bits/s, from its out-octets counter (None: no rate yet)."""
        ...

    def description(self, device: str, port: str) -> str | None:
        """The port's description as telemetry last showed it; None when the switch does not stream it."""
        ...

    async def wait_oper(self, device: str, port: str, up: bool, timeout_s: float) -> bool: ...
    def expects_lldp(self, device: str, port: str) -> bool:
        """Whether a neighbour should be heard on the port once it is up (the switch streams LLDP there, and that
        kind of neighbour speaks it): a repair is then confirmed only by a fresh LLDP sample."""
        ...

    async def lldp_neighbour(self, device: str, port: str, since_ns: int, timeout_s: float) -> Endpoint | None:
        """Who LLDP hears on the port in a sample taken after `since_ns` (unix ns), waiting up to `timeout_s` for
        one; None when nothing was heard in time, or nothing is expected (`expects_lldp`: at once)."""
        ...


class Actuator(Protocol):
    """Opens a driver session to a switch (blocking; called from worker threads)."""

    def connect(self, device: str) -> Session: ...
    def release(self, session: Session) -> None:
        """Done with a session `connect` gave: its transaction ends as on `close`; the actuator may keep it open."""
        ...
