"""The service's tuning loop (fabricd/service/tuning/): in observe mode a window of samples from the telemetry store
becomes one audit record per proposal, once per window, on the leader only; in approve mode a change waits as an
action for `fabricd approve`; in auto mode it is pushed at once (here to a switch the inventory cannot reach: refused,
nothing left open). The switch side is in the twin tests (tests/twin/fabricd/service/test_tuning_*_twin.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from drivers.inventory import load_inventory
from fabricd.service.actuator import DriverActuator
from fabricd.service.config import ServiceConfig
from fabricd.service.remediation.context import Fence
from fabricd.service.state import Action, StateStore
from fabricd.service.state.tuning import NewTune, TuneRecord, TuneStatus
from fabricd.service.tuning import WHAT, TuningCollector, TuningJob
from fabricd.service.tuning.push import Pusher
from fabricd.telemetry.snapshot import Snapshot
from fabricd.tuning.observed import replay_samples
from tests.conftest import REPO
from topology.load import load_fabric

from . import synth_trace

FABRIC = load_fabric(REPO / "examples" / "small-pod.yaml", None)[1]
NS = 1_000_000_000
NOW = synth_trace.T0 + 10 * NS


def _job(tmp_path: Path, acting: bool = True, mode: str = "observe") -> tuple[TuningJob, StateStore]:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("devices: {}\n")  # no switch can be reached
    cfg = ServiceConfig(spec=REPO / "examples" / "small-pod.yaml", inventory=inventory,
                        tuning={"enabled": True, "window_s": 60, "mode": mode})  # fmt: skip
    state = StateStore(tmp_path / "state.db")
    pusher = Pusher(DriverActuator(load_inventory(inventory)), Fence(), lambda _d: asyncio.Lock(), 300)
    job = TuningJob(cfg, lambda: NOW, FABRIC, state, _no_snapshot, lambda: acting, pusher)
    replay_samples(synth_trace.write(tmp_path / "t.jsonl"), job.fabric, job.samples, 1.0)
    return job, state


def _open_change(state: StateStore, status: TuneStatus, why: str, at: int) -> tuple[TuneRecord, Action]:
    """A change left open by a leader before (Kmin 600,000 -> 300,000 on the synthetic leaf's server port), with its
    running `tune` action."""
    change: dict[str, int | str] = {"knob": "ecn.min_bytes", "before": 600000, "after": 300000, "low": 1, "high": 10**7}
    a = state.actions.add("tune", synth_trace.LEAF, "tuning x", "auto", "running", "Kmin down", at, key="tune:k")
    subject = f"{synth_trace.LEAF}:{synth_trace.SERVER_PORT}"
    new = NewTune("k", subject, synth_trace.LEAF, "server", "pfc_before_ecn", "pause_us_per_s", [change], "why",
                  "auto", status, why, {})  # fmt: skip
    return state.tuning.add(new, at, action_id=a.id), a


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
        ServiceConfig(spec=tmp_path / "s.yaml", inventory=tmp_path / "i.yaml", tuning={"mode": "yes"})
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


def test_approve_records_the_change_as_an_action_awaiting_approval(tmp_path: Path) -> None:
    job, state = _job(tmp_path, mode="approve")
    (p,) = asyncio.run(job.round())
    (rec,) = state.tuning.history()
    assert (rec.subject, rec.status, rec.mode) == (p.subject, "awaiting_approval", "approve")
    assert rec.rule == "pfc_before_ecn"
    c = rec.changes[0]
    assert (c["knob"], c["before"], c["after"]) == ("ecn.min_bytes", 600000, 300000)
    assert rec.kpis_before["pause_us_per_s"] > 0  # the window it was judged on
    assert rec.action_id is not None
    a = state.actions.get(rec.action_id)
    assert a is not None and (a.op, a.status, a.key) == ("tune", "awaiting_approval", f"tune:{rec.key}")
    (e,) = [e for e in state.audit.entries() if e["what"] == "tuning proposed (approve)"]
    assert f"fabricd approve {a.id}" in e["why"]
    # the next round: the change still waits, nothing proposed again for the subject (one change at a time)
    job.recorded.clear()
    assert asyncio.run(job.round()) == []
    assert len(state.tuning.history()) == 1


def test_auto_pushes_at_once_and_a_switch_out_of_reach_leaves_nothing_open(tmp_path: Path) -> None:
    job, state = _job(tmp_path, mode="auto")

    async def round_and_changes() -> None:
        await job.round()
        await job.changes.tasks.idle()

    asyncio.run(round_and_changes())
    (rec,) = state.tuning.history()
    assert rec.status == "refused" and rec.why.startswith("push unreachable:"), rec.why
    assert rec.action_id is not None
    a = state.actions.get(rec.action_id)
    assert a is not None and (a.op, a.status) == ("tune", "failed")
    assert [e["what"] for e in state.audit.entries()][:2] == ["tuning refused", "tuning proposed (auto)"]


def test_a_push_left_half_done_is_tried_again_until_its_timer_has_run_out(tmp_path: Path) -> None:
    # what a leader killed mid-push leaves: the change `applying`, its action running (a commit of it may still be
    # pending under the switch's timer, shown by the running config until the timer takes it back): the next leader
    # pushes again once that timer has run out, and only once a window more has passed does a failing push end it
    job, state = _job(tmp_path, mode="auto")
    rec, a = _open_change(state, "applying", "auto mode: applying", NOW)

    async def advance(at: int) -> None:
        job.changes.clock = lambda: at
        job.changes.advance()
        await job.changes.tasks.idle()

    asyncio.run(advance(NOW + 10 * NS))  # the old leader's commit may be pending for 300 s: not pushed before
    got = state.tuning.get(rec.id)
    assert got is not None and (got.status, got.why) == ("applying", "auto mode: applying")
    asyncio.run(advance(NOW + 320 * NS))  # pushed: the switch is out of reach, left applying, tried again next time
    got = state.tuning.get(rec.id)
    assert got is not None and got.status == "applying"
    assert state.audit.entries() == []
    asyncio.run(advance(NOW + (300 + 60 + 1) * NS))  # past the revert timer and a window
    got = state.tuning.get(rec.id)
    assert got is not None and got.status == "refused" and got.why.startswith("push unreachable")
    assert (state.actions.get(a.id) or a).status == "failed"


def test_a_port_with_a_fault_open_at_its_link_s_other_end_is_not_judged(tmp_path: Path) -> None:
    """A PFC storm from the NIC behind the leaf's server port (an active finding naming only the NIC's end): the
    round records nothing for that port and says why; once the finding clears, the same window's proposal is."""
    from fabricd.detectors.finding import Finding

    job, state = _job(tmp_path)
    peer = FABRIC.peer(synth_trace.LEAF, synth_trace.SERVER_PORT)
    assert peer is not None
    nic = f"{peer.device}:{peer.port}"
    storm = Finding("pfc_storm", peer.device, peer.port, (peer.device,), (nic,), NOW - NS, NOW, "critical", 0.9,
                    "storm", priority=3)  # fmt: skip
    fid, _ = state.findings.record(storm, "storm", NOW)
    assert asyncio.run(job.round()) == []
    subject = f"{synth_trace.LEAF}:{synth_trace.SERVER_PORT}"
    assert [(s.subject, s.why) for s in job.skipped] == [(subject, f"pfc_storm finding {fid}")]
    assert not [e for e in state.audit.entries() if e["what"] == WHAT]
    state.findings.close(fid, NOW)
    (p,) = asyncio.run(job.round())
    assert p.subject == subject and job.skipped == []


