"""Telemetry worker processes: hash ranges, batches that mirror a worker's store into the parent's, N workers
against the twin (sync, rates, a dropped stream, a killed worker), and `fabricd run --workers` end to end."""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from pydantic import SecretStr
from typer.testing import CliRunner

import fabricd.cli
from drivers.inventory import DeviceAccess, EapiAccess, GnmiAccess, SshAccess
from fabricd.service.config import ConfigError, load_config, max_workers
from fabricd.telemetry import CounterStore, Ingestor, Stat, TelemetryClient, TelemetryMetrics, TelemetryWorkers
from fabricd.telemetry.series import NEVER
from fabricd.telemetry.store import StoreChanges
from fabricd.telemetry.worker_process import _Shipper
from fabricd.telemetry.worker_wire import Batch
from fabricd.telemetry.workers import _Mirror, worker_of
from lab.control_client import call, inject
from lab.counters import COL
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import fabricd_run, wait_for, write_config
from tests.unit.fabricd.telemetry import IF, T0, S, notification
from topology.spec import FabricSpec

from .helpers import accesses, until
from .test_client import INTERVAL, LIGHT, metric

PKTS = "/state/counters/in-pkts"
OPER = "/state/oper-status"


# --- units ----------------------------------------------------------------------------------------------------
def test_worker_of_is_stable_and_spreads_devices() -> None:
    names = [f"leaf-g{g}-r{r}" for g in range(64) for r in range(8)]
    assert {worker_of(n, 1) for n in names} == {0}
    for workers in (2, 3, 4):
        counts = np.bincount([worker_of(n, workers) for n in names], minlength=workers)
        assert len(counts) == workers and counts.min() > 0.75 * len(names) / workers  # no range starves
    # crc32, not hash(): the same device lands on the same worker in every run (pinned, so a change is noticed)
    assert [worker_of(n, 4) for n in ("leaf-g0-r0", "leaf-g0-r1", "spine-r0-0", "ssp-0")] == [2, 3, 2, 1]


def _devices(*names: str) -> list[DeviceAccess]:
    gnmi = GnmiAccess(tls=False)
    return [DeviceAccess(n, "192.0.2.1", "eos", "u", SecretStr("x"), gnmi, EapiAccess(), SshAccess()) for n in names]


class _Worker:
    """A worker's store, ingestor and shipper without the process (batches go through pickle as in the pipe)."""

    def __init__(self, *names: str) -> None:
        self.ingestor = Ingestor(CounterStore(capacity=4))
        self.client = TelemetryClient(_devices(*names), self.ingestor)  # never run: only its device states
        self.shipper = _Shipper(self.ingestor.store, self.client)

    def feed(self, device: str, ts: int, port: str, updates: list[tuple[str, object]]) -> None:
        self.ingestor.ingest(notification(device, ts, IF.format(port=port), updates), device)

    def batch(self) -> StoreChanges | None:
        """The store changes of the worker's next batch, through pickle as in the pipe."""
        self.ingestor.flush()
        b = self.shipper.collect()
        if b is None:
            return None
        shipped: Batch = pickle.loads(pickle.dumps(b, protocol=5))
        return shipped.changes


def _series(store: CounterStore) -> dict[tuple[str, str, str, str | None], tuple[object, ...]]:
    """Every series with a sample: (current value, ts, prev_ts, rate or None)."""
    snap = store.snapshot()
    return {
        snap.key(i): (snap.current(i), int(snap.ts[i]), int(snap.prev_ts[i]), None if rate != rate else rate)
        for i, rate in enumerate(snap.rate.tolist())
        if snap.ts[i] != NEVER
    }


def _events(store: CounterStore) -> list[tuple[str, str, str, str | None, int]]:
    return [(e.device, e.port, e.value, e.previous, e.ts) for e in store.snapshot().events_since(0)]


