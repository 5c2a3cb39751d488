"""DR port monitoring in the service, against the twin of examples/small-dci.yaml: a skewed DCI and a dropping DR port
become findings and tickets (no port action: nothing to disable), and /metrics carries the live alpha_LB."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from fabricd.cli import main
from lab.control_client import inject
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import twin_fixture

from .service_thread import TOKEN, ServiceThread, wait_for, write_config

LONG_HAUL = 'dci="campus-b",group="DCI campus-b long-haul ports"'


twin = twin_fixture("small-dci", scope="module")


def gauge(text: str, name: str) -> float:
    m = re.search(rf"^{name}\{{{re.escape(LONG_HAUL)}\}} (\S+)$", text, re.M)
    assert m is not None, f"{name} for the long-haul group not in /metrics"
    return float(m.group(1))


def test_skew_and_drops_become_findings_tickets_and_metrics(
    twin: TwinThread,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FABRICD_API_TOKEN", TOKEN)  # a reader's token, as `fabricd ... --api` takes it
    cfg = write_config(
        tmp_path,
        twin.inventory,
        spec=str(EXAMPLES / "small-dci.yaml"),
        detectors={"tick_s": 0.5, "dci": {"window_s": 4, "hold_s": 1}},
    )
    svc = ServiceThread(cfg).start()
    try:
        # balanced first: the live factor is there and near 1, and nothing is found
        def metrics() -> str | None:
            text = httpx.get(svc.url + "/metrics", timeout=10).text
            return text if LONG_HAUL in text else None

        text = wait_for(metrics, 15)
        assert gauge(text, "fabricd_dci_alpha_lb") > 0.97 and gauge(text, "fabricd_dci_skew") < 0.05
        assert svc.get("/api/v1/findings")["findings"] == []

        inject(twin.state_dir, "dci_imbalance", {"dci": "campus-b", "skew": 0.3})
        inject(twin.state_dir, "dci_drops", {"port": "dr-campus-b-0:Ethernet8/1", "rate": 1e-4})

        def both() -> dict[str, dict[str, object]] | None:
            found = {f["kind"]: f for f in svc.get("/api/v1/findings")["findings"]}
            return found if {"dci_imbalance", "dci_drops"} <= set(found) else None

        found = wait_for(both, 20)
        assert "hash polarization" in str(found["dci_imbalance"]["summary"])
        assert found["dci_drops"]["ports"] == ["dr-campus-b-0:Ethernet8/1"]
        tickets = {t["kind"]: t for t in wait_for(lambda: svc.get("/api/v1/tickets")["tickets"], 10)}
        assert {"dci_imbalance", "dci_drops"} <= set(tickets)
        assert "no automatic action" in str(tickets["dci_imbalance"]["body"]["status_note"])
        assert svc.get("/api/v1/actions")["actions"] == []  # nothing to disable for a skew
        # once the window holds only skewed samples: the live figures are the injected ones
        text = wait_for(lambda: (t := metrics()) and gauge(t, "fabricd_dci_skew") > 0.27 and t, 10)
        assert gauge(text, "fabricd_dci_skew") == pytest.approx(0.3, abs=0.04)
        assert gauge(text, "fabricd_dci_alpha_lb") == pytest.approx(1 / 1.15, abs=0.02)  # polarized: mean / max
        assert gauge(text, "fabricd_dci_drop_ratio") > 0 and gauge(text, "fabricd_dci_extra_compute_loss_ratio") > 0

        # per port, through the API and `fabricd dci ports --api` (the engineer's one command); each port's share
        # is over its own window, which may still hold a balanced sample a little longer than the fabric figure
        def split() -> bool:
            for g in svc.get("/api/v1/dci")["groups"]:
                if g["group"] == "DCI campus-b long-haul ports":
                    shares = [p["share"] for p in g["ports"]]
                    return bool(sum(x > 1.1 for x in shares) == 4 and sum(x < 0.9 for x in shares) == 4)
            return False

        wait_for(split, 10)
        groups = {g["group"]: g for g in svc.get("/api/v1/dci")["groups"]}
        assert set(groups) == {
            "DCI campus-b long-haul ports",
            "dr-campus-b-0 campus uplinks",
            "dr-campus-b-1 campus uplinks",
        }
        lh = groups["DCI campus-b long-haul ports"]
        assert [p["port"] for p in lh["ports"] if p["drops"]] == ["dr-campus-b-0:Ethernet8/1"]
        shares = [p["share"] for p in lh["ports"]]
        assert sum(x > 1.1 for x in shares) == 4 and sum(x < 0.9 for x in shares) == 4  # 1 +- 0.15, +- 0.02 spread
        capsys.readouterr()
        assert main(["dci", "ports", "--api", svc.url]) == 1
        out = capsys.readouterr().out
        assert "cause: hash_polarization" in out and "dr-campus-b-0:Ethernet8/1" in out
    finally:
        svc.stop()
