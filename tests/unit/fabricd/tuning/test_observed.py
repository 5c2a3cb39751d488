"""The adapter from telemetry to tuning windows, on a synthetic trace replayed through the service's ingestion."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricd.tuning.inputs import PortClass
from fabricd.tuning.observed import (
    DEFAULT_XOFF_BYTES,
    SampleLog,
    group_windows,
    lossless_ports,
    port_windows,
    replay_samples,
)
from fabricd.tuning.rules import Rule, judge_port
from policies.intent import Intent, derive_intent
from policies.policy import Policy
from tests.conftest import REPO
from topology.fabric import Fabric
from topology.load import load_fabric

from . import synth_trace

POLICY = Policy()


@pytest.fixture(scope="module")
def pod() -> tuple[Fabric, Intent]:
    spec, fabric = load_fabric(REPO / "examples" / "small-pod.yaml", None)
    return fabric, derive_intent(fabric, spec, POLICY)


def _log(pod: tuple[Fabric, Intent], trace: Path) -> SampleLog:
    fabric, intent = pod
    log = SampleLog(((d.device, p.port) for d, p in lossless_ports(intent)), priority=3)
    replay_samples(trace, fabric, log, tick_s=1.0)
    return log


def test_samples_are_the_store_at_each_tick_in_the_samples_units(pod: tuple[Fabric, Intent], tmp_path: Path) -> None:
    log = _log(pod, synth_trace.write(tmp_path / "t.jsonl", seconds=5))
    got = log.samples(synth_trace.LEAF, synth_trace.SERVER_PORT)
    # records at T0 + 0.5 s .. 4.5 s; ticks at T0 + 1 s .. 5 s, each holding the record just before it, timed when
    # the switch counted it (the record's timestamp, not the tick: a late stream is not less traffic)
    assert [s.t_s for s in got] == [synth_trace.T0 / 1e9 + k - 0.5 for k in range(1, 6)]
    assert [s.pfc_tx_pause_us for s in got] == [200_000 * k for k in range(5)]  # ns in the store, us in a Sample
    assert [s.tx_bytes for s in got] == [synth_trace.TX_BPS * k for k in range(5)]
    assert got[-1].queue_watermark_bytes == 3_000_000 and got[-1].pfc_tx_pkts == 20_000
    assert got[-1].dr_cnp_sent is None and got[-1].nic is None  # not ingested: never read as 0


def test_windows_per_class_and_the_rules_fire_on_them(pod: tuple[Fabric, Intent], tmp_path: Path) -> None:
    fabric, intent = pod
    log = _log(pod, synth_trace.write(tmp_path / "t.jsonl"))
    ports = port_windows(intent, fabric, log, POLICY)
    assert [w.subject for w in ports] == [f"{synth_trace.LEAF}:{synth_trace.SERVER_PORT}"]  # only ports with samples
    w = ports[0]
    assert w.port_class is PortClass.SERVER
    assert (w.settings.kmin_bytes, w.settings.kmax_bytes, w.settings.xoff_trigger_bytes) == (
        600_000, 6_000_000, DEFAULT_XOFF_BYTES)  # fmt: skip
    fired = {v.rule for v in judge_port(w) if v.fired}
    assert Rule.PFC_BEFORE_ECN in fired  # pauses, no marks
    groups = group_windows(intent, fabric, log)
    assert [(g.subject, g.port_class, g.mode, g.members) for g in groups] == [
        (f"{synth_trace.LEAF}:to-spine-fabric", PortClass.LEAF_SPINE, "flowlet", synth_trace.UPLINKS)
    ]
    assert groups[0].samples[-1].member_tx_bytes == dict.fromkeys(synth_trace.UPLINKS, 7 * 10**9)


def test_marking_without_pauses_does_not_fire_pfc_before_ecn(pod: tuple[Fabric, Intent], tmp_path: Path) -> None:
    fabric, intent = pod
    log = _log(pod, synth_trace.write(tmp_path / "t.jsonl", pause_ns_per_s=0, marks_per_s=1000))
    (w,) = port_windows(intent, fabric, log, POLICY)
    verdicts = {v.rule: v for v in judge_port(w)}
    assert not verdicts[Rule.PFC_BEFORE_ECN].fired
