"""The SONiC releases the twin can run, and which sonic-gnmi virtual paths each serves (reference/sonic-releases.md,
read from sonic-gnmi's `sonic_data_client/virtual_db.go` per release branch)."""

from __future__ import annotations

import re

RELEASES = ("202305", "202311", "202405", "202411", "202505", "202511")
DEFAULT_RELEASE = "202411"
_BRANCH = re.compile(r"(20\d{4})")


class SonicReleaseError(ValueError):
    """A SONiC release the twin does not know."""


def release_of(version: str) -> str:
    """`SONiC.202405.fabricd-twin` or `202405` -> `202405`; SonicReleaseError for anything else."""
    m = _BRANCH.search(version)
    if m is None or m.group(1) not in RELEASES:
        raise SonicReleaseError(f"unknown SONiC release {version!r}; the twin runs {', '.join(RELEASES)}")
    return m.group(1)


def version_text(release: str) -> str:
    """What `show version` prints after "SONiC Software Version:"."""
    return f"SONiC.{release_of(release)}.fabricd-twin"


def serves_pfcwd(release: str) -> bool:
    """`COUNTERS/Ethernet*/Pfcwd` lists the watchdog's queues from 202411; before, it reads the CONFIG_DB table
    `PFC_WD_TABLE`, which does not exist (the table is `PFC_WD`), and yields no row."""
    return release_of(release) >= "202411"


def serves_rates(release: str) -> bool:
    """`RATES/Ethernet*` (with FEC_PRE_BER) is a virtual path from 202411; before, it is not translated."""
    return release_of(release) >= "202411"
