"""EOS rendering through pyavd, checked against golden configs (FABRICD_REGEN_GOLDEN=1 rewrites them)."""

from __future__ import annotations

import os

import pytest

from drivers.eos.render import render, structured_config
from policies.intent import derive_intent
from policies.policy import Policy
from tests.conftest import DATA, EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import FabricSpec, load_spec

GOLDEN = DATA / "golden"


def _spec(example: str, shallow_dr: bool) -> FabricSpec:
    spec = load_spec(EXAMPLES / example)
    if shallow_dr:
        spec = spec.model_copy(update={"dci": [spec.dci[0].model_copy(update={"dr_buffer_mb": 64})]})
    return spec


@pytest.mark.parametrize(
    ("example", "device", "shallow_dr", "golden"),
    [
        ("small-pod.yaml", "leaf-g0-r0", False, "small-pod_leaf-g0-r0.cfg"),
        ("small-pod.yaml", "spine-r1-0", False, "small-pod_spine-r1-0.cfg"),
        ("dci-120km.yaml", "dr-campus-b-0", False, "dci-120km_dr-campus-b-0.cfg"),
        ("dci-120km.yaml", "dr-campus-b-0", True, "dci-120km-shallow_dr-campus-b-0.cfg"),
    ],
)
def test_render_matches_golden(example: str, device: str, shallow_dr: bool, golden: str) -> None:
    spec = _spec(example, shallow_dr)
    [dev] = derive_intent(Fabric(generate_blueprint(spec)), spec, Policy(), {device}).devices
    text = render(dev)
    path = GOLDEN / golden
    if os.environ.get("FABRICD_REGEN_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def test_lossy_dci_ports_render_pfc_off_but_keep_ecn() -> None:
    spec = _spec("dci-120km.yaml", shallow_dr=True)
    [dev] = derive_intent(Fabric(generate_blueprint(spec)), spec, Policy(), {"dr-campus-b-0"}).devices
    config = structured_config(dev)
    by_name = {i["name"]: i for i in config["ethernet_interfaces"]}
    long_haul = by_name["Ethernet9/1"]
    assert long_haul["priority_flow_control"] == {"enabled": False}
    assert long_haul["tx_queues"][0]["random_detect"]["ecn"]["threshold"]["max"] == 60606  # 1 x BDP in KB
    assert by_name["Ethernet1/1"]["priority_flow_control"]["enabled"] is True


def test_link_debounce_is_a_raw_eos_cli_line() -> None:
    spec = load_spec(EXAMPLES / "small-pod.yaml")
    [dev] = derive_intent(Fabric(generate_blueprint(spec)), spec, Policy(link_debounce_ms=100), {"leaf-g0-r0"}).devices
    assert "   link-debounce time 100\n" in render(dev)