def test_a_fault_that_opens_while_a_change_is_verified_rolls_it_back(tmp_path: Path) -> None:
    """A change being verified when a PFC storm opens at its port's other end: its window is the storm's counters as
    much as the change's, so it is not judged at all but rolled back at once, and the ledger says why (here the
    switch is out of reach: the roll back stays to be pushed again, `rolling_back`)."""
    from fabricd.detectors.finding import Finding

    job, state = _job(tmp_path, mode="auto")
    rec, _ = _open_change(state, "verifying", "applied; verifying", NOW - NS)
    state.tuning.update(rec.id, "verifying", "applied; verifying", applied_ts=NOW - NS)
    subject = rec.subject

    async def round_and_changes() -> None:
        await job.round()
        await job.changes.tasks.idle()

    asyncio.run(round_and_changes())  # nothing open: the change waits for its verify window
    got = state.tuning.get(rec.id)
    assert got is not None and got.status == "verifying"
    peer = FABRIC.peer(synth_trace.LEAF, synth_trace.SERVER_PORT)
    assert peer is not None
    storm = Finding("pfc_storm", peer.device, peer.port, (peer.device,), (f"{peer.device}:{peer.port}",), NOW - NS,
                    NOW, "critical", 0.9, "storm", priority=3)  # fmt: skip
    fid, _ = state.findings.record(storm, "storm", NOW)
    asyncio.run(round_and_changes())
    got = state.tuning.get(rec.id)
    assert got is not None and got.status == "rolling_back"
    assert got.why == (f"pfc_storm finding {fid} opened on {subject} while the change was verified: not judged "
                       "across a fault; rolled back to the values before")  # fmt: skip
    assert len(state.tuning.history()) == 1  # nothing new proposed for the subject meanwhile
