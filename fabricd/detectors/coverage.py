"""Which leaves each detector reads, and so which detectors a switch's missing leaves blind or degrade.

A switch that does not stream a leaf (an older release, a path it rejected) does not stop the detectors: they fall
back (pause time -> PFC frames, FCS errors -> CRC errors -> in-errors) or judge with less evidence (no FEC
counters: corruption is seen from frame errors alone, with no pre-FEC BER trend). This table says which, so
`fabricd status` can name the detector and the switch instead of leaving the engineer to wonder why a fault went
unseen. The leaf names come from the detectors themselves, so the table cannot drift from what they read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fabricd.telemetry.platforms import Missing, Plan, missing_leaves, path_leaves

from . import bgp_session, dci_ports, link_corruption, optics_trend, stuck_queues


@dataclass(frozen=True, slots=True)
class Needs:
    required: tuple[str, ...] = ()  # without any one of these the detector is blind on the switch
    one_of: tuple[str, ...] = ()  # alternatives counting the same thing: blind only without all of them
    improves: tuple[str, ...] = ()  # without these it still runs, on less evidence (degraded)


lc, sq, ot = link_corruption, stuck_queues, optics_trend
_QUEUES = Needs(required=(sq.TX, sq.FRAMES), improves=(sq.PAUSE, sq.WD_STUCK))
NEEDS: dict[str, Needs] = {
    "link_flap": Needs(required=("oper-status",), improves=("if.carrier-transitions",)),
    "link_corruption": Needs(
        required=(lc.PKTS,),
        one_of=lc.FRAME_LEAVES,
        improves=("fec.uncorrected-codewords", lc.FEC_CORRECTED, lc.PRE_FEC_BER, lc.SYMBOLS, lc.RX_POWER),
    ),
    "silent_corruption": Needs(one_of=lc.FRAME_LEAVES, improves=("fec.uncorrected-codewords",)),
    "pfc_storm": _QUEUES,
    "pfc_deadlock": _QUEUES,
    "optics_trend": Needs(required=(ot.RX,), improves=(ot.TEMP, ot.BER, ot.FEC)),
    "dci_ports": Needs(
        required=(dci_ports.OCTETS, dci_ports.PKTS),
        improves=(dci_ports.DISCARDS, dci_ports.QDROPS, dci_ports.ECN, dci_ports.PAUSE_IN),
    ),
    # without the ports' addresses a neighbour is matched to its port by the underlay's plan (bgp_session.py)
    "bgp_session": Needs(
        required=(bgp_session.STATE,), improves=(bgp_session.PREFIXES, bgp_session.ADDRESS, bgp_session.IP)
    ),
}


@dataclass(frozen=True, slots=True)
class Degraded:
    detector: str
    blind: bool  # True: it cannot judge this switch at all; False: it judges on less evidence
    leaves: tuple[str, ...]  # the missing leaves it reads


def degraded(missing: Iterable[str], needs: dict[str, Needs] | None = None) -> list[Degraded]:
    """The detectors a switch's missing leaves affect, in detector order."""
    gone = set(missing)
    out = []
    for name, n in (NEEDS if needs is None else needs).items():
        req = tuple(leaf for leaf in n.required if leaf in gone)
        alts = n.one_of if n.one_of and all(leaf in gone for leaf in n.one_of) else ()
        extra = tuple(leaf for leaf in n.improves if leaf in gone)
        if req or alts:
            out.append(Degraded(name, True, (*req, *alts, *extra)))
        elif extra:
            out.append(Degraded(name, False, extra))
    return out


def read_leaves(needs: Sequence[Needs] | None = None) -> frozenset[str]:
    """Every leaf some detector reads."""
    out: set[str] = set()
    for n in NEEDS.values() if needs is None else needs:
        out |= {*n.required, *n.one_of, *n.improves}
    return frozenset(out)


@dataclass(frozen=True)
class Coverage:
    """One switch's telemetry against its profile: what was left out, refused, and is missing for the detectors."""

    skipped: tuple[tuple[str, str], ...]  # (subscription path, reason) left out before asking
    rejected: tuple[tuple[str, str], ...]  # (subscription path, "STATUS: detail") the switch refused
    missing: tuple[Missing, ...]  # leaves some detector reads that the switch does not stream, and why
    degraded: tuple[Degraded, ...]
    late: tuple[Late, ...] = ()  # detectors that see the switch late, through a leaf it delivers late by design

    @property
    def complete(self) -> bool:
        return not (self.skipped or self.rejected or self.missing or self.late)


@dataclass(frozen=True, slots=True)
class Late:
    detector: str
    leaf: str
    reason: str  # how late, and why


def late(plan: Plan, seen: Iterable[str]) -> tuple[Late, ...]:
    """The detectors reading a leaf the switch streams late by design (platforms.LATE), once it streams it."""
    got = set(seen)
    return tuple(
        Late(name, m.leaf, m.reason)
        for m in plan.late
        if m.leaf in got
        for name, n in NEEDS.items()
        if m.leaf in (*n.required, *n.one_of, *n.improves)
    )


def switch_coverage(plan: Plan, rejected: Sequence[tuple[str, str]], seen: Iterable[str]) -> Coverage:
    """Judge a synced switch (gNMI sends every subscribed leaf once before sync_response, so what has not arrived by
    then is not coming) against its plan and the subscriptions it refused."""
    refused = {leaf: why for path, why in rejected for leaf in path_leaves(path)}
    known = {m.leaf: m.reason for m in plan.missing}
    read = read_leaves()
    seen = frozenset(seen)
    missing = tuple(m for m in missing_leaves(plan.expected, seen, known, refused) if m.leaf in read)
    return Coverage(plan.skipped, tuple(rejected), missing, tuple(degraded(m.leaf for m in missing)), late(plan, seen))


def coverage_json(device: str, os_version: str | None, c: Coverage) -> dict[str, object]:
    """The health document's entry for one switch (docs/formats.md)."""
    return {
        "device": device,
        "os_version": os_version,
        "skipped": [{"path": p, "reason": r} for p, r in c.skipped],
        "rejected": [{"path": p, "reason": r} for p, r in c.rejected],
        "missing": [{"leaf": m.leaf, "reason": m.reason} for m in c.missing],
        "degraded": [{"detector": d.detector, "blind": d.blind, "leaves": list(d.leaves)} for d in c.degraded],
        "late": [{"detector": x.detector, "leaf": x.leaf, "reason": x.reason} for x in c.late],
    }
