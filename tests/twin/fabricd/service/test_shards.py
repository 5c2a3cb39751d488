"""Detector shards with a real nats-server: two `fabricd shard` processes (in threads here) split the small pod's two
aggregation groups, and one service merges their findings and acts. A PFC storm from a group-1 NIC is named once, by
the shard that sees its origin (the other's trace stops at the spines); a flap on a group-0 server port is taken down
once, by the service."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fabricd.bus import LocalBus
from fabricd.service.config import load_config
from fabricd.service.shard import ShardProcess
from lab.control_client import inject
from lab.model import PortConfig
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import running_twin

from .service_thread import ServiceThread, wait_for, write_config

pytestmark = [pytest.mark.distributed]


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    with running_twin("small-pod", tmp_path_factory.mktemp("shard-twin")) as t:
        done = threading.Event()

        def lossless() -> None:  # what `fabricd apply` of the default policy leaves on every switch port
            for name, sw in t.process.twin.switches.items():
                for port in sw.ports:
                    t.process.twin.set_port_config(name, port, PortConfig(pfc_enabled=True, no_drop=frozenset({3})))
            done.set()

        t.loop.call_soon_threadsafe(lossless)
        assert done.wait(5)
        yield t


class Shards:
    """`fabricd shard --index k --count 2` for each k of `indexes`, on one event loop in a thread."""

    def __init__(self, config: Path, indexes: tuple[int, ...] = (0, 1)) -> None:
        cfg = load_config(config)
        self.shards = [ShardProcess(cfg, k, 2) for k in indexes]
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        async def both() -> None:
            await asyncio.gather(*(s.run() for s in self.shards))

        try:
            self.loop.run_until_complete(both())
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def start(self) -> Shards:
        self.thread.start()
        return self

    def stop(self) -> None:
        for s in self.shards:
            self.loop.call_soon_threadsafe(s.stop)
        self.thread.join(15)
        assert self.error is None, self.error


def test_two_shards_one_service(twin: TwinThread, nats_bus: LocalBus, tmp_path: Path) -> None:
    config = write_config(tmp_path, twin.inventory, bus={"urls": [nats_bus.url]},
                          detectors={"source": "shards", "shards": 2})  # fmt: skip
    shards = Shards(config).start()
    svc = ServiceThread(config).start()
    try:
        views = [s.view for s in shards.shards]
        assert [v.groups for v in views] == [(0,), (1,)]
        assert "leaf-g1-r1" not in views[0].switches and "spine-r1-0" in views[0].switches
        wait_for(lambda: all(s.published for s in shards.shards), 15)  # both report, empty at first
        health = wait_for(lambda: (h := svc.get("/api/v1/health"))["detectors"]["silent_shards"] == [] and h, 10)
        assert health["status"] == "ok" and health["detectors"]["shards"] == 2

        inject(twin.state_dir, "pfc_storm", {"nic": "gpu-g1-000:nic1"})
        storms = wait_for(lambda: [f for f in svc.get("/api/v1/findings")["findings"] if f["kind"] == "pfc_storm"], 15)
        time.sleep(2)  # a few more passes: no second origin appears
        storms = [f for f in svc.get("/api/v1/findings")["findings"] if f["kind"] == "pfc_storm"]
        assert [(f["device"], f["port"]) for f in storms] == [("leaf-g1-r1", "Ethernet1/1")]

        inject(twin.state_dir, "link_flap", {"port": "leaf-g0-r2:Ethernet2/1", "count": 8, "period_s": 0.3})
        (held,) = wait_for(lambda: svc.get("/api/v1/ports/disabled")["ports"], 20)
        assert (held["device"], held["port"]) == ("leaf-g0-r2", "Ethernet2/1")
        flaps = [f for f in svc.get("/api/v1/findings")["findings"] if f["kind"] == "link_flap"]
        assert len({(f["device"], f["port"], f["start_ts"]) for f in flaps}) == 1  # one incident, merged
        actions = [a for a in svc.get("/api/v1/actions")["actions"] if a["op"] == "disable"]
        assert len(actions) == 1 and actions[0]["status"] == "done"

        # A leaf-spine link in group 0: both shards read the spine's end, only shard 0 reports it.
        inject(twin.state_dir, "link_flap", {"port": "leaf-g0-r0:Ethernet5/1", "count": 8, "period_s": 0.3})

        def uplink() -> list[dict[str, Any]]:
            return [f for f in svc.get("/api/v1/findings")["findings"] if f["kind"] == "link_flap"
                    and "leaf-g0-r0:Ethernet5/1" in f["ports"]]  # fmt: skip

        wait_for(uplink, 20)
        time.sleep(1.5)
        (f,) = uplink()
        assert "spine-r0-0:Ethernet1/1" in f["ports"]
        assert len([a for a in svc.get("/api/v1/actions")["actions"] if a["port"] == f["port"]]) <= 1

        # A shard that stops: the service says which, and keeps its incidents open.
        shards.loop.call_soon_threadsafe(shards.shards[1].stop)
        health = wait_for(lambda: (h := svc.get("/api/v1/health"))["detectors"]["silent_shards"] == [1] and h, 10)
        assert health["status"] == "degraded"
        assert any(f["kind"] == "pfc_storm" for f in svc.get("/api/v1/findings", status="active")["findings"])
        ages = dict(re.findall(r'^fabricd_detector_shard_report_age_seconds\{shard="(\d)"\} (\S+)$',
                               httpx.get(svc.url + "/metrics").text, re.M))  # fmt: skip
        assert float(ages["0"]) < 1.5 < float(ages["1"])  # what FabricdDetectorShardSilent alerts on
    finally:
        svc.stop()
        shards.stop()
        twin.loop.call_soon_threadsafe(lambda: twin.process.faults.clear(None, time.time_ns()))


def test_two_instances_of_a_shard_act_as_its_standby(twin: TwinThread, nats_bus: LocalBus, tmp_path: Path) -> None:
    """Shard 1 runs twice (as a standby would): both publish the same findings, the service keeps one incident and
    takes the port down once; when one instance stops, the other keeps group 1 watched."""
    config = write_config(tmp_path, twin.inventory, bus={"urls": [nats_bus.url]},
                          detectors={"source": "shards", "shards": 2})  # fmt: skip
    shards = Shards(config, (0, 1, 1)).start()
    svc = ServiceThread(config).start()
    try:
        wait_for(lambda: all(s.published for s in shards.shards), 15)
        inject(twin.state_dir, "link_flap", {"port": "leaf-g1-r3:Ethernet3/1", "count": 8, "period_s": 0.3})
        # (ports earlier tests of this module left shut with fabricd's mark are adopted by this fresh state: only
        # the port flapped here counts)
        here = ("leaf-g1-r3", "Ethernet3/1")
        wait_for(lambda: [p for p in svc.get("/api/v1/ports/disabled")["ports"] if (p["device"], p["port"]) == here],
                 20)  # fmt: skip
        time.sleep(1.5)  # more passes of both instances
        flaps = [f for f in svc.get("/api/v1/findings")["findings"]
                 if f["kind"] == "link_flap" and not f["evidence"].get("adopted")]  # fmt: skip
        assert len({(f["device"], f["port"], f["start_ts"]) for f in flaps}) == 1
        disables = [a for a in svc.get("/api/v1/actions")["actions"] if a["op"] == "disable"]
        assert len([a for a in disables if (a["device"], a["port"]) == here]) == 1
        shards.loop.call_soon_threadsafe(shards.shards[2].stop)
        time.sleep(2)
        assert svc.get("/api/v1/health")["detectors"]["silent_shards"] == []  # the other instance of shard 1
    finally:
        svc.stop()
        shards.stop()
        twin.loop.call_soon_threadsafe(lambda: twin.process.faults.clear(None, time.time_ns()))
