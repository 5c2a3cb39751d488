"""Which fault a finding belongs to, which port fabricd would act on, and what a group of faults has in common."""

from __future__ import annotations

import re
from collections.abc import Container

from fabricd.detectors.finding import Finding
from topology.fabric import Fabric
from topology.model import Endpoint

LINK_KINDS = ("link_flap", "link_corruption")
# EthernetM/P/L is module M of a chassis; EthernetP/L on a fixed switch has no line card to blame.
_CARD = re.compile(r"^[A-Za-z-]+(\d+)/\d+/\d+$")


def fault_key(f: Finding, fabric: Fabric) -> str:
    """One key per fault, stable across ticks and across both ends of a link (one ticket per fault)."""
    if f.kind in LINK_KINDS and f.port is not None:
        link = fabric.link_of(f.device, f.port)
        if link is not None:
            a, b = sorted((str(link.a), str(link.b)))
            return f"{f.kind}:{a}--{b}"
    if f.kind == "bgp_session" and f.port is not None:  # one ticket per session, whichever end and reason
        return f"{f.kind}:{'--'.join(sorted(f.ports))}"
    if f.kind == "miscabled":  # one ticket per set of wrong cables (a swapped pair is one)
        return f"{f.kind}:{','.join(sorted(f.ports))}"
    if f.kind == "pfc_deadlock":
        return f"{f.kind}:{','.join(sorted(f.ports))}:{f.priority}"
    return f"{f.kind}:{f.device}:{f.port or ''}:{'' if f.priority is None else f.priority}"


def target_port(f: Finding, fabric: Fabric, managed: Container[str]) -> Endpoint | None:
    """The end of the faulty link fabricd shuts: the switch end facing a server or another campus, else the
    finding's end if fabricd can reach that switch, else the other end. None when neither end is ours."""
    if f.port is None:
        return None
    here = Endpoint(f.device, f.port)
    link = fabric.link_of(f.device, f.port)
    if link is None:
        return here if f.device in managed else None
    there = link.other(f.device, f.port)
    ends = [here, there]
    ours = [ep for ep in ends if ep.device in managed and (d := fabric.get(ep.device)) and d.is_switch]
    if not ours:
        return None
    return ours[0]


def common_cause(device: str, ports: list[str]) -> str:
    """Name what many faulty ports on one switch most likely share: one line card, or the switch itself."""
    cards = {m.group(1) for p in ports if (m := _CARD.match(p))}
    if len(cards) == 1 and len(ports) > 1:
        card = cards.pop()
        return (
            f"line card {card} of {device} (all {len(ports)} ports are on module {card}): check the card and its power"
        )
    return f"{device} itself ({len(ports)} faulty ports at once): check its power, ASIC, software and recent changes"
