"""derive_intent reuses per-port results between ports with the same inputs: every port must still carry
exactly what the tuning functions give for its own length, speed, class and ECMP group, and its own objects."""

from __future__ import annotations

import gc
import random

from policies.intent import derive_intent
from policies.linkclass import LinkClass
from policies.policy import Override, OverrideMatch, Policy
from policies.tuning import ecn_thresholds, flowlet_inactivity, pfc_headroom
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.model import Cabling, Link
from topology.spec import FabricSpec


def _measured(cabling: Cabling, seed: int = 7) -> Cabling:
    """The same cabling with measured lengths that differ per cable (as an as-built has them)."""
    rng = random.Random(seed)
    links = [Link(ln.a, ln.b, ln.speed_gbps, float(rng.choice([2, 3, 5, 30, 31, 45, 150]))) for ln in cabling.links]
    return Cabling(cabling.devices, links)


def test_memoized_ports_match_the_tuning_functions(small_spec: FabricSpec) -> None:
    policy = Policy(overrides=[Override(match=OverrideMatch(role="spine"), set={"ecn": {"min_us": 20}})])
    fabric = Fabric(_measured(generate_blueprint(small_spec)))
    intent = derive_intent(fabric, small_spec, policy)
    for dev in intent.devices:
        ecn = policy.settings.ecn.model_copy(update={"min_us": 20}) if dev.role == "spine" else policy.settings.ecn
        for p in dev.ports:
            link = fabric.link_of(dev.device, p.port)
            assert link is not None and link.length_m == p.length_m
            assert str(link.other(dev.device, p.port)) == p.peer
            headroom, why = pfc_headroom(p.length_m, p.speed_gbps, policy.settings.pfc)
            assert (p.pfc.headroom_bytes, p.reasons["pfc.headroom_bytes"]) == (headroom, why)
            lo, hi, why = ecn_thresholds(p.speed_gbps, ecn)
            assert (p.ecn.min_bytes, p.ecn.max_bytes, p.reasons["ecn"]) == (lo, hi, why)
            if dev.role == "leaf" and p.link_class is LinkClass.FABRIC:  # a leaf's uplinks: one ECMP group
                uplinks = [q.length_m for q in dev.ports if q.link_class is LinkClass.FABRIC]
                assert (p.dlb.inactivity_us, p.reasons["dlb"]) == flowlet_inactivity(uplinks, policy.settings.dlb)


def test_ports_do_not_share_objects(small_spec: FabricSpec) -> None:
    [dev] = derive_intent(Fabric(generate_blueprint(small_spec)), small_spec, Policy(), {"leaf-g0-r0"}).devices
    first, second = dev.ports[0], dev.ports[1]
    first.ecn.enabled = False
    first.reasons["ecn"] = "changed"
    first.pfc.no_drop.append(4)
    assert second.ecn.enabled is True and second.reasons["ecn"] != "changed" and second.pfc.no_drop == [3]


def test_gc_state_is_restored(small_spec: FabricSpec) -> None:
    fabric = Fabric(generate_blueprint(small_spec))
    derive_intent(fabric, small_spec, Policy())
    assert gc.isenabled()
    gc.disable()
    try:
        derive_intent(fabric, small_spec, Policy())
        assert not gc.isenabled()
    finally:
        gc.enable()
