"""The twin's state model: counters, oper state, pause propagation and faults, driven by explicit time."""

from __future__ import annotations

from typing import Any

import pytest

from lab.counters import COL
from lab.faults import FaultError, FaultInjector
from lab.model import LLDP_LEARN_NS, RATES_LAG_NS, PortConfig, Twin
from lab.probes import ProbeGenerator
from topology.fabric import Fabric
from topology.model import Cabling, Endpoint
from topology.units import NS

T0 = 1_700_000_000 * NS
LOSSLESS = PortConfig(pfc_enabled=True, no_drop=frozenset({3}))


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def twin(small_blueprint: Cabling) -> Twin:
    return Twin(Fabric(small_blueprint), clock=Clock())


def lossless(twin: Twin, config: PortConfig = LOSSLESS) -> None:
    for name, sw in twin.switches.items():
        for port in sw.ports:
            twin.set_port_config(name, port, config)


def rate(twin: Twin, device: str, port: str, column: str) -> float:
    sw = twin.switch(device)
    return float(sw.rate[sw.index[port], COL[column]])


def test_only_local_switches_with_their_cabled_ports(twin: Twin) -> None:
    assert len(twin.switches) == 8 + 8 + 2  # leaves, spines (2 per rail), superspines of small-pod
    leaf = twin.switch("leaf-g0-r0")
    assert leaf.ports[:2] == ["Ethernet1/1", "Ethernet2/1"]
    assert twin.peer("leaf-g0-r0", "Ethernet1/1") is not None


def test_counters_grow_at_plausible_rates_and_never_go_back(twin: Twin) -> None:
    leaf = twin.switch("leaf-g0-r0")
    a = leaf.value("Ethernet1/1", "if.in-octets", T0 + NS)
    b = leaf.value("Ethernet1/1", "if.in-octets", T0 + 2 * NS)
    gbps = (b - a) * 8 / 1e9
    assert 0.25 * 400 <= gbps <= 0.65 * 400
    twin.set_port_config("leaf-g0-r0", "Ethernet1/1", LOSSLESS)
    twin.advance(T0 + 3 * NS)
    assert leaf.value("Ethernet1/1", "if.in-octets", T0 + 3 * NS) >= b


def test_shutdown_takes_both_ends_down_and_counts_carrier_transitions(twin: Twin) -> None:
    events: list[tuple[str, str, bool, int]] = []
    twin.listeners.append(lambda d, p, up, ts: events.append((d, p, up, ts)))
    peer = twin.peer("leaf-g0-r0", "Ethernet5/1")
    assert peer is not None
    twin.set_port_config("leaf-g0-r0", "Ethernet5/1", PortConfig(admin_up=False))
    twin.advance(T0 + NS)
    assert sorted((d, p, up) for d, p, up, _ in events) == sorted(
        [("leaf-g0-r0", "Ethernet5/1", False), (peer.device, peer.port, False)]
    )
    assert all(ts == T0 + NS for *_, ts in events)
    sw = twin.switch(peer.device)
    assert sw.value(peer.port, "if.carrier-transitions", T0 + NS) == 1
    # The rates follow RATES_LAG_NS later (polled counters trail the wire); from then the port counts nothing.
    at_down = sw.value(peer.port, "if.in-pkts", T0 + NS)
    settled = T0 + NS + RATES_LAG_NS
    twin.advance(settled)
    frozen = sw.value(peer.port, "if.in-pkts", settled)
    assert frozen > at_down
    twin.advance(T0 + 5 * NS)
    assert sw.value(peer.port, "if.in-pkts", T0 + 5 * NS) == frozen


def test_a_burst_of_ports_going_down_costs_one_traffic_solve(twin: Twin, monkeypatch: pytest.MonkeyPatch) -> None:
    solves: list[int] = []
    real = twin._apply_traffic

    def counted(*a: Any) -> None:
        if not (len(a) > 2 and a[2]):  # the solve of what is offered; a congested queue adds one with its throttles
            solves.append(twin.now)
        real(*a)

    monkeypatch.setattr(twin, "_apply_traffic", counted)
    events: list[tuple[str, str, bool, int]] = []
    twin.listeners.append(lambda d, p, up, ts: events.append((d, p, up, ts)))
    ports = ["Ethernet5/1", "Ethernet6/1", "Ethernet7/1"]
    for k, port in enumerate(ports):  # three shutdowns, 5 ms apart
        twin.set_port_config("leaf-g0-r0", port, PortConfig(admin_up=False))
        twin.advance(T0 + NS + k * 5_000_000)
    # each port's event at its own time, at once
    assert [(p, ts) for d, p, up, ts in events if d == "leaf-g0-r0"] == [
        (port, T0 + NS + k * 5_000_000) for k, port in enumerate(ports)
    ]
    assert solves == []
    twin.advance(T0 + 2 * NS)
    assert len(solves) == 1  # one solve RATES_LAG_NS after the first
    sw = twin.switch("leaf-g0-r0")
    for port in ports:
        assert sw.rate[sw.index[port]].sum() == 0.0
    # a change of anything else (here a port's PFC) is solved at once
    twin.set_port_config("leaf-g0-r0", "Ethernet1/1", LOSSLESS)
    twin.advance(T0 + 2 * NS + 1)
    assert len(solves) == 2