def test_batches_mirror_the_worker_store() -> None:
    w = _Worker("leaf-a", "leaf-b")
    parent = CounterStore(capacity=4)
    mirror = _Mirror(parent)
    for k, ts in enumerate((T0, T0 + 10 * S)):
        w.feed("leaf-a", ts, "Ethernet1/1", [(PKTS, 1000 + 500 * k), (OPER, "UP")])
        w.feed("leaf-a", ts, "Ethernet2/1", [(PKTS, 7 + k)])
        w.feed("leaf-b", ts, "Ethernet1/1", [(PKTS, 10**6 * (k + 1))])
    first = w.batch()
    assert first is not None and first.devices == ["leaf-a", "leaf-b"]
    assert sorted(first.port_names) == ["Ethernet1/1", "Ethernet1/1", "Ethernet2/1"]
    mirror.apply(first)
    assert _series(parent) == _series(w.ingestor.store)
    assert _series(parent)[("leaf-a", "Ethernet1/1", "if.in-pkts", None)] == (1500, T0 + 10 * S, T0, 50.0)
    assert _events(parent) == _events(w.ingestor.store) == [("leaf-a", "Ethernet1/1", "UP", None, T0)]
    for stat in Stat:
        assert parent.stats[parent.device_id("leaf-a"), stat] == w.ingestor.store.stats[0, stat]
    assert parent.last_seen[parent.device_id("leaf-b")] == T0 + 10 * S

    assert w.batch() is None  # nothing changed, nothing sent
    w.feed("leaf-a", T0 + 20 * S, "Ethernet1/1", [(PKTS, 4000), (OPER, "DOWN")])
    second = w.batch()
    assert second is not None
    assert (second.devices, second.port_names, second.codes, len(second.s_port)) == ([], [], [], 0)  # names once
    assert len(second.sidx) == 2  # only the two series that moved
    mirror.apply(second)
    assert _series(parent) == _series(w.ingestor.store)
    assert _series(parent)[("leaf-a", "Ethernet1/1", "if.in-pkts", None)][3] == 250.0
    assert _events(parent)[-1] == ("leaf-a", "Ethernet1/1", "DOWN", "UP", T0 + 20 * S)
    assert parent.stats[parent.device_id("leaf-a"), Stat.UPDATES] == 8


def test_restarted_worker_keeps_counts_and_known_states() -> None:
    parent = CounterStore(capacity=4)
    w = _Worker("leaf-a")
    w.feed("leaf-a", T0, "Ethernet1/1", [(PKTS, 100), (OPER, "DOWN")])
    w.feed("leaf-a", T0 + S, "Ethernet1/1", [(PKTS, 200)])
    first = w.batch()
    assert first is not None
    _Mirror(parent).apply(first)
    updates = int(parent.stats[0, Stat.UPDATES])
    # The worker dies; its successor starts from an empty store and re-reads the same state.
    again = _Worker("leaf-a")
    mirror = _Mirror(parent)
    again.feed("leaf-a", T0 + 2 * S, "Ethernet1/1", [(PKTS, 300), (OPER, "DOWN")])
    b = again.batch()
    assert b is not None
    mirror.apply(b)
    assert _events(parent) == [("leaf-a", "Ethernet1/1", "DOWN", None, T0)]  # DOWN again is no change
    assert int(parent.stats[0, Stat.UPDATES]) == updates + 2  # counts go on, never back
    assert _series(parent)[("leaf-a", "Ethernet1/1", "if.in-pkts", None)] == (300, T0 + 2 * S, NEVER, None)
    again.feed("leaf-a", T0 + 3 * S, "Ethernet1/1", [(PKTS, 400), (OPER, "UP")])
    b = again.batch()
    assert b is not None
    mirror.apply(b)
    assert _events(parent)[-1] == ("leaf-a", "Ethernet1/1", "UP", "DOWN", T0 + 3 * S)
    assert _series(parent)[("leaf-a", "Ethernet1/1", "if.in-pkts", None)][3] == 100.0


def test_workers_setting_is_validated(tmp_path: Path) -> None:
    conf = tmp_path / "fabricd.yaml"
    base = "spec: spec.yaml\ninventory: inventory.yaml\n"
    conf.write_text(base + "telemetry: {workers: 2}\n")
    assert load_config(conf, {}).telemetry.workers == 2
    assert load_config(tmp_path / "fabricd.yaml", {"FABRICD_TELEMETRY__WORKERS": "3"}).telemetry.workers == 3
    for text, field, words in (
        ("telemetry: {workers: 0}", "telemetry.workers", "greater than or equal to 1"),
        (f"telemetry: {{workers: {max_workers() + 1}}}", "telemetry.workers", f"at most {max_workers()}"),
        ("telemetry: {workers: 2, record: t.jsonl}", "telemetry", "record needs workers: 1"),
    ):
        conf.write_text(base + text + "\n")
        with pytest.raises(ConfigError) as e:
            load_config(conf, {})
        assert e.value.field == field and words in str(e.value)
    conf.write_text(base)
    result = CliRunner().invoke(fabricd.cli.app, ["run", "--config", str(conf), "--workers", "0"])
    assert result.exit_code == 2 and "--workers" in result.output and "greater than or equal to 1" in result.output


def test_recording_needs_the_in_process_client() -> None:
    class Sink:
        def record(self, device: str, path: str, value: object, ts: int) -> None: ...

    with pytest.raises(ValueError, match="workers=1"):
        TelemetryWorkers(_devices("leaf-a"), Ingestor(CounterStore(), recorder=Sink()), workers=2)


