"""Collectors end to end: two `fabricd collector` processes share the twin's switches through leases on a real
nats-server and publish to the telemetry stream; the service reads the stream (telemetry.source: bus) and acts on
a flap exactly as with its own subscriptions. Killed with -9, a collector's switches move to the other one within
a lease TTL and an interval, and a flap after that is still found."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest
from nats.aio.client import Client as NATS

from drivers.inventory import load_inventory
from fabricd.bus import LocalBus
from fabricd.telemetry.collector import holders
from lab.control_client import inject
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import (
    bus_down,
    bus_up,
    collectors,
    done_on,
    fabricd,
    free_port,
    hot_pair,
    on_bus,
    twin_fixture,
)

from .service_thread import ServiceThread, wait_for, write_config

pytestmark = [pytest.mark.distributed, pytest.mark.slow]
LEASE_S = 2.0
twin = twin_fixture()


def owners(bus: LocalBus) -> dict[str, str]:
    """switch key -> collector, as the lease bucket says now."""
    return on_bus(bus, holders)


def bus_config(tmp_path: Path, twin: TwinThread, bus: LocalBus, max_age_s: int, **sections: object) -> Path:
    """fabricd.yaml for a service reading the bus (telemetry.source: bus) its collectors publish to."""
    telemetry = {"interval_s": 0.5, "source": "bus", "collector_lease_ttl_s": LEASE_S, "stream_max_age_s": max_age_s}
    return write_config(tmp_path, twin.inventory, bus={"urls": [bus.url]}, telemetry=telemetry, **sections)


def test_collectors_share_the_switches_and_a_dead_ones_move(
    twin: TwinThread, nats_bus: LocalBus, tmp_path: Path
) -> None:
    config = bus_config(tmp_path, twin, nats_bus, 20)
    with collectors(config, tmp_path, ("c1", "c2")) as procs:
        switches = len(load_inventory(twin.inventory).names)  # small-pod: 18

        def shares() -> list[int]:
            held = list(owners(nats_bus).values())
            return sorted(held.count(n) for n in ("c1", "c2")) if len(held) == switches else []

        # the first to start takes them all, then gives back what is over its share once it sees the second
        wait_for(lambda: shares() == [switches // 2, switches - switches // 2], 30)

        svc = ServiceThread(config).start(60)
        try:
            wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["stale"] == [], 30)
            inject(twin.state_dir, "link_flap", {"port": "leaf-g0-r0:Ethernet1/1", "count": 8, "period_s": 0.3})
            wait_for(lambda: [a["status"] for a in svc.get("/api/v1/actions")["actions"]] == ["done"], 30)

            procs["c1"].kill()  # no goodbye: its leases just expire
            killed = time.monotonic()
            wait_for(lambda: set(owners(nats_bus).values()) == {"c2"} and len(owners(nats_bus)) == switches, 15,
                     every_s=0.1)  # fmt: skip
            moved = time.monotonic() - killed
            assert moved < LEASE_S + LEASE_S / 3 + 2.0, moved
            wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["stale"] == [], 15)

            inject(twin.state_dir, "link_flap", {"port": "leaf-g1-r1:Ethernet2/1", "count": 8, "period_s": 0.3})
            wait_for(lambda: sorted(f"{a['device']}:{a['port']}" for a in svc.get("/api/v1/actions")["actions"])
                     == ["leaf-g0-r0:Ethernet1/1", "leaf-g1-r1:Ethernet2/1"], 30)  # fmt: skip
            metrics = httpx.get(svc.url + "/metrics", timeout=10).text
            assert "fabricd_bus_lost_messages_total 0.0" in metrics
        finally:
            svc.stop()


def test_three_collectors_two_services_any_one_killed(
    twin: TwinThread, nats_bus: LocalBus, postgres_url: str, tmp_path: Path
) -> None:
    """The whole picture on one machine: 3 collectors, 2 `fabricd run` (leader and standby) reading the bus and
    sharing PostgreSQL. Kill -9 a collector, then the leader: every fault is acted on once, one ticket each."""
    config = bus_config(
        tmp_path, twin, nats_bus, 20, state={"url": postgres_url}, ha={"enabled": True, "lease_ttl_s": 2.0}
    )
    with collectors(config, tmp_path, ("c1", "c2", "c3")) as procs:
        switches = len(load_inventory(twin.inventory).names)
        wait_for(lambda: len(owners(nats_bus)) == switches and set(owners(nats_bus).values()) == set(procs), 30)
        with hot_pair(config, tmp_path) as (a, b):
            faults = ["leaf-g0-r0:Ethernet1/1", "leaf-g1-r1:Ethernet2/1", "leaf-g0-r1:Ethernet3/1"]
            inject(twin.state_dir, "link_flap", {"port": faults[0], "count": 8, "period_s": 0.3})
            wait_for(lambda: done_on(a) == faults[:1], 30)

            procs["c2"].kill()  # a collector dies
            wait_for(lambda: len(owners(nats_bus)) == switches and set(owners(nats_bus).values()) == {"c1", "c3"}, 15)
            inject(twin.state_dir, "link_flap", {"port": faults[1], "count": 8, "period_s": 0.3})
            wait_for(lambda: done_on(a) == sorted(faults[:2]), 30)

            a.kill()  # the leader dies
            wait_for(lambda: b.role() == "leader", 10)
            inject(twin.state_dir, "link_flap", {"port": faults[2], "count": 8, "period_s": 0.3})
            wait_for(lambda: done_on(b) == sorted(faults), 30)
            time.sleep(2)
            actions = b.get("/api/v1/actions")["actions"]
            assert sorted(f"{x['device']}:{x['port']}" for x in actions) == sorted(faults)  # once each
            tickets = b.get("/api/v1/tickets")["tickets"]
            assert sorted(t["kind"] for t in tickets) == ["link_flap"] * 3


def kv_consumers(bus: LocalBus) -> int:
    """Consumers on the two lease buckets' streams now."""

    from fabricd.telemetry.collector import MEMBERS, SWITCHES

    async def read(nc: NATS) -> int:
        js = nc.jetstream()
        return sum([(await js.stream_info(f"KV_{b}")).state.consumer_count for b in (SWITCHES, MEMBERS)])

    return on_bus(bus, read)


