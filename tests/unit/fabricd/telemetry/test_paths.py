from __future__ import annotations

import pytest

from fabricd.telemetry.paths import LEAVES, PathInfo, eos_profile, parse, pygnmi_subscribe, render, subscribe_request

CASES = [
    ("/interfaces/interface[name=Ethernet18/1]/state/oper-status", PathInfo("Ethernet18/1", "oper-status", None)),
    (
        "/interfaces/interface[name=Ethernet1/1]/state/counters/in-fcs-errors",
        PathInfo("Ethernet1/1", "if.in-fcs-errors", None),
    ),
    (
        "/interfaces/interface[name=Ethernet18/1]/ethernet/pfc/priorities/priority[index=3]/state/in-frames",
        PathInfo("Ethernet18/1", "pfc.in-frames", "3"),
    ),
    (
        "/qos/interfaces/interface[interface-id=Ethernet18/1]/output/queues/queue[name=3]/state/transmit-pkts",
        PathInfo("Ethernet18/1", "queue.transmit-pkts", "3"),
    ),
    (
        "/interfaces/interface[name=Ethernet2/1]/ethernet/pfc/watchdog/tx-queues/tx-queue[queue-type=UNICAST][index=3]"
        "/state/stuck-count",
        PathInfo("Ethernet2/1", "wd.stuck-count", "3"),
    ),
    (
        "/components/component[name=Ethernet3/1 transceiver]/transceiver/physical-channels/channel[index=0]"
        "/state/input-power/instant",
        PathInfo("Ethernet3/1", "optics.input-power", "0"),
    ),
    (
        "/lldp/interfaces/interface[name=Ethernet1/1]/neighbors/neighbor[id=1]/state/system-name",
        PathInfo("Ethernet1/1", "lldp.system-name", "1"),
    ),
    (
        "/openconfig-interfaces:interfaces/interface[name=Et1]/state/counters/in-pkts",
        PathInfo("Et1", "if.in-pkts", None),
    ),
    ("/interfaces/interface[name=Ethernet1/1]/state/counters/no-such-leaf", None),
    ("/interfaces/interface[name=*]/state/oper-status", None),
    (
        "/interfaces/interface[name=Ethernet1/1]/ethernet/pfc/watchdog/tx-queues/tx-queue[index=3][queue-type=MULTICAST]/state/stuck-count",
        None,
    ),
    ("/system/state/hostname", None),
    ("/interfaces/interface[name=Et1/state", None),
]


@pytest.mark.parametrize(("text", "want"), CASES)
def test_parse(text: str, want: PathInfo | None) -> None:
    assert parse(text) == want


def test_render_is_the_inverse_of_parse() -> None:
    for leaf in LEAVES:
        index = "3" if leaf.index_key else None
        text = render("Ethernet18/1", leaf.name, index)
        assert parse(text) == PathInfo("Ethernet18/1", leaf.name, index), text


def test_design_example_is_canonical() -> None:
    text = "/interfaces/interface[name=Ethernet18/1]/ethernet/pfc/priorities/priority[index=3]/state/in-frames"
    assert render("Ethernet18/1", "pfc.in-frames", "3") == text


def test_profile_pfc_only_for_lossless_priorities() -> None:
    subs = eos_profile(sample_interval_s=5, lossless=(3, 4))
    pfc = [s.path for s in subs if "/pfc/priorities/" in s.path]
    assert pfc == [
        "/interfaces/interface[name=*]/ethernet/pfc/priorities/priority[index=3]/state",
        "/interfaces/interface[name=*]/ethernet/pfc/priorities/priority[index=4]/state",
    ]
    oper = next(s for s in subs if s.path.endswith("oper-status"))
    assert oper.mode == "on_change"
    assert all(s.sample_interval_ns == 5 * 10**9 for s in subs if s.mode == "sample")
    req = subscribe_request(subs, target="leaf-g0-r0")
    assert len(req.subscribe.subscription) == len(subs)
    assert req.subscribe.prefix.target == "leaf-g0-r0"
    assert pygnmi_subscribe(subs)["subscription"][0]["mode"] == "on_change"


def test_profile_groups_sampled_apart() -> None:
    subs = eos_profile(sample_interval_s=1, intervals={"optics": 30, "fec": 10})
    by_path = {s.path: s.sample_interval_ns // 10**9 for s in subs if s.mode == "sample"}
    assert by_path["/interfaces/interface[name=*]/ethernet/phys/phy[index=*]/ingress/fec/state"] == 10
    optics = next(p for p in by_path if p.endswith("input-power"))
    assert by_path[optics] == 30
    assert by_path["/interfaces/interface[name=*]/state/counters"] == 1
    # PFC and the egress queues move together: the watchdog rule compares them over one interval.
    assert by_path["/qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state"] == 1
    assert by_path["/interfaces/interface[name=*]/ethernet/pfc/priorities/priority[index=3]/state"] == 1
    slow_pfc = eos_profile(sample_interval_s=1, intervals={"pfc": 2})
    sampled = [s for s in slow_pfc if ("pfc" in s.path or "queues" in s.path) and "watchdog" not in s.path]
    assert {s.sample_interval_ns for s in sampled} == {2 * 10**9}
    # The watchdog's counts move only when it declares: ON_CHANGE brings the declaration when it happens.
    (wd,) = [s for s in slow_pfc if "watchdog" in s.path]
    assert (wd.mode, wd.sample_interval_ns) == ("on_change", 0)


def test_profile_refuses_an_unknown_group() -> None:
    with pytest.raises(ValueError, match=r"unknown sample group\(s\) \['optic'\]; known: counters, pfc, fec, optics"):
        eos_profile(intervals={"optic": 30})


def test_a_routed_ports_address_is_one_series_per_port_not_one_per_address() -> None:
    """The address is a key of the path, but a FREE one: every address of the fabric as an index would make a series
    code per address (a 16k-GPU fabric has ~65k of them: the store's code x port table would not fit in memory)."""
    root = "/interfaces/interface[name=Ethernet1/1]/subinterfaces/subinterface[index=0]/ipv4/addresses"
    a = parse(f"{root}/address[ip=10.0.0.1]/state/ip")
    b = parse(f"{root}/address[ip=10.9.8.7]/state/prefix-length")
    assert a == PathInfo("Ethernet1/1", "ipv4.ip", None) and b == PathInfo("Ethernet1/1", "ipv4.prefix-length", None)
    assert parse(render("Ethernet1/1", "ipv4.ip")) == a  # a trace keeps the value (the address), the key is "_"
