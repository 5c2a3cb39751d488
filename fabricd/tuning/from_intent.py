"""The intent (policies.intent) as tuning inputs, and a proposal back as intent: what an adapter and the service loop
call so a tuned setting goes through the same render -> diff -> apply as every other (docs/formats.md "Intent").

The intent holds the settings fabricd derived and pushes; what it cannot know comes from the caller: the XOFF trigger
(from the running buffer profile), the peer's role, and the counter samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from policies.intent import DeviceIntent, PortIntent
from policies.policy import Policy
from topology.model import Role

from .inputs import DrCnp, GroupSample, GroupWindow, Physics, PortSettings, PortWindow, Sample, port_class
from .propose import Change, Knob


def port_window(
    dev: DeviceIntent,
    port: PortIntent,
    peer_role: Role,
    samples: Sequence[Sample],
    xoff_trigger_bytes: int,
    policy: Policy,
    buffer_bytes: int | None = None,
) -> PortWindow:
    """One port of the intent as the rules' input. A DR that sends CNPs itself (cnp.source "dr") starts its CNP
    thresholds at the port's ECN thresholds: the intent derives one set for both (policies.intent, long haul)."""
    dr = None
    if dev.role is Role.DR and port.link_class == "dci":
        capable = policy.caps(dev.platform).dr_generated_cnp
        dr = DrCnp(capable, port.cnp.source == "dr", port.ecn.min_bytes, port.ecn.max_bytes)
    settings = PortSettings(
        port.ecn.min_bytes,
        port.ecn.max_bytes,
        port.ecn.max_probability,
        port.pfc.enabled,
        xoff_trigger_bytes,
        port.pfc.headroom_bytes,
        dr,
    )
    return PortWindow(
        dev.device,
        port.port,
        port_class(port.link_class, dev.role, peer_role),
        tuple(samples),
        settings,
        Physics(port.speed_gbps, port.length_m, buffer_bytes),
    )


def group_window(
    dev: DeviceIntent, name: str, members: Sequence[PortIntent], peer_role: Role, samples: Sequence[GroupSample]
) -> GroupWindow:
    """An ECMP group of the intent (its members' ports): flowlet mode and gap as the intent set them on the members,
    the paths as their cable lengths (what policies.intent's flowlet timer used)."""
    first = members[0]
    return GroupWindow(
        dev.device,
        name,
        port_class(first.link_class, dev.role, peer_role),
        tuple(m.port for m in members),
        tuple(samples),
        first.dlb.mode,
        first.dlb.inactivity_us,
        tuple(m.length_m for m in members),
        first.speed_gbps,
    )


@dataclass(frozen=True)
class Patched:
    port: PortIntent
    not_in_intent: tuple[Change, ...]  # changes the intent has no field for (a DR's own CNP thresholds)


def patch_intent(port: PortIntent, changes: Sequence[Change]) -> Patched:
    """The port's intent with a proposal's changes, for the drivers to render and `plan` to diff."""
    ecn, dlb, cnp = port.ecn, port.dlb, port.cnp
    rest = []
    for c in changes:
        if c.knob is Knob.KMIN:
            ecn = ecn.model_copy(update={"min_bytes": c.after})
        elif c.knob is Knob.KMAX:
            ecn = ecn.model_copy(update={"max_bytes": c.after})
        elif c.knob is Knob.PMAX:
            ecn = ecn.model_copy(update={"max_probability": c.after})
        elif c.knob is Knob.FLOWLET:
            dlb = dlb.model_copy(update={"inactivity_us": c.after})
        elif c.knob is Knob.DR_CNP:
            cnp = cnp.model_copy(update={"source": "dr" if c.after else "endpoint"})
        else:
            rest.append(c)
    reasons = {**port.reasons, **{str(c.knob): f"tuned {c.before} -> {c.after}" for c in changes if c not in rest}}
    return Patched(port.model_copy(update={"ecn": ecn, "dlb": dlb, "cnp": cnp, "reasons": reasons}), tuple(rest))
