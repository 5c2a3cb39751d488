"""A tuning change across a leader failover (issue 51): two `fabricd run` processes on one config (a real
nats-server for the lease, a real PostgreSQL for the shared state, where the ledger records each step of a change
before the next), the small-pod twin with the bad start of test_tuning_apply_twin.py (ECN above XOFF on a leaf's
server ports) and an incast. The leader applies the correction in auto mode and is killed with -9 inside its verify
window (or as soon as the change is recorded); the standby takes over and ends the change: applied once (one action,
one push in the audit), verified by the new leader, the switch running what the ledger says."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from fabricd.bus import LocalBus
from lab.control_client import call
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import TTL, Fabricd, hot_pair, twin_fixture, wait_for, write_config

from .test_tuning_apply_twin import FAST, SUBJECT, bad_start, ecn_line

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

twin = twin_fixture(scope="module")


def change(inst: Fabricd, *statuses: str) -> dict[str, Any] | None:
    try:
        rows = inst.get("/api/v1/tuning/history", changes="true")["changes"]
    except httpx.HTTPError:
        return None
    return next((c for c in rows if c["subject"] == SUBJECT and c["status"] in statuses), None)


@pytest.mark.parametrize("kill_at", ["applying", "verifying"])
def test_a_leader_killed_mid_change_the_standby_ends_it_once(
    kill_at: str, twin: TwinThread, nats_bus: LocalBus, postgres_url: str, tmp_path: Path
) -> None:
    """`verifying`: killed inside the verify window (the standby judges it from its own samples). `applying`: killed
    as soon as the change is recorded (before, during or just after its push: the standby pushes again, which finds
    it running if it had landed, or waits out a commit left pending under its timer)."""
    policy = bad_start(twin, tmp_path)
    bad = ecn_line(twin)
    config = write_config(tmp_path, twin.inventory, policy=str(policy), state={"url": postgres_url},
                          ha={"enabled": True, "lease_ttl_s": TTL}, bus={"urls": [nats_bus.url]},
                          remediation={"mode": "observe"}, telemetry={"interval_s": 0.1},
                          tuning={**FAST, "mode": "auto", "verify_s": 6, "revert_in_s": 30})  # fmt: skip
    call(twin.state_dir, "POST", "/workloads", {"kind": "incast", "params": {"port": SUBJECT, "fan_in": 7}})
    try:
        with hot_pair(config, tmp_path) as (a, b):
            states = ("applying", "verifying") if kill_at == "applying" else ("verifying",)
            c = wait_for(lambda: change(a, *states), 60, every_s=0.02)
            if kill_at == "verifying":
                assert ecn_line(twin) != bad  # applied by a
            a.kill()  # inside its verify window: nothing of it says goodbye
            killed = time.time_ns()
            wait_for(lambda: b.role() == "leader", 20, every_s=0.05)  # TTL 2 s; a loaded CI host is slower
            done = wait_for(lambda: change(b, "confirmed", "rolled_back"), 90, every_s=0.5)
            assert done["id"] == c["id"] and done["ended_ts"] > killed, done  # ended by b, after a died
            assert done["status"] == "confirmed", done
            assert ecn_line(twin) != bad  # the switch runs what the ledger says
            # applied exactly once: one action of its key, one push in the audit, never a second one by b
            actions = [x for x in b.get("/api/v1/actions")["actions"] if x["key"] == f"tune:{c['key']}"]
            assert [(x["op"], x["status"]) for x in actions] == [("tune", "done")], actions
            audit = b.get("/api/v1/audit", limit=1000)["audit"]
            applied = [e for e in audit if e["what"] == "tuning applied" and f"[key {c['key']}]" in e["why"]]
            assert len(applied) == 1, applied
            ended = [e for e in audit if e["what"] == "tuning confirmed" and f"[key {c['key']}]" in e["why"]]
            assert len(ended) == 1 and ended[0]["ts"] > killed, ended
    finally:
        call(twin.state_dir, "DELETE", "/workloads")
