"""Property tests: swaps are reported as swaps, removed leaf-spine links as missing with both ends."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.topology.cabling_edits import drop, swap_far_ends
from topology.blueprint import generate_blueprint
from topology.model import Role
from topology.rules.violation import Code
from topology.spec import FabricSpec
from topology.validate import validate

SPEC = FabricSpec.model_validate(
    {
        "name": "prop",
        "rails": 4,
        "aggregation_groups": 3,
        "servers_per_group": 3,
        "spines_per_rail": 2,
        "superspines": 2,
    }
)
BP = generate_blueprint(SPEC)
RAIL = {d.name: d.rail for d in BP.devices if d.role is Role.LEAF}
SERVER_LINKS = [ln for ln in BP.links if ln.a.port.startswith("nic")]
LEAF_SPINE = [
    i for i, ln in enumerate(BP.links) if ln.a.device.startswith("leaf-") and ln.b.device.startswith("spine-")
]


@st.composite
def cross_rail_pair(draw: st.DrawFn) -> tuple[str, str]:
    first = draw(st.sampled_from(SERVER_LINKS))
    others = [ln for ln in SERVER_LINKS if RAIL[ln.b.device] != RAIL[first.b.device]]
    second = draw(st.sampled_from(others))
    return str(first.a), str(second.a)


@settings(max_examples=60, deadline=None)
@given(cross_rail_pair())
def test_any_cross_rail_swap_is_reported_as_that_swap(pair: tuple[str, str]) -> None:
    nic1, nic2 = pair
    leaf_port = {str(ln.a): str(ln.b) for ln in SERVER_LINKS}
    result = validate(SPEC, swap_far_ends(BP, nic1, nic2))
    assert len(result.violations) == 1, [v.message for v in result.violations]
    [v] = result.violations
    assert v.code is Code.RAIL_MISMATCH
    a, b = leaf_port[nic1], leaf_port[nic2]
    assert v.fix in (f"swap the cables on {a} and {b}", f"swap the cables on {b} and {a}")
    assert {nic1, nic2} <= set(v.ports)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(LEAF_SPINE))
def test_any_removed_leaf_spine_link_is_missing_with_both_ends(index: int) -> None:
    gone = BP.links[index]
    result = validate(SPEC, drop(BP, index))
    missing = [v for v in result.violations if v.code is Code.MISSING_LINK]
    assert len(missing) == 1
    assert missing[0].ports == [str(gone.a), str(gone.b)]
    assert set(missing[0].devices) == {gone.a.device, gone.b.device}
