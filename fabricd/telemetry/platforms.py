"""Platform profiles as data: which gNMI leaves a platform release serves, and the source of each fact.

A real switch serves what its release serves. Subscribing to a container (`.../ethernet/state/counters`) simply
yields fewer leaves on an older release; subscribing to a path the release does not have at all (the FEC `phys`
subtree on EOS 4.31.2F) may make the switch reject the whole Subscribe call, and fabricd would then have no
telemetry from it. So before subscribing, `plan()` drops the subscriptions whose every leaf the release is known
not to serve, and names the leaves that will be missing and why. What the profile does not know (a release
nobody recorded, a leaf without a version fact) is subscribed and judged by what the switch really streams and
rejects (`TelemetryClient` narrows a rejected Subscribe until only the offending paths are left out).

Facts: `../shared/reference/platforms.md` ("gNMI paths (EOS; version in which EOS added them)") and what issue 15
recorded against EOS 4.31.2F. A release the facts do not cover is UNKNOWN, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from . import sonic
from .paths import PathSyntaxError, Subscription, eos_profile, leaves_under, parse_path

Release = tuple[int, int, int]
_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


_BRANCH = re.compile(r"(?<!\d)(20\d{2})(\d{2})(?!\d)")  # SONiC's release branches: 202411


def parse_release(text: str | None) -> Release | None:
    """`4.31.2F` -> (4, 31, 2); `4.35` -> (4, 35, 0); SONiC's `SONiC.202411.<build>` or `202411` -> (2024, 11, 0);
    None or unparsable -> None (release unknown)."""
    if not text:
        return None
    branch = _BRANCH.search(text)
    if branch is not None and ("sonic" in text.lower() or text.strip().isdigit()):
        return int(branch.group(1)), int(branch.group(2)), 0
    m = _RELEASE.search(text)
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def release_text(r: Release) -> str:
    if r[0] >= 2000:  # a SONiC branch
        return f"{r[0]}{r[1]:02d}"
    return ".".join(str(x) for x in r)


class Served(Enum):
    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Fact:
    """When a release serves a leaf: from `since` on (None: no release is known to), and not in `absent_in` and
    older (None: no release is known not to)."""

    since: Release | None
    absent_in: Release | None
    source: str

    def served(self, release: Release | None) -> Served:
        if release is None:
            return Served.UNKNOWN
        if self.since is not None and release >= self.since:
            return Served.YES
        if self.absent_in is not None and release <= self.absent_in:
            return Served.NO
        if self.since is not None and self.absent_in is None:
            return Served.NO  # older than the release that added it
        return Served.UNKNOWN

    def why_not(self, platform: str, version: str) -> str:
        parsed = parse_release(version)
        rel = f"SONiC {release_text(parsed)}" if platform == "sonic" and parsed else f"{platform.upper()} {version}"
        if self.since is not None:
            return f"not in {rel} (from {release_text(self.since)}; {self.source})"
        return f"not in {rel} ({self.source})"


_PLATFORMS_MD = "reference/platforms.md"
_ISSUE_15 = "absent on 4.31.2F per issue 15; the first release serving it is UNVERIFIED"

# EOS: leaves not listed here are base OpenConfig leaves every supported release (napalm needs >= 4.23) serves.
EOS: dict[str, Fact] = {
    # Per-priority PFC is an Arista augment of 4.24 (platforms.md).
    "pfc.in-frames": Fact((4, 24, 0), None, _PLATFORMS_MD),
    "pfc.out-frames": Fact((4, 24, 0), None, _PLATFORMS_MD),
    # platforms.md: 4.35+; issue 15 reports pfc-on-total-rx-time from 4.36.1F. The earlier bound is kept: on a
    # 4.35 switch without it the leaf is simply missing and reported, nothing is rejected (it is inside the
    # priority's state container).
    "pfc.pfc-on-total-rx-time": Fact((4, 35, 0), None, _PLATFORMS_MD),
    "pfc.pfc-on-max-rx-time": Fact((4, 35, 0), None, _PLATFORMS_MD),
    "pfc.rx-transitions": Fact((4, 35, 0), None, _PLATFORMS_MD),
    "pfc.dropped-pkts": Fact((4, 34, 0), None, _PLATFORMS_MD),
    "eth.in-symbol-error": Fact(None, (4, 31, 2), _ISSUE_15),
    # The Arista FEC model (`ethernet/phys/phy/ingress/fec`): the whole subtree is absent on 4.31.2F.
    "fec.corrected-codewords": Fact(None, (4, 31, 2), _ISSUE_15),
    "fec.uncorrected-codewords": Fact(None, (4, 31, 2), _ISSUE_15),
    "fec.pre-fec-ber": Fact(None, (4, 31, 2), _ISSUE_15),
}

_SONIC_RELEASES = "reference/sonic-releases.md"
# SONiC: sonic-gnmi's virtual paths per release branch. Pre-FEC BER is a field of RATES/Ethernet*, a path from 202411.
SONIC: dict[str, Fact] = {
    "fec.pre-fec-ber": Fact((2024, 11, 0), (2024, 5, 0), _SONIC_RELEASES + ": RATES/Ethernet* from 202411"),
}

PROFILES: dict[str, dict[str, Fact]] = {"eos": EOS, "sonic": SONIC}

_PLANNED = (
    "SONiC's port addresses are not streamed: BGP neighbours are matched to ports by the underlay's plan "
    "(topology/underlay.py)"
)
# Leaves a platform's subscriptions do not deliver at all, whatever the release (they show in the coverage report).
UNREAD: dict[str, dict[str, str]] = {
    "sonic": {
        "if.carrier-transitions": "not in SONiC's COUNTERS_DB port counters",
        # reference/maintenance-lldp-bgp-state.md: bgpmon writes a neighbour's `state` alone
        "bgp.prefixes-received": "STATE_DB's NEIGH_STATE_TABLE holds a neighbour's state only",
        "ipv4.prefix-length": _PLANNED,
        "ipv4.ip": _PLANNED,
    }
}
# Leaves a platform delivers late by design, whatever the release: what reads them is as late.
LATE: dict[str, dict[str, str]] = {
    "sonic": {
        "bgp.session-state": f"from STATE_DB's NEIGH_STATE_TABLE, which bgpmon writes from FRR every "
        f"{sonic.BGPMON_INTERVAL_S:g} s: a session's change shows up to ~{sonic.BGPMON_INTERVAL_S:g} s late "
        "(reference/maintenance-lldp-bgp-state.md)",
    }
}
# Platforms whose gNMI serves no PROTO for what fabricd reads: sonic-gnmi's DB paths are JSON rows.
JSON_IETF_ONLY = frozenset({"sonic"})


def subscription_leaves(sub: Subscription) -> frozenset[str]:
    """The leaves a subscription delivers: OpenConfig paths by the leaf templates, SONiC's DB paths by their table."""
    return path_leaves(sub.path)


