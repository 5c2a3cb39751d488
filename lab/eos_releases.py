"""What an EOS release serves over gNMI, as the twin plays it (`--eos-version`, default `DEFAULT_EOS_VERSION`).

The twin's own table, kept apart from fabricd's profile (fabricd/telemetry/platforms.py) on purpose: the twin
stands in for the switch, so it follows the published facts, not fabricd's reading of them.

- Per-priority PFC counters: an Arista augment of 4.24; `pfc-on-total-rx-time` from 4.35
  (reference/platforms.md; issue 15 saw it from 4.36.1F).
- The FEC `phys` subtree and `in-symbol-error`: absent on 4.31.2F (issue 15). Which release adds them is
  UNVERIFIED; the twin serves them from 4.32 on.

A subscription to a path none of whose leaves the release serves is rejected (NOT_FOUND, the status the twin gives
any path it does not have); a container that holds some served leaves just yields fewer of them.
"""

from __future__ import annotations

import re
from functools import cache

from . import gnmi_paths as gp
from .model import DEFAULT_EOS_VERSION

__all__ = ["DEFAULT_EOS_VERSION", "VersionError", "release", "served_codes", "since"]
Release = tuple[int, int, int]


class VersionError(ValueError):
    """An EOS version string the twin cannot read."""


def release(version: str) -> Release:
    """`4.31.2F` -> (4, 31, 2)."""
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)[A-Z]*(?:-\S+)?", version.strip())
    if m is None:
        raise VersionError(f"EOS version {version!r} is not like 4.31.2F")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def since(leaf: gp.Leaf) -> Release:
    """The first release serving a twin catalog leaf."""
    text = leaf.text
    if "/phys/" in text or text.endswith("/in-symbol-error"):
        return (4, 32, 0)  # UNVERIFIED (module docstring)
    if text.endswith("/pfc-on-total-rx-time"):
        return (4, 35, 0)
    if "/pfc/priorities/" in text:
        return (4, 24, 0)
    return (0, 0, 0)


@cache
def served_codes(version: str) -> frozenset[int]:
    """Catalog codes a switch running `version` serves."""
    r = release(version)
    return frozenset(leaf.code for leaf in gp.CATALOG if since(leaf) <= r)
