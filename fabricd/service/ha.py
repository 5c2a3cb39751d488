"""This instance's part in hot standby: the leader lease (leader.py's loop, on the bus) and what follows from it for
everything that acts: may it act now (`acting`), why not before a switch call or a request (`fence`), its fencing
token (`token`), and stepping down when the state names a newer leader (`fenced_out`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from fabricd.bus import connect as connect_bus

from .config import ServiceConfig
from .leader import Leadership
from .state import StateStore


class HaRole:
    def __init__(
        self, cfg: ServiceConfig, state: StateStore, clock: Callable[[], int], instance: str,
        elected: Callable[[int], Awaitable[None]],
    ) -> None:  # fmt: skip
        self.cfg, self.state, self.clock, self.instance = cfg, state, clock, instance
        # Hot standby: every instance watches; the one holding the lease acts (leader.py).
        self.leadership: Leadership | None = None
        if cfg.ha.enabled:
            ha = cfg.ha
            self.leadership = Leadership(ha, lambda: connect_bus(cfg.bus, cfg.source, f"fabricd {instance}"),
                                         elected, claim=self._claim, instance=ha.instance)  # fmt: skip
            # A standby writes nothing: its health says `failing` (and the alert fires) only when it must write.
            state.writes.needed = self.acting

    def token(self) -> int | None:
        """The leader's fencing token now (None: acting alone, no standby)."""
        return self.leadership.token if self.leadership is not None else None

    def acting(self) -> bool:
        """This instance acts: it runs alone, or it holds the leader lease."""
        return self.leadership is None or self.leadership.acting()

    def fence(self) -> str | None:
        """Why this instance may not act now, or None: asked before every switch call and request of people."""
        lead = self.leadership
        if lead is None:
            return None
        if not lead.acting():
            return lead.why_not_acting()
        margin = self.cfg.ha.switch_call_margin_s
        if lead.valid_for() < margin:  # a call must end while the lease is certainly ours
            return f"the leader lease of {lead.instance} ends in {lead.valid_for():.2f} s (< {margin:g} s for a call)"
        held = self.state.leadership.current()
        if held is None or held[1] != lead.token:
            who = "nobody" if held is None else f"{held[0]} (token {held[1]})"
            return f"fenced: the state names {who} as leader, not this instance (token {lead.token})"
        return None

    def fenced_out(self, why: str) -> None:
        """The state names a newer leader: this instance was paused or cut off and is no longer it."""
        if self.leadership is not None:
            self.leadership.step_down(why)

    async def _claim(self, token: int) -> bool:
        """This instance took the lease: record its fencing token, off the event loop (it keeps renewing the lease
        and answering the API meanwhile; the claim ends an old leader's stuck write, Leadership.claim)."""
        won = await asyncio.to_thread(self.state.leadership.claim, self.instance, token, self.clock())
        if won:
            self.state.writes.ok()  # the claim was written: a write that failed in an earlier term is moot
        return won

    def status(self) -> dict[str, Any]:
        lead = self.leadership
        if lead is None:
            return {"enabled": False, "role": "leader"}
        return {"enabled": True, "role": lead.role(), "instance": lead.instance, "leader": lead.holder,
                "token": lead.token}  # fmt: skip