def path_leaves(path: str) -> frozenset[str]:
    """The leaves a subscription path delivers (SONiC's DB paths and OpenConfig paths never look alike)."""
    return sonic.LEAVES.get(path) or leaves_under(path)


@dataclass(frozen=True, slots=True)
class Missing:
    """A leaf a device will not (or does not) stream, and why."""

    leaf: str
    reason: str


@dataclass(frozen=True)
class Plan:
    """What to subscribe on one device, what was left out before asking, and the leaves known to be missing."""

    subscriptions: tuple[Subscription, ...]
    skipped: tuple[tuple[str, str], ...] = ()  # (subscription path, reason)
    missing: tuple[Missing, ...] = ()
    expected: frozenset[str] = field(default_factory=frozenset)  # every leaf the subscriptions can deliver
    late: tuple[Missing, ...] = ()  # leaves delivered late by design (LATE), and by how much


def served(platform: str, leaf: str, release: Release | None) -> Served:
    """Does `release` of `platform` serve `leaf`? A leaf without a fact is a base leaf every known release serves."""
    facts = PROFILES.get(platform)
    if facts is None or release is None:
        return Served.UNKNOWN
    fact = facts.get(leaf)
    return Served.YES if fact is None else fact.served(release)


def plan(platform: str, version: str | None, subs: Sequence[Subscription]) -> Plan:
    """Subscriptions for a device of `platform` running `version` (None: unknown, subscribe to everything): a
    subscription whose every leaf the release is known not to serve is left out, since the switch may reject the
    whole Subscribe for it."""
    release = parse_release(version)
    facts = PROFILES.get(platform, {})
    kept: list[Subscription] = []
    skipped: list[tuple[str, str]] = []
    missing: dict[str, str] = {}
    expected: set[str] = set()
    for sub in subs:
        leaves = subscription_leaves(sub)
        absent = {
            leaf: facts[leaf].why_not(platform, version or "")
            for leaf in leaves
            if served(platform, leaf, release) is Served.NO
        }
        missing.update(absent)
        if leaves and len(absent) == len(leaves):
            skipped.append((sub.path, next(iter(absent.values()))))
            continue
        kept.append(sub)
        expected |= leaves - set(absent)
    for leaf, why in UNREAD.get(platform, {}).items():
        missing.setdefault(leaf, why)
    late = tuple(Missing(leaf, why) for leaf, why in sorted(LATE.get(platform, {}).items()) if leaf in expected)
    return Plan(
        tuple(kept),
        tuple(skipped),
        tuple(Missing(leaf, why) for leaf, why in sorted(missing.items())),
        frozenset(expected),
        late,
    )


