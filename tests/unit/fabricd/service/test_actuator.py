"""The actuator keeps one warm session per switch between actions (an EOS session over eAPI holds nothing open on
the switch) and closes what it cannot keep."""

from __future__ import annotations

from typing import Any

import pytest

from fabricd.service import actuator as actuator_mod
from fabricd.service.actuator import DriverActuator


class Session:
    def __init__(self, device: str, log: list[str], keep: bool) -> None:
        self.device, self.log, self.keep = device, log, keep

    def release(self) -> bool:
        self.log.append(f"release {self.device}")
        if not self.keep:
            self.close()
        return self.keep

    def close(self) -> None:
        self.log.append(f"close {self.device}")


class Inventory:
    def access(self, device: str) -> Any:
        return type("Access", (), {"platform": "sonic" if device.startswith("sonic") else "eos"})()


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    log: list[str] = []
    current = [""]  # the device the actuator looked up last (the driver is got right after)

    class Driver:
        def __init__(self, platform: str) -> None:
            self.platform = platform

        def connect(self, access: Any, timeout_s: float) -> Session:
            log.append("open")
            return Session(current[0], log, keep=self.platform == "eos")

    real_access = Inventory.access

    def access(self: Inventory, device: str) -> Any:
        current[0] = device
        return real_access(self, device)

    monkeypatch.setattr(Inventory, "access", access)
    monkeypatch.setattr(actuator_mod, "get_driver", Driver)
    return log


def test_a_released_session_carries_the_switchs_next_action(opened: list[str]) -> None:
    act = DriverActuator(Inventory())  # type: ignore[arg-type]
    s = act.connect("leaf1")
    act.release(s)
    assert act.connect("leaf1") is s  # warm: no second open
    assert opened == ["open", "release leaf1"]


def test_one_warm_session_per_switch_and_none_taken_twice(opened: list[str]) -> None:
    act = DriverActuator(Inventory())  # type: ignore[arg-type]
    a, b = act.connect("leaf1"), act.connect("leaf1")  # two at once (a scan beside an action): two opens
    assert a is not b
    act.release(a)
    act.release(b)
    assert opened == ["open", "open", "release leaf1", "release leaf1", "close leaf1"]  # the second is closed
    assert act.connect("leaf1") is a
    act.release(a)
    act.close()
    assert opened[-1] == "close leaf1"
    assert act.connect("leaf1") is not a  # nothing warm after close


def test_a_session_the_driver_cannot_keep_is_closed(opened: list[str]) -> None:
    act = DriverActuator(Inventory())  # type: ignore[arg-type]
    s = act.connect("sonic1")
    act.release(s)
    assert opened == ["open", "release sonic1", "close sonic1"]
    assert act.connect("sonic1") is not s
