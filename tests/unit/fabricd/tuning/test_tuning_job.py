"""The service's tuning loop in observe mode (fabricd/service/tuning_job.py): a window of samples from the telemetry
store becomes one audit record per proposal, once per window, on the leader only; nothing else is written."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabricd.service.config import ServiceConfig
from fabricd.service.state import StateStore
from fabricd.service.tuning_job import WHAT, TuningCollector, TuningJob
from fabricd.telemetry.snapshot import Snapshot
from fabricd.tuning.observed import replay_samples
from tests.conftest import REPO
from topology.load import load_fabric

from . import synth_trace

FABRIC = load_fabric(REPO / "examples" / "small-pod.yaml", None)[1]
NOW = synth_trace.T0 + 10 * 1_000_000_000


def _job(tmp_path: Path, acting: bool = True) -> tuple[TuningJob, StateStore]:
    cfg = ServiceConfig(spec=REPO / "examples" / "small-pod.yaml", inventory=tmp_path / "inventory.yaml",
                        tuning={"enabled": True, "window_s": 60})  # fmt: skip
    state = StateStore(tmp_path / "state.db")
    job = TuningJob(cfg, lambda: NOW, FABRIC, state, _no_snapshot, lambda: acting)
    replay_samples(synth_trace.write(tmp_path / "t.jsonl"), job.fabric, job.samples, 1.0)
    return job, state


def _no_snapshot() -> Snapshot:
    raise AssertionError("the samples come from the trace here")


def test_observe_records_each_proposal_once_a_window(tmp_path: Path) -> None:
    job, state = _job(tmp_path)
    (p,) = asyncio.run(job.round())
    assert p.subject == f"{synth_trace.LEAF}:{synth_trace.SERVER_PORT}"
    (e,) = [e for e in state.audit.entries() if e["what"] == WHAT]
    assert "ecn.min_bytes: 600000 -> 300000" in e["why"] and "pfc_before_ecn" in e["why"] and e["mode"] == "observe"
    assert asyncio.run(job.round()) == []  # the same window: not recorded twice
    assert len([e for e in state.audit.entries() if e["what"] == WHAT]) == 1


def test_a_standby_records_nothing(tmp_path: Path) -> None:
    job, state = _job(tmp_path, acting=False)
    assert asyncio.run(job.round()) == []
    assert [e for e in state.audit.entries() if e["what"] == WHAT] == []


def test_tuning_is_off_by_default_and_strict(tmp_path: Path) -> None:
    cfg = ServiceConfig(spec=tmp_path / "s.yaml", inventory=tmp_path / "i.yaml")
    assert cfg.tuning.enabled is False and cfg.tuning.mode == "observe"
    with pytest.raises(ValueError, match="mode"):
        ServiceConfig(spec=tmp_path / "s.yaml", inventory=tmp_path / "i.yaml", tuning={"mode": "auto"})
    with pytest.raises(ValueError, match="windw_s"):
        ServiceConfig(spec=tmp_path / "s.yaml", inventory=tmp_path / "i.yaml", tuning={"windw_s": 5})


def test_metrics_count_the_last_window(tmp_path: Path) -> None:
    job, _ = _job(tmp_path)
    registry = CollectorRegistry()
    registry.register(TuningCollector(job))
    assert registry.get_sample_value("fabricd_tuning_recorded") == 0
    asyncio.run(job.round())
    labels = {"rule": "pfc_before_ecn", "port_class": "server"}
    assert registry.get_sample_value("fabricd_tuning_rule_fired_subjects", labels) == 1
    assert registry.get_sample_value("fabricd_tuning_proposals", {"port_class": "server"}) == 1
    assert registry.get_sample_value("fabricd_tuning_recorded") == 1