def plans(
    devices: Iterable[tuple[str, str, str | None]], subs: Mapping[str, Sequence[Subscription]]
) -> dict[str, Plan]:
    """Per device (name, platform, release): its plan, worked out once per (platform, release)."""
    by_release: dict[tuple[str, str | None], Plan] = {}
    out = {}
    for name, platform, version in devices:
        key = (platform, version)
        if key not in by_release:
            by_release[key] = plan(platform, version, subs.get(platform, ()))
        out[name] = by_release[key]
    return out


def missing_leaves(
    expected: Iterable[str], seen: Iterable[str], known: Mapping[str, str], rejected: Mapping[str, str]
) -> list[Missing]:
    """Leaves a device was expected to stream and did not: the reason the profile knows (`known`), the switch's
    rejection of the subscription holding it (`rejected`, leaf -> reason), else that the switch does not send it."""
    leaves = (set(expected) | set(known)) - set(seen)  # a "known" absent leaf that streams after all: not missing
    return [
        Missing(leaf, known.get(leaf) or rejected.get(leaf) or "not streamed by the switch") for leaf in sorted(leaves)
    ]


# gRPC statuses with which a switch refuses what a Subscribe asks for (rather than the call itself: credentials,
# reachability): the gNMI specification's NOT_FOUND and INVALID_ARGUMENT for paths, UNIMPLEMENTED for what it
# does not serve at all.
REJECTS = frozenset({"NOT_FOUND", "INVALID_ARGUMENT", "UNIMPLEMENTED"})


def _named(sub: Subscription, detail: str) -> bool:
    """Does a switch's error text name this subscription's path, with or without its keys?"""
    if sub.path in detail:
        return True
    try:
        bare = "/" + "/".join(name for name, _ in parse_path(sub.path))
    except PathSyntaxError:
        return False
    return bare in detail


def narrow(group: Sequence[Subscription], detail: str) -> tuple[list[tuple[Subscription, ...]], list[Subscription]]:
    """A Subscribe of `group` was rejected with `detail`: the groups to subscribe instead, and the subscriptions
    given up. Paths the error names are given up; if it names none, the group is split in two (each half its own
    Subscribe, so the next rejection narrows it further); a group of one is given up."""
    named = [s for s in group if _named(s, detail)]
    if named:
        rest = tuple(s for s in group if s not in named)
        return ([rest] if rest else []), named
    if len(group) > 1:
        half = len(group) // 2
        return [tuple(group[:half]), tuple(group[half:])], []
    return [], list(group)


def refuses_encoding(code: str, detail: str) -> bool:
    """Does a switch's refusal concern the PROTO encoding rather than a path? (e.g. "unsupported encoding: PROTO")"""
    text = detail.lower()
    return code in REJECTS and "encoding" in text and "proto" in text


def profiles(
    sample_interval_s: float = 10.0, lossless: Sequence[int] = (3,), intervals: Mapping[str, float] | None = None
) -> dict[str, list[Subscription]]:
    """What fabricd subscribes to, per platform: EOS's OpenConfig paths (paths.eos_profile), SONiC's DB paths
    (sonic.sonic_profile)."""
    return {
        "eos": eos_profile(sample_interval_s, lossless, intervals),
        "sonic": sonic.sonic_profile(sample_interval_s, intervals),
    }
