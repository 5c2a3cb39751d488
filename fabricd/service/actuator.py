"""Opens driver sessions for remediation: inventory access + the platform's driver (blocking calls)."""

from __future__ import annotations

from drivers.base import Session, UnreachableError
from drivers.inventory import Inventory
from drivers.registry import get_driver
from topology.errors import FabricdError


class DriverActuator:
    def __init__(self, inventory: Inventory, timeout_s: float = 10.0) -> None:
        self.inventory = inventory
        self.timeout_s = timeout_s

    def connect(self, device: str) -> Session:
        try:
            access = self.inventory.access(device)
            return get_driver(access.platform).connect(access, self.timeout_s)
        except UnreachableError:
            raise
        except FabricdError as e:
            raise UnreachableError(device, str(e)) from None