def test_counter_wraps_at_64_bits(twin: Twin) -> None:
    sw = twin.switch("spine-r0-0")
    row = sw.index[sw.ports[0]]
    sw.base[row, COL["if.in-octets"]] = 2**64 - 10
    assert sw.value(sw.ports[0], "if.in-octets", T0 + NS) < 2**40


def test_storm_from_nic_stops_leaf_egress_and_spreads_upstream(twin: Twin) -> None:
    lossless(twin)
    faults = FaultInjector(twin)
    faults.inject("pfc_storm", {"nic": "gpu-g0-000:nic0", "priority": 3}, T0 + NS)
    origin = ("leaf-g0-r0", "Ethernet1/1")
    assert rate(twin, *origin, "pfc3.pfc-on-total-rx-time") == NS
    assert rate(twin, *origin, "q3.transmit-pkts") == 0
    assert rate(twin, *origin, "pfc3.in-frames") > 20_000  # ~24k refreshes/s keep a 400G port paused
    # The leaf pauses its spines fully (their egress toward it is stuck) ...
    up = twin.peer("leaf-g0-r0", "Ethernet5/1")
    assert up is not None
    assert rate(twin, up.device, up.port, "q3.transmit-pkts") == 0
    assert rate(twin, "leaf-g0-r0", "Ethernet5/1", "pfc3.out-frames") > 0
    # ... and further out traffic still drains: paused part of the time only.
    far = twin.peer("spine-r0-0", "Ethernet3/1")
    assert far is not None and far.device == "leaf-g1-r0"
    assert rate(twin, far.device, far.port, "q3.transmit-pkts") > 0
    assert rate(twin, far.device, far.port, "pfc3.pfc-on-total-rx-time") == pytest.approx(0.5 * NS)
    faults.clear(now_ns=T0 + 2 * NS)
    assert rate(twin, *origin, "pfc3.pfc-on-total-rx-time") == 0


