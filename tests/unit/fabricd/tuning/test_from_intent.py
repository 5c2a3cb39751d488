"""The intent as tuning input, and a proposal back as intent, on the 120 km example: every port gets its class, the
static intent starts inside its bounds (no correction), and a patched intent carries the tuned values."""

from __future__ import annotations

import math
from collections import Counter

from fabricd.tuning.bounds import flowlet_bounds, port_bounds
from fabricd.tuning.from_intent import group_window, patch_intent, port_window
from fabricd.tuning.inputs import DrCnp, PortClass
from fabricd.tuning.propose import Change, Knob, propose_group, propose_port
from policies.intent import PortIntent, derive_intent
from policies.policy import Policy
from tests.conftest import EXAMPLES
from topology.load import load_fabric
from topology.model import Role

SPEC, FABRIC = load_fabric(EXAMPLES / "dci-120km.yaml", None)
POLICY = Policy()
INTENT = derive_intent(FABRIC, SPEC, POLICY)


def _peer_role(peer: str) -> Role:
    dev = FABRIC.get(peer.split(":")[0])
    assert dev is not None
    return dev.role


def _roomy_xoff(p: PortIntent) -> int:
    """An XOFF trigger one (long-haul) feedback delay above Kmax (the twin's buffer model gives the real one)."""
    return p.ecn.max_bytes + math.ceil(p.speed_gbps * 1e9 / 8 * (85e-6 + 2 * p.length_m / 1.98e8)) + 1


def test_every_port_gets_its_class_and_the_static_intent_is_inside_its_bounds() -> None:
    classes: Counter[tuple[str, PortClass]] = Counter()
    for dev in INTENT.devices:
        for p in dev.ports:
            w = port_window(dev, p, _peer_role(p.peer), (), _roomy_xoff(p), POLICY)
            classes[(dev.role.value, w.port_class)] += 1
            b = port_bounds(w, POLICY)
            assert b.infeasible == "", (w.subject, b.infeasible)
            assert propose_port(w, [], POLICY).proposal is None, w.subject  # no correction of the static intent
            if w.port_class is PortClass.DCI:
                assert w.settings.dr_cnp == DrCnp(True, True, p.ecn.min_bytes, p.ecn.max_bytes)  # EOS DRs send CNPs
    assert set(classes) == {
        ("leaf", PortClass.SERVER),
        ("leaf", PortClass.LEAF_SPINE),
        ("spine", PortClass.LEAF_SPINE),
        ("spine", PortClass.SPINE_SUPERSPINE),
        ("superspine", PortClass.SPINE_SUPERSPINE),
        ("dr", PortClass.SPINE_SUPERSPINE),
        ("dr", PortClass.DCI),
    }


def test_a_leaf_uplink_group_from_the_intent_keeps_its_flowlet_gap() -> None:
    leaf = next(d for d in INTENT.devices if d.device == "leaf-g0-r0")
    ups = [p for p in leaf.ports if p.dlb.mode == "flowlet"]
    assert len(ups) >= 2
    g = group_window(leaf, "uplinks", ups, _peer_role(ups[0].peer), ())
    assert g.port_class is PortClass.LEAF_SPINE and g.flowlet_us == ups[0].dlb.inactivity_us and g.mode == "flowlet"
    assert flowlet_bounds(g, POLICY).holds(g.flowlet_us)
    assert propose_group(g, [], POLICY).proposal is None


def test_patch_intent() -> None:
    dr = next(d for d in INTENT.devices if d.role.value == "dr")
    p = next(p for p in dr.ports if p.link_class == "dci")
    changes = (
        Change(Knob.KMIN, p.ecn.min_bytes, 1000, 1, 10**9),
        Change(Knob.PMAX, p.ecn.max_probability, 10, 1, 100),
        Change(Knob.DR_CNP, 1, 0, 0, 1),
        Change(Knob.DR_CNP_MAX, 5, 4, 1, 10),
    )
    out = patch_intent(p, changes)
    assert (out.port.ecn.min_bytes, out.port.ecn.max_probability, out.port.cnp.source) == (1000, 10, "endpoint")
    assert out.port.ecn.max_bytes == p.ecn.max_bytes and out.port.dlb == p.dlb
    assert out.not_in_intent == (changes[3],)
    assert out.port.reasons["ecn.min_bytes"] == f"tuned {p.ecn.min_bytes} -> 1000"
    assert "cnp.dr_max_bytes" not in out.port.reasons
    assert p.ecn.min_bytes != 1000  # the original is untouched
