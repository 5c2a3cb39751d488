"""Drivers by platform name: a fixed, read-only table built at import (no mutable class-level registry)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from drivers.base import Driver
from drivers.eos.driver import EosDriver
from drivers.sonic.driver import SonicDriver
from topology.errors import FabricdError

DRIVERS: Mapping[str, Callable[[], Driver]] = MappingProxyType({"eos": EosDriver, "sonic": SonicDriver})


def get_driver(platform: str | None) -> Driver:
    name = platform or "eos"
    factory = DRIVERS.get(name)
    if factory is None:
        raise FabricdError(f"no driver for platform '{name}'; fabricd has: {', '.join(sorted(DRIVERS))}")
    return factory()