def test_collectors_leave_no_consumers_behind_and_need_no_api_token(
    twin: TwinThread, nats_bus: LocalBus, tmp_path: Path
) -> None:
    # three collectors for six lease TTLs: every lease round lists both buckets. nats-py's kv.keys() left each
    # listing's consumer on the server for 5 minutes (here ~100 after 12 s, and nats-server's 1,000 limit within
    # minutes at six collectors); the count must stay at what the collectors are listing right now. Their config
    # names an API token in an unset variable: a collector serves no API and must not need it.
    config = bus_config(tmp_path, twin, nats_bus, 20, api={"token": {"env": "FABRICD_TEST_UNSET_TOKEN"}})
    os.environ.pop("FABRICD_TEST_UNSET_TOKEN", None)
    with collectors(config, tmp_path, ("c1", "c2", "c3")) as procs:
        switches = len(load_inventory(twin.inventory).names)
        wait_for(lambda: len(owners(nats_bus)) == switches, 30)
        seen = []
        deadline = time.monotonic() + 6 * LEASE_S
        while time.monotonic() < deadline:
            seen.append(kv_consumers(nats_bus))
            time.sleep(0.5)
        assert max(seen) <= 3 * 2 * 2, seen  # at most two listings in flight per collector, and one leftover each
        assert all(p.running() for p in procs.values()), [(tmp_path / f"{n}.log").read_text() for n in procs]


def scraped(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        if head == (f"{name}{{{want}}}" if want else name):
            return float(value)
    raise AssertionError(f"{name}{{{want}}} not exported")


def test_bus_mode_reports_its_own_health_and_a_late_service_knows_the_sync_state(
    twin: TwinThread, nats_bus: LocalBus, tmp_path: Path
) -> None:
    # the stream keeps 5 s: a service that starts 7 s after the collectors finds no sync message any more, yet must
    # know within an interval that every switch is streaming; it exports the telemetry metrics a service streaming
    # itself does (FabricdTelemetryStale reads them), and each collector serves its own on a port of its own
    config = bus_config(tmp_path, twin, nats_bus, 5)
    ports = {"c1": free_port(), "c2": free_port()}
    with collectors(config, tmp_path, list(ports),
                    lambda n: ("--metrics-port", str(ports[n]), "--metrics-host", "127.0.0.1")):  # fmt: skip
        names = load_inventory(twin.inventory).names
        wait_for(lambda: len(owners(nats_bus)) == len(names), 30)
        time.sleep(7)  # the collectors' sync messages age out of the stream
        started = time.monotonic()
        svc = ServiceThread(config).start(60)
        try:
            wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["synced"] == len(names), 5, every_s=0.05)
            assert time.monotonic() - started < 10  # the service's own start, then within about an interval
            wait_for(lambda: svc.get("/api/v1/health")["status"] == "ok", 5)
            time.sleep(1.5)
            text = httpx.get(svc.url + "/metrics", timeout=10).text
            for n in names:
                assert scraped(text, "fabricd_telemetry_synced", device=n) == 1
                assert scraped(text, "fabricd_telemetry_stale", device=n) == 0
                assert scraped(text, "fabricd_telemetry_connected", device=n) == 1
                assert scraped(text, "fabricd_telemetry_updates_total", device=n) > 0
            assert scraped(text, "fabricd_telemetry_lag_seconds_count") > 0
            held = 0.0
            for port in ports.values():
                mine = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
                held += scraped(mine, "fabricd_collector_switches")
                assert scraped(mine, "fabricd_collector_publish_errors_total") == 0
                assert scraped(mine, "fabricd_telemetry_lag_seconds_count") > 0
            assert held == len(names)
        finally:
            svc.stop()


