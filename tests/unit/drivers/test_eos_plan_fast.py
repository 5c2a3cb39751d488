"""The fast EOS paths give what the straightforward ones give: the line scanner vs a full hier-config parse,
the memoized plan vs a fresh remediation, and rendering once per signature vs pyavd per device."""

from __future__ import annotations

import difflib
import json
import random

import pytest
from hier_config import Platform, WorkflowRemediation, get_hconfig
from hier_config.exceptions import DuplicateChildError

from drivers.base import DevicePlan
from drivers.eos.plan import owned_config, owned_config_hier, plan_device
from drivers.eos.render import _render_config, render, render_template, signature, structured_config
from policies.intent import derive_intent
from policies.policy import Policy
from tests.conftest import DATA, EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import load_spec

GOLDEN = sorted((DATA / "golden").glob("*.cfg"))
PORTS = {line.split()[1] for p in GOLDEN for line in p.read_text().splitlines() if line.startswith("interface ")}

TRICKY = [
    "",
    "end\n",
    "hostname x\n",
    "hostname a\nhostname a\n",
    "interface Ethernet1/1\n   qos trust dscp\n   qos trust dscp\n",
    "interface Ethernet1/1\n   tx-queue 3\n      random-detect ecn minimum-threshold 1 kbytes\n"
    "      exit\n   exit\n!\nend\n",
    "interface Ethernet1/1\n   tx-queue 3\n      random-detect ecn\n         deeper\n      exit\n"
    "   tx-queue 4\n      x\n!\n",
    "interface Ethernet1/1\n\tqos   trust   dscp  \n  priority-flow-control on\n"
    "    priority-flow-control priority 3 no-drop\n",
    "   indented first\ninterface Ethernet1/1\n   qos trust dscp\n",
    "interface Ethernet1/1\n      deep\n   shallow\n  shallower\n qos trust dscp\n",
    "banner motd\nhello\nEOF\ninterface Ethernet1/1\n   qos trust dscp\n",
    "banner motd ##\ninterface Ethernet1/1\n   qos trust dscp\n",
    "Building configuration...\nversion 4.30\n! Last configuration change\nqos map dscp 26 to traffic-class 3\n"
    "#comment\n  ! indented bang\nend\n",
    "interface Ethernet1/1\n no ip address dhcp\n exit-peer-policy\n qos trust dscp\n logging event link-status\n",
    "interface Ethernet1/1\n   no priority-flow-control\n   link-debounce time 100\n   description x\n!\n"
    "interface Ethernet99/1\n   qos trust dscp\n",
    "router bgp 1\n   address-family ipv4\n      neighbor x activate\n      exit-address-family\n   exit\n!\nexit\n"
    "qos map dscp 26 to traffic-class 3\nqos map dscp 26 to traffic-class 3\n",
    "router bgp 1\n   neighbor a\n   neighbor a\n",
    "interface Ethernet1/1\r\n   qos trust dscp\r\n!\r\n",
    "priority-flow-control pause watchdog default timeout 0.2\n   child\n"
    "interface Ethernet1/1\n   tx-queue 3\n   tx-queue 3\n",
    "interface Ethernet1/1\n   qos trust dscp\ninterface Ethernet1/1\n",
    "interface Ethernet1/1\n   tx-queue 3\n      exit\n",
    "interface\n   qos trust dscp\ninterface  Ethernet1/1\n   qos trust dscp\n",
]


def _variants() -> list[str]:
    """Goldens, goldens with out-of-scope sections, and goldens with random drift (seeded)."""
    rng = random.Random(1)
    extra = [
        "!",
        "   !",
        "end",
        "   exit",
        "exit",
        "   description foo",
        "   no priority-flow-control",
        "   tx-queue 6",
    ]
    out = list(TRICKY)
    for path in GOLDEN:
        text = path.read_text()
        out += [text, "hostname x\n!\nrouter bgp 1\n   neighbor 1.1.1.1 remote-as 2\n!\n" + text]
        lines = text.splitlines()
        for _ in range(12):
            ls = list(lines)
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(ls))
                op = rng.randrange(5)
                if op == 0:
                    del ls[i]
                elif op == 1:
                    ls[i] = ls[i].replace("600", "700")
                elif op == 2:
                    ls.insert(i, rng.choice(extra))
                elif op == 3:
                    ls[i] = " " + ls[i]
                else:
                    ls[i] = ls[i].lstrip()
            out.append("\n".join(ls) + "\n")
    return out