def test_stop_before_run_starts_no_process() -> None:
    c = TelemetryWorkers(_devices("leaf-a", "leaf-b", "leaf-c"), Ingestor(CounterStore()), workers=2)

    async def go() -> None:
        task = asyncio.create_task(c.run())
        await c.stop()
        await asyncio.wait_for(task, 2)

    asyncio.run(go())
    assert all(c.pid(k) is None for k in c.workers) and not any(c.synced.values())


# --- against the twin -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def twin(small_spec: FabricSpec, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(small_spec, tmp_path_factory.mktemp("twin-workers")).start()
    yield t
    t.stop()


def test_two_workers_stream_into_one_store(twin: TwinThread, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    devices = accesses(twin)
    password = devices[0].password.get_secret_value()
    names = [d.name for d in devices]
    registry = CollectorRegistry()
    c = TelemetryWorkers(
        devices,
        Ingestor(CounterStore()),
        workers=2,
        profile=LIGHT,
        interval_s=INTERVAL,
        metrics=TelemetryMetrics(registry),
        backoff_base_s=0.05,
        backoff_cap_s=0.4,
        healthy_s=0.5,
        restart_base_s=0.2,
        hang_s=3.0,
    )
    owned = c.workers
    assert sorted(owned) == [0, 1] and sorted(owned[0] + owned[1]) == sorted(names)
    truth = twin.process.twin.switches
    dev = owned[1][0]  # its stream is dropped

    def rates_are_right(dev: str) -> bool:
        """Every in-pkts rate in the parent store is the twin's packet rate of that port."""
        snap = c.ingestor.snapshot()
        rows = snap.select(device=dev, leaf="if.in-pkts")
        sw = truth[dev]
        want = np.array([sw.rate[sw.index[snap.key(int(i))[1]], COL["if.in-pkts"]] for i in rows])
        return len(rows) == len(sw.ports) and bool(np.allclose(snap.rate[rows], want, rtol=1e-3, atol=50))

    async def go() -> None:
        task = asyncio.create_task(c.run())
        try:
            assert await c.wait_synced(30)
            await until(lambda: all(rates_are_right(n) for n in names), 5)  # rates need a second sample
            assert c.stale_devices() == [] and all(c.synced.values())
            snap = c.ingestor.snapshot()
            for name in names:
                assert (
                    snap.stat(name, Stat.UPDATES) > 0 and snap.stat(name, Stat.SYNCS) == 2
                )  # ON_CHANGE + SAMPLE calls
                assert {snap.text(int(i)) for i in snap.select(device=name, leaf="oper-status")} == {"UP"}
                assert c.state(name).connected and c.state(name).attempts == 1
            text = generate_latest(registry).decode()
            for name in names:
                assert metric(text, "fabricd_telemetry_connected", name) == 1
                assert metric(text, "fabricd_telemetry_synced", name) == 1
                assert metric(text, "fabricd_telemetry_updates_total", name) > 0
            assert 'fabricd_telemetry_worker_up{worker="0"} 1.0' in text
            assert 'fabricd_telemetry_worker_up{worker="1"} 1.0' in text
            count = re.search(r"^fabricd_telemetry_lag_seconds_count (\S+)$", text, re.M)
            assert count is not None and float(count.group(1)) >= len(names)  # lag observed in the workers

            # A dropped stream: stale after 3 intervals, back once the twin accepts subscriptions again.
            await asyncio.to_thread(inject, twin.state_dir, "gnmi_drop", {"device": dev, "seconds": 1.0})
            await until(lambda: dev in c.stale_devices(), 3)
            assert c.stale_devices() == [dev] and c.state(dev).last_error == "UNAVAILABLE"
            await until(lambda: dev not in c.stale_devices() and c.synced[dev], 6)
            assert c.state(dev).attempts >= 2
            text = generate_latest(registry).decode()
            assert metric(text, "fabricd_telemetry_reconnects_total", dev) == c.state(dev).attempts - 1

            # A killed worker: noticed at once (its devices not synced), restarted, streaming again.
            victim, pid = owned[0], c.pid(0)
            assert pid is not None
            before = {n: c.ingestor.snapshot().stat(n, Stat.UPDATES) for n in victim}
            os.kill(pid, signal.SIGKILL)
            await until(lambda: not any(c.synced[n] for n in victim), 3)
            assert all(c.synced[n] for n in owned[1])  # the other worker's devices are untouched
            await until(lambda: c.pid(0) not in (None, pid) and all(c.synced[n] for n in victim), 20)
            await until(lambda: not c.stale_devices() and all(rates_are_right(n) for n in victim), 5)
            snap = c.ingestor.snapshot()
            assert all(snap.stat(n, Stat.UPDATES) > before[n] for n in victim)  # counts go on from where they were
            assert all(c.state(n).attempts == 2 for n in victim)  # the restart re-opened each stream once
            text = generate_latest(registry).decode()
            assert 'fabricd_telemetry_worker_restarts_total{worker="0"} 1.0' in text
            assert 'fabricd_telemetry_worker_restarts_total{worker="1"} 0.0' in text

            # A hung worker (stopped, its socket still open): killed after hang_s of silence, then restarted.
            pid = c.pid(1)
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
            await until(lambda: c.pid(1) not in (None, pid) and all(c.synced[n] for n in owned[1]), 20)
            assert 'fabricd_telemetry_worker_restarts_total{worker="1"} 1.0' in generate_latest(registry).decode()
        finally:
            await asyncio.wait_for(c.stop(), 15)
            await task

    asyncio.run(go())
    assert c.pid(0) is None and c.pid(1) is None
    killed = [r for r in caplog.records if "telemetry worker 0" in r.getMessage()]
    assert len(killed) == 1 and killed[0].levelno == logging.WARNING and "SIGKILL" in killed[0].getMessage()
    hung = [r.getMessage() for r in caplog.records if "telemetry worker 1" in r.getMessage()]
    assert len(hung) == 2 and re.search(r"sent nothing for [34] s; killing it", hung[0]) and "SIGKILL" in hung[1]
    forwarded = [r for r in caplog.records if r.name == "fabricd.telemetry.client" and dev in r.getMessage()]
    assert any("UNAVAILABLE" in r.getMessage() for r in forwarded)  # the worker's log lines reach ours
    assert password not in caplog.text


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def test_a_worker_ships_an_oper_status_event_at_once_not_with_its_next_batch(twin: TwinThread) -> None:
    """A worker ships what changed every `ship_s`; a batch with new events (an ON_CHANGE oper-status change) goes at
    once, and the parent's store tells its listener. With 5 s between batches, a link going down reaches the parent
    in well under a second."""
    devices = accesses(twin)
    store = CounterStore()
    c = TelemetryWorkers(devices, Ingestor(store), workers=1, profile=LIGHT, interval_s=INTERVAL, ship_s=5.0)
    leaf = next(d.name for d in devices if d.name.startswith("leaf"))
    sw = twin.process.twin.switches[leaf]
    port = next(p for p in sw.ports if twin.process.twin.peer(leaf, p) is not None)
    woke: list[float] = []

    def down() -> bool:
        snap = store.snapshot()
        i = snap.find(leaf, port, "oper-status")
        return i is not None and snap.text(i) == "DOWN"

    async def go() -> float:
        task = asyncio.create_task(c.run())
        try:
            assert await c.wait_synced(30)
            await asyncio.sleep(0.2)  # past the first batches, which go at once
            store.on_event.append(lambda: woke.append(time.monotonic()))
            t0 = time.monotonic()
            fault = await asyncio.to_thread(inject, twin.state_dir, "link_down", {"port": f"{leaf}:{port}"})
            took = await until(down, 4) - t0
            await asyncio.to_thread(call, twin.state_dir, "DELETE", f"/faults/{fault['id']}")
            return took
        finally:
            await c.stop()
            await task

    took = asyncio.run(go())
    assert took < 2.0  # not the 5 s between batches
    assert woke  # the parent's store told its listener (the service's pass loop wakes on it)


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_fabricd_run_with_workers_leaves_no_orphans(twin: TwinThread, tmp_path: Path) -> None:
    """`fabricd run --workers 2` streams every switch through two processes; SIGKILL of the service ends them."""
    cfg = write_config(tmp_path, twin.inventory)
    n = len(accesses(twin))
    d = fabricd_run(cfg, tmp_path / "fabricd.log", "--workers", "2")
    url, proc, log = d.url, d.proc, d.log
    workers: list[int] = []
    try:

        def synced() -> bool:
            assert proc.poll() is None, log.read_text()[-2000:]
            try:
                return bool(httpx.get(url + "/api/v1/health", timeout=2).json()["telemetry"]["synced"] == n)
            except httpx.HTTPError:
                return False

        wait_for(synced, 40)
        workers = [p for p in _children(proc.pid) if b"worker_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(workers) == 2
        secret = accesses(twin)[0].password.get_secret_value().encode()
        for p in workers:  # the passwords go over the socket only
            assert secret not in Path(f"/proc/{p}/cmdline").read_bytes()
            assert secret not in Path(f"/proc/{p}/environ").read_bytes()
        metrics = httpx.get(url + "/metrics", timeout=5).text
        assert 'fabricd_telemetry_worker_up{worker="1"} 1.0' in metrics
    finally:
        d.kill()
    wait_for(lambda: not any(_alive(p) for p in workers), 10)  # they notice the closed socket and exit