WATCHED = PortConfig(pfc_enabled=True, no_drop=frozenset({3}), watchdog=True, watchdog_timeout_ns=NS // 5)


def watchdog_counts(twin: Twin, device: str, port: str, at: int) -> tuple[int, int]:
    twin.advance(at)
    sw = twin.switch(device)
    return sw.value(port, "wd3.stuck-count", at), sw.value(port, "wd3.recovery-count", at)


def test_the_watchdog_counts_a_stuck_queue_once_after_its_timeout_and_its_recovery(twin: Twin) -> None:
    lossless(twin, WATCHED)
    faults = FaultInjector(twin)
    faults.inject("pfc_storm", {"nic": "gpu-g0-000:nic0", "priority": 3}, T0 + NS)
    origin = ("leaf-g0-r0", "Ethernet1/1")
    assert watchdog_counts(twin, *origin, T0 + NS + NS // 5 - 1) == (0, 0)  # not yet held for the timeout
    assert watchdog_counts(twin, *origin, T0 + NS + NS // 5) == (1, 0)
    assert watchdog_counts(twin, *origin, T0 + 5 * NS) == (1, 0)  # once per stuck episode, not per poll
    up = twin.peer("leaf-g0-r0", "Ethernet5/1")  # the spine's queue toward the leaf is stuck too
    assert up is not None and watchdog_counts(twin, up.device, up.port, T0 + 5 * NS) == (1, 0)
    far = twin.peer("spine-r0-0", "Ethernet3/1")  # paused half the time: it drains, so it is never stuck
    assert far is not None and watchdog_counts(twin, far.device, far.port, T0 + 5 * NS) == (0, 0)
    faults.clear(now_ns=T0 + 6 * NS)
    assert watchdog_counts(twin, *origin, T0 + 6 * NS + NS // 5 - 1) == (1, 0)  # recovery time not yet over
    assert watchdog_counts(twin, *origin, T0 + 6 * NS + NS // 5) == (1, 1)


def test_a_queue_stuck_again_before_its_recovery_time_recovers_only_after_the_last_release(twin: Twin) -> None:
    lossless(twin, WATCHED)
    faults = FaultInjector(twin)
    origin = ("leaf-g0-r0", "Ethernet1/1")
    faults.inject("pfc_storm", {"nic": "gpu-g0-000:nic0", "priority": 3}, T0 + NS)
    faults.clear(now_ns=T0 + 2 * NS)  # free from 2.0 s ...
    faults.inject("pfc_storm", {"nic": "gpu-g0-000:nic0", "priority": 3}, T0 + 2 * NS + NS // 10)  # ... to 2.1 s
    faults.clear(now_ns=T0 + 2 * NS + NS // 10 + NS // 20)  # stuck 50 ms (under the timeout), free from 2.15 s
    assert watchdog_counts(twin, *origin, T0 + 2 * NS + NS // 5) == (1, 0)  # 200 ms after the first release: no
    assert watchdog_counts(twin, *origin, T0 + 2 * NS + NS // 10 + NS // 20 + NS // 5) == (1, 1)
    assert not twin.wd_stormed and not twin.wd_freed


def test_no_watchdog_count_without_a_watchdog_or_for_a_short_pause(twin: Twin) -> None:
    lossless(twin)  # PFC without the watchdog armed
    faults = FaultInjector(twin)
    faults.inject("pfc_storm", {"nic": "gpu-g0-000:nic0", "priority": 3}, T0 + NS)
    assert watchdog_counts(twin, "leaf-g0-r0", "Ethernet1/1", T0 + 3 * NS) == (0, 0)
    faults.clear(now_ns=T0 + 3 * NS)
    twin.set_port_config("leaf-g0-r0", "Ethernet1/1", WATCHED)
    faults.inject("pfc_storm", {"nic": "gpu-g0-000:nic0", "priority": 3}, T0 + 4 * NS)
    faults.clear(now_ns=T0 + 4 * NS + NS // 10)  # stuck for 100 ms: under the 200-ms timeout
    faults.inject("microburst", {"nic": "gpu-g0-000:nic0", "duration_ms": 900}, T0 + 5 * NS)  # drains: not stuck
    assert watchdog_counts(twin, "leaf-g0-r0", "Ethernet1/1", T0 + 8 * NS) == (0, 0)


def test_a_reboot_starts_the_watchdogs_over(twin: Twin) -> None:
    lossless(twin, WATCHED)
    faults = FaultInjector(twin)
    faults.inject("pfc_storm", {"nic": "gpu-g0-000:nic0", "priority": 3}, T0 + NS)
    assert watchdog_counts(twin, "leaf-g0-r0", "Ethernet1/1", T0 + 2 * NS) == (1, 0)
    faults.inject("reboot", {"device": "leaf-g0-r0", "down_s": 1}, T0 + 2 * NS)
    faults.clear(now_ns=T0 + 2 * NS)
    # Counters reset with the reboot, and the storm that ended while it was down brings no recovery count after.
    assert watchdog_counts(twin, "leaf-g0-r0", "Ethernet1/1", T0 + 5 * NS) == (0, 0)
    assert not twin.wd_stormed and not twin.wd_stuck_since


def test_pause_is_ignored_where_pfc_is_off(twin: Twin) -> None:
    FaultInjector(twin).inject("pfc_storm", {"nic": "gpu-g0-000:nic0"}, T0 + NS)
    assert rate(twin, "leaf-g0-r0", "Ethernet1/1", "pfc3.in-frames") > 0
    assert rate(twin, "leaf-g0-r0", "Ethernet1/1", "q3.transmit-pkts") > 0
    assert rate(twin, "leaf-g0-r0", "Ethernet5/1", "pfc3.out-frames") == 0


def test_deadlock_cycle_has_every_queue_stuck_and_no_origin(twin: Twin) -> None:
    lossless(twin)
    rec = FaultInjector(twin).inject("pfc_deadlock", {"cycle": "leaf-g0-r0,spine-r0-0,leaf-g1-r0,spine-r0-1"}, T0 + NS)
    assert len(rec.ports) == 4
    for ep in rec.ports:
        device, port = ep.split(":")
        assert rate(twin, device, port, "q3.transmit-pkts") == 0
        assert rate(twin, device, port, "pfc3.pfc-on-total-rx-time") == NS
    assert rate(twin, "leaf-g0-r0", "Ethernet1/1", "pfc3.in-frames") == 0  # no NIC pauses anyone


def test_flaps_follow_their_schedule(twin: Twin) -> None:
    FaultInjector(twin).inject("link_flap", {"port": "leaf-g0-r0:Ethernet5/1", "count": 3, "period_s": 1.0}, T0)
    twin.advance(T0 + 10 * NS)
    changes = [(ts, up) for ts, d, p, up in twin.oper_events if (d, p) == ("leaf-g0-r0", "Ethernet5/1")]
    assert [up for _, up in changes] == [False, True] * 3
    assert [ts - T0 for ts, _ in changes][:2] == [0, NS // 2]
    assert twin.switch("leaf-g0-r0").value("Ethernet5/1", "if.carrier-transitions", T0 + 10 * NS) == 6


def test_corruption_shows_on_the_receiving_port_and_optics_on_power(twin: Twin) -> None:
    faults = FaultInjector(twin)
    faults.inject("link_corruption", {"port": "spine-r0-0:Ethernet1/1", "rate": 1e-4}, T0 + NS)
    pkts = rate(twin, "spine-r0-0", "Ethernet1/1", "if.in-pkts")
    assert rate(twin, "spine-r0-0", "Ethernet1/1", "if.in-fcs-errors") == pytest.approx(pkts * 1e-4)
    assert rate(twin, "leaf-g0-r0", "Ethernet5/1", "if.in-fcs-errors") == 0
    faults.inject("optics", {"port": "leaf-g0-r0:Ethernet6/1", "loss_db": 5}, T0 + NS)
    leaf = twin.switch("leaf-g0-r0")
    row = leaf.index["Ethernet6/1"]
    assert leaf.rx_power[row] == pytest.approx(leaf.rx_power_nominal[row] - 5)


def test_reboot_resets_counters_and_drops_streams(twin: Twin) -> None:
    sw = twin.switch("spine-r1-0")
    assert sw.value(sw.ports[0], "if.in-pkts", T0 + 100 * NS) > 0
    twin.advance(T0 + 100 * NS)
    FaultInjector(twin).inject("reboot", {"device": "spine-r1-0", "down_s": 5}, T0 + 100 * NS)
    assert sw.stream_epoch == 1
    assert not sw.oper_up.any()
    twin.advance(T0 + 106 * NS)
    assert sw.oper_up.all()
    assert sw.value(sw.ports[0], "if.in-pkts", T0 + 106 * NS) < sw.value(sw.ports[0], "if.in-pkts", T0 + 100 * NS - 1)


def test_silent_corruption_shows_only_in_probes_through_that_switch(twin: Twin) -> None:
    faults = FaultInjector(twin)
    faults.inject("silent_corruption", {"device": "spine-r0-0", "rate": 0.01}, T0 + NS)
    sw = twin.switch("spine-r0-0")
    assert not any(rate(twin, "spine-r0-0", p, "if.in-errors") for p in sw.ports)
    probes = ProbeGenerator(twin, per_rail=40).round(T0 + NS)
    through = [p for p in probes if "spine-r0-0" in p["hops"]]
    elsewhere = [p for p in probes if "spine-r0-0" not in p["hops"]]
    assert through and elsewhere
    assert all(p["corrupted"] == 0 for p in elsewhere)
    assert sum(p["corrupted"] for p in through) > 0


@pytest.mark.parametrize(
    ("kind", "params", "message"),
    [
        ("meteor", {}, "unknown fault kind 'meteor'"),
        ("link_down", {"port": "leaf-g0-r0:Ethernet99/1"}, "not a cabled port"),
        ("pfc_storm", {"nic": "leaf-g0-r0:Ethernet1/1"}, "must be a server NIC"),
        ("link_flap", {"port": "leaf-g0-r0:Ethernet1/1", "count": "many"}, "count must be a number"),
        ("pfc_deadlock", {"cycle": "leaf-g0-r0,leaf-g1-r0"}, "no link from leaf-g0-r0 to leaf-g1-r0"),
        ("reboot", {"device": "gpu-g0-000"}, "is not a switch"),
    ],
)
def test_bad_fault_requests_say_what_is_wrong(twin: Twin, kind: str, params: dict[str, object], message: str) -> None:
    faults = FaultInjector(twin)
    with pytest.raises(FaultError, match=message):
        faults.inject(kind, params)
    assert faults.log == []


def test_fault_log_records_start_and_clear(twin: Twin) -> None:
    faults = FaultInjector(twin)
    rec = faults.inject("link_down", {"port": "leaf-g0-r0:Ethernet5/1"}, T0 + NS)
    peer = twin.peer("leaf-g0-r0", "Ethernet5/1")
    assert peer is not None
    assert rec.to_dict()["devices"] == sorted({"leaf-g0-r0", peer.device})
    faults.clear(rec.id, now_ns=T0 + 2 * NS)
    assert rec.cleared_ns == T0 + 2 * NS
    assert twin.switch("leaf-g0-r0").oper_up[4]
    with pytest.raises(FaultError, match="no active fault"):
        faults.clear(rec.id)


def test_miscable_swaps_what_lldp_hears_on_all_four_ends_and_clears(twin: Twin) -> None:
    inj = FaultInjector(twin)
    a, b = Endpoint("leaf-g0-r1", "Ethernet2/1"), Endpoint("leaf-g0-r2", "Ethernet2/1")
    pa, pb = twin.peer(a.device, a.port), twin.peer(b.device, b.port)
    assert pa is not None and pb is not None
    rec = inj.inject("miscable", {"port": str(a), "other": str(b)})
    assert twin.lldp_peer(a.device, a.port) == pb and twin.lldp_peer(pb.device, pb.port) == a
    assert twin.lldp_peer(b.device, b.port) == pa and twin.lldp_peer(pa.device, pa.port) == b
    assert twin.peer(a.device, a.port) == pa  # the cabling the traffic model follows is unchanged
    assert sorted(rec.ports) == sorted(map(str, (a, b, pa, pb)))
    inj.clear(rec.id)
    assert twin.lldp_peer(a.device, a.port) == pa and twin.lldp_peer(b.device, b.port) == pb and twin.lldp_swaps == {}
    with pytest.raises(FaultError, match="two different cables"):
        inj.inject("miscable", {"port": str(a), "other": str(a)})


def test_the_gnmi_hub_advances_the_twin_when_a_change_is_due_not_at_its_next_tick(small_blueprint: Cabling) -> None:
    """A switch sends an ON_CHANGE event when its port changes: the hub wakes for a scheduled change (a flap's
    edge) instead of waiting out its 50 ms tick, so the event leaves within a loop turn of its timestamp."""
    import asyncio

    from lab.gnmi_server import TICK_S, Hub

    now = [T0]
    twin = Twin(Fabric(small_blueprint), clock=lambda: now[0])
    hub = Hub(twin, credentials=None, loop=asyncio.new_event_loop())  # type: ignore[arg-type]
    assert hub._until_due() == TICK_S  # nothing scheduled
    twin.schedule(T0 + 7_000_000, lambda _t: None)
    assert hub._until_due() == pytest.approx(0.007)
    now[0] = T0 + 9_000_000  # overdue: at once
    assert hub._until_due() == 0.0
    twin.advance()
    assert hub._until_due() == TICK_S
    hub.loop.close()


def test_lldp_forgets_a_down_ports_neighbour_and_hears_it_again_a_second_after_link_up(twin: Twin) -> None:
    """IEEE 802.1AB: the neighbour is deleted when the port stops being operational (either end shut, a cut, a
    reboot) and learned again from the peer's first LLDPDU after link up (LLDP_LEARN_NS), not at the link-up
    instant; a miscabled port comes back facing whoever is really on its cable."""
    clock = twin.clock
    assert isinstance(clock, Clock)
    leaf = twin.switch("leaf-g0-r0")
    row = leaf.index["Ethernet1/1"]
    want = twin.peer("leaf-g0-r0", "Ethernet1/1")
    assert want is not None and twin.lldp_heard(leaf, row) == want  # up since boot: known
    twin.set_port_config("leaf-g0-r0", "Ethernet1/1", PortConfig(admin_up=False))
    clock.now += NS
    twin.advance()
    assert twin.lldp_heard(leaf, row) is None
    other = Endpoint("gpu-g1-003", "nic5")
    twin.lldp_swaps[("leaf-g0-r0", "Ethernet1/1")] = other  # the repair put another cable in
    clock.now += NS // 10
    twin.set_port_config("leaf-g0-r0", "Ethernet1/1", PortConfig())
    twin.advance()
    up_at = int(leaf.up_since[row])  # the recompute that took it up (a timer due meanwhile may run it earlier)
    assert clock.now - NS // 10 <= up_at <= clock.now
    assert leaf.oper_up[row] and twin.lldp_heard(leaf, row) is None
    assert twin.lldp_heard(leaf, row, up_at + LLDP_LEARN_NS - 1) is None
    assert twin.lldp_heard(leaf, row, up_at + LLDP_LEARN_NS) == other
