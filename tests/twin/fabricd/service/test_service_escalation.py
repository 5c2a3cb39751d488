"""50 ports of one leaf flap at once: fabricd disables at most its budget and opens one escalation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.control_client import inject
from tests.conftest import DATA
from tests.twin.lab.twin_thread import TwinThread
from topology.spec import load_spec

from .service_thread import ServiceThread, wait_for, write_config

SPEC = DATA / "wide-leaf.yaml"


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(SPEC), tmp_path_factory.mktemp("wide")).start()
    yield t
    t.stop()


def test_fifty_flaps_on_one_leaf_disable_the_budget_and_escalate_once(twin: TwinThread, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, twin.inventory, spec=str(SPEC), safety={"max_down_per_switch": 2})
    svc = ServiceThread(cfg).start()
    try:
        for n in range(1, 51):
            inject(twin.state_dir, "link_flap", {"port": f"leaf-g0-r0:Ethernet{n}/1", "count": 8, "period_s": 0.3})

        def escalation() -> list[dict[str, Any]]:
            return [t for t in svc.get("/api/v1/tickets")["tickets"] if t["kind"] == "escalation"]

        (esc,) = wait_for(lambda: [t for t in escalation() if len(t["body"]["faulty_ports"]) >= 45], 20)
        wait_for(lambda: len(svc.get("/api/v1/ports/disabled")["ports"]) == 2, 10)
        assert esc["device"] == "leaf-g0-r0" and esc["escalation"]
        assert "leaf-g0-r0 itself" in esc["body"]["likely_common_cause"]
        tickets = svc.get("/api/v1/tickets")["tickets"]
        actions = svc.get("/api/v1/actions")["actions"]
        why = [(a["id"], a["port"], a["status"], a.get("detail")) for a in actions if a["status"] != "refused"]
        assert len(escalation()) == 1
        # The two ports fabricd took down have their own tickets; the rest are on the escalation only.
        assert sorted(t["kind"] for t in tickets if not t["escalation"]) == ["link_flap", "link_flap"], why
        assert sum(a["status"] == "done" for a in actions) == 2
        assert all(a["status"] in ("done", "refused") for a in actions)
        refused = [a for a in actions if a["status"] == "refused"]
        assert len(refused) >= 43 and len(refused) == len(actions) - 2  # every other faulty port
        assert all("limit" in a["reason"] for a in refused), refused[0]  # each names the budget that held
    finally:
        svc.stop()