def _out_of_order(text: str) -> float:
    """The service's telemetry updates dropped as older than what it stored, over every switch."""
    return sum(
        float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line.startswith("fabricd_telemetry_dropped_updates_total{") and 'reason="out_of_order"' in line
    )


def _listens_on_loopback_only(pid: int, port: int) -> bool:
    """The process listens on `port` at 127.0.0.1 and nowhere else (its /proc/PID/net/tcp and tcp6)."""
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.rpartition(":")
            if state == "0A" and int(hex_port, 16) == port:  # LISTEN
                found.append(address)
    return found == ["0100007F"]


def test_a_woken_collector_drops_its_backlog_and_health_tells_unheld_from_silent(
    twin: TwinThread, nats_bus: LocalBus, tmp_path: Path
) -> None:
    # a collector stopped (SIGSTOP) longer than its lease loses its switches to the other; woken, it publishes nothing
    # of what its gRPC streams buffered meanwhile (it counts it dropped): the service sees no sample out of order.
    # With every collector gone, health and status say no collector holds the switches (not just `stale`), and a
    # collector's metrics listen on loopback unless told otherwise.
    config = bus_config(tmp_path, twin, nats_bus, 20)
    ports = {"c1": free_port(), "c2": free_port()}
    names = load_inventory(twin.inventory).names
    with collectors(config, tmp_path, list(ports), lambda n: ("--metrics-port", str(ports[n]))) as procs:
        wait_for(lambda: sorted(set(owners(nats_bus).values())) == ["c1", "c2"] and len(owners(nats_bus)) == len(names),
                 30)  # fmt: skip
        assert all(_listens_on_loopback_only(procs[n].pid, p) for n, p in ports.items())
        svc = ServiceThread(config).start(60)
        try:
            wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["stale"] == [], 30)
            procs["c1"].pause()
            wait_for(lambda: set(owners(nats_bus).values()) == {"c2"} and len(owners(nats_bus)) == len(names), 15)
            time.sleep(2)  # c1's streams keep arriving at its sockets, unread
            before = _out_of_order(httpx.get(svc.url + "/metrics", timeout=10).text)
            procs["c1"].wake()
            time.sleep(3)
            assert _out_of_order(httpx.get(svc.url + "/metrics", timeout=10).text) == before
            mine = httpx.get(f"http://127.0.0.1:{ports['c1']}/metrics", timeout=5).text
            assert scraped(mine, "fabricd_collector_dropped_unheld_total") > 0

            for p in procs.values():
                p.pause()  # every collector gone: the leases expire, nobody streams
            wait_for(lambda: sorted(svc.get("/api/v1/health")["telemetry"]["unheld"]) == sorted(names), 15)
            text = httpx.get(svc.url + "/metrics", timeout=10).text
            assert all(scraped(text, "fabricd_bus_switch_held", device=n) == 0 for n in names)
            status = fabricd("status", "--api", svc.url, token=True, timeout_s=30)
            assert f"held by no collector ({len(names)}; start or check `fabricd collector`)" in status.stdout, status
            assert "  stale:" not in status.stdout  # none is merely silent
            for p in procs.values():
                p.wake()
            wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["unheld"] == [], 15)
            wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["stale"] == [], 15)
            assert scraped(httpx.get(svc.url + "/metrics", timeout=10).text, "fabricd_bus_switch_held",
                           device=names[0]) == 1  # fmt: skip
        finally:
            svc.stop()


def test_a_restarted_bus_loses_the_stream_and_telemetry_comes_back(
    twin: TwinThread, nats_bus: LocalBus, tmp_path: Path
) -> None:
    # nats-server keeps no memory stream across a restart (chaos seed 3135: after two bus restarts the leader was
    # blind for three minutes, its ordered consumer waiting for the lost stream's next sequence number, and the
    # collectors publishing into nothing): the stream is made again and read from its start, within seconds
    config = bus_config(tmp_path, twin, nats_bus, 20)
    with collectors(config, tmp_path, ("c1",)):
        svc = ServiceThread(config).start(60)
        try:
            wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["stale"] == [], 30)
            bus_down(nats_bus)
            bus_up(nats_bus)
            restarted = time.monotonic()
            time.sleep(2)  # every switch goes stale meanwhile (interval 0.5 s)
            wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["stale"] == [], 20, every_s=0.2)
            assert time.monotonic() - restarted < 15
            inject(twin.state_dir, "link_flap", {"port": "leaf-g0-r0:Ethernet1/1", "count": 8, "period_s": 0.3})
            wait_for(lambda: [a["status"] for a in svc.get("/api/v1/actions")["actions"]] == ["done"], 30)
        finally:
            svc.stop()