VARIANTS = _variants()


def _outcome(f: object, *args: object) -> tuple[str, object]:
    assert callable(f)
    try:
        return "ok", f(*args)
    except DuplicateChildError as exc:
        return "duplicate", str(exc)
    except ValueError as exc:
        return "error", str(exc)


def _plan_reference(device: str, running: str, intended: str, ports: set[str]) -> DevicePlan:
    """The pre-scanner plan: full hier-config parses, a fresh remediation every time."""
    have, want = owned_config_hier(running, ports), owned_config_hier(intended, ports)
    diff = "".join(
        difflib.unified_diff(
            have.splitlines(keepends=True), want.splitlines(keepends=True), f"{device} running", f"{device} intended"
        )
    )
    rem = WorkflowRemediation(get_hconfig(Platform.ARISTA_EOS, have), get_hconfig(Platform.ARISTA_EOS, want))
    return DevicePlan(
        device, diff, [" " * 3 * (c.depth() - 1) + c.text for c in rem.remediation_config.all_children_sorted()]
    )


@pytest.mark.parametrize("ports", [PORTS, {"Ethernet1/1"}, set()], ids=["golden-ports", "one-port", "no-ports"])
def test_scanner_matches_hier_config(ports: set[str]) -> None:
    for text in VARIANTS:
        assert _outcome(owned_config, text, ports) == _outcome(owned_config_hier, text, ports), repr(text[:200])


def test_duplicate_error_names_the_section_like_hier_config() -> None:
    with pytest.raises(DuplicateChildError, match=r"Found a duplicate section: \('router bgp 1', 'neighbor a'\)"):
        owned_config("router bgp 1\n   neighbor a\n   neighbor a\n", set())


def test_plan_matches_a_fresh_remediation() -> None:
    intended = [p.read_text() for p in GOLDEN] + ["hostname x\n"]
    for running in VARIANTS[::3]:
        for want in intended:
            new = _outcome(plan_device, "sw1", running, want, PORTS)
            assert new == _outcome(_plan_reference, "sw1", running, want, PORTS), repr(running[:200])


@pytest.mark.parametrize("example", ["small-pod.yaml", "dci-120km.yaml"])
def test_render_per_signature_is_byte_identical(example: str) -> None:
    spec = load_spec(EXAMPLES / example)
    fabric = Fabric(generate_blueprint(spec))
    seen: set[str] = set()
    for policy in (Policy(), Policy(link_debounce_ms=100)):
        for dev in derive_intent(fabric, spec, policy).devices:
            config = structured_config(dev)
            del config["hostname"]
            sig = signature(dev)
            assert sig == json.dumps(config, separators=(",", ":"))
            # pyavd per device is slow: compare every signature once, plus every leaf of small-pod
            if sig not in seen or (example == "small-pod.yaml" and dev.role == "leaf" and policy.link_debounce_ms):
                seen.add(sig)
                assert render(dev) == _render_config(structured_config(dev)), dev.device
    assert render_template.cache_info().hits > 0


def test_a_hostname_that_cannot_be_templated_renders_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_spec(EXAMPLES / "small-pod.yaml")
    [dev] = derive_intent(Fabric(generate_blueprint(spec)), spec, Policy(), {"leaf-g0-r0"}).devices
    monkeypatch.setattr("drivers.eos.render._PLACEHOLDER", "traffic-class")  # appears more than once
    render_template.cache_clear()
    try:
        assert render_template(signature(dev)) is None
        assert render(dev) == _render_config(structured_config(dev))
    finally:
        render_template.cache_clear()
