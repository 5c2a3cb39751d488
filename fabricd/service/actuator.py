"""Opens driver sessions for remediation: inventory access + the platform's driver (blocking calls), and keeps one
warm session per switch between actions (`release`), so an action does not pay the driver's open (napalm's
`open` reads `show version` first) on the path from a threshold crossing to the port down. The scan of fabricd's marks
(at a takeover, then every `remediation.mark_scan_s`) reads every managed switch, so each has one before it is
needed."""

from __future__ import annotations

import threading

from drivers.base import Session, UnreachableError
from drivers.inventory import Inventory
from drivers.registry import get_driver
from topology.errors import FabricdError


class DriverActuator:
    def __init__(self, inventory: Inventory, timeout_s: float = 10.0) -> None:
        self.inventory = inventory
        self.timeout_s = timeout_s
        self._idle: dict[str, Session] = {}  # one session per switch, between transactions
        self._lock = threading.Lock()  # driver threads connect and release concurrently

    def connect(self, device: str) -> Session:
        """The switch's warm session if it has one (taken: nobody else gets it until it is released), else a new one."""
        with self._lock:
            warm = self._idle.pop(device, None)
        if warm is not None:
            return warm
        try:
            access = self.inventory.access(device)
            return get_driver(access.platform).connect(access, self.timeout_s)
        except UnreachableError:
            raise
        except FabricdError as e:
            raise UnreachableError(device, str(e)) from None

    def release(self, session: Session) -> None:
        """Done with `session`: its transaction ends as on close; it stays warm for the switch's next action when the
        driver can keep it (EOS over eAPI) and the switch has no warm session yet, else it is closed."""
        session.guard = None  # the next transaction on it asks its own fence
        if not session.release():
            return
        with self._lock:
            if session.device not in self._idle:
                self._idle[session.device] = session
                return
        session.close()

    def close(self) -> None:
        """Close every warm session (the service stops)."""
        with self._lock:
            idle, self._idle = list(self._idle.values()), {}
        for s in idle:
            s.close()
