"""The twin's DCI: balanced DR ports, ECMP rehash when a member goes down, and the dci_imbalance / dci_drops faults."""

from __future__ import annotations

import pytest

from lab.counters import COL
from lab.faults import FaultError, FaultInjector
from lab.model import Twin
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.spec import load_spec
from topology.units import NS

T0 = 1_700_000_000 * NS


@pytest.fixture
def twin() -> Twin:
    fabric = Fabric(complete_labels(generate_blueprint(load_spec(EXAMPLES / "small-dci.yaml"))))
    return Twin(fabric, clock=lambda: T0)


def out_rates(twin: Twin, column: str = "if.out-octets") -> dict[str, float]:
    return {
        f"{e.device}:{e.port}": float(twin.switch(e.device).rate[twin.switch(e.device).index[e.port], COL[column]])
        for e in twin.dci_ports["campus-b"]
    }


def skew(rates: dict[str, float]) -> float:
    vals = list(rates.values())
    return (max(vals) - min(vals)) / (sum(vals) / len(vals))


def test_dci_ports_are_one_balanced_group(twin: Twin) -> None:
    assert sorted(twin.dci_ports) == ["campus-b"] and len(twin.dci_ports["campus-b"]) == 8
    rates = out_rates(twin)
    assert skew(rates) <= 0.04  # +-2 % around the group's share
    assert sum(rates.values()) / len(rates) == pytest.approx(0.5 * 400e9 / 8, rel=0.02)


@pytest.mark.parametrize("pattern", ["polarized", "spread"])
@pytest.mark.parametrize("s", [0.1, 0.2, 0.4])
def test_imbalance_skews_the_shares_and_keeps_the_total(twin: Twin, pattern: str, s: float) -> None:
    before = out_rates(twin)
    rec = FaultInjector(twin).inject("dci_imbalance", {"dci": "campus-b", "skew": s, "pattern": pattern}, T0 + NS)
    after = out_rates(twin)
    assert skew(after) == pytest.approx(s, abs=0.045)
    assert sum(after.values()) == pytest.approx(sum(before.values()), rel=0.01)
    # the queues and packet counts follow the octets
    pk = out_rates(twin, "if.out-pkts")
    assert skew(pk) == pytest.approx(skew(after), rel=1e-6)
    assert len(rec.ports) == 8


def test_clear_restores_the_balance(twin: Twin) -> None:
    inj = FaultInjector(twin)
    before = out_rates(twin)
    inj.inject("dci_imbalance", {"dci": "campus-b", "skew": 0.4}, T0 + NS)
    inj.clear(now_ns=T0 + 2 * NS)
    assert out_rates(twin) == pytest.approx(before)


def test_a_member_down_moves_its_share_to_the_others(twin: Twin) -> None:
    before = out_rates(twin)
    gone = twin.dci_ports["campus-b"][2]
    FaultInjector(twin).inject("link_down", {"port": f"{gone.device}:{gone.port}"}, T0 + NS)
    after = out_rates(twin)
    assert after[f"{gone.device}:{gone.port}"] == 0
    up = [k for k in after if k != f"{gone.device}:{gone.port}"]
    assert sum(after[k] for k in up) == pytest.approx(sum(before.values()), rel=0.02)


def test_drops_count_discards_and_queue_drops(twin: Twin) -> None:
    port = "dr-campus-b-1:Ethernet6/1"
    FaultInjector(twin).inject("dci_drops", {"port": port, "rate": 1e-3}, T0 + NS)
    sent = out_rates(twin, "if.out-pkts")[port]
    dropped = out_rates(twin, "if.out-discards")[port]
    assert dropped / (dropped + sent) == pytest.approx(1e-3)
    assert out_rates(twin, "q3.dropped-pkts")[port] == pytest.approx(dropped)
    assert sum(v for k, v in out_rates(twin, "if.out-discards").items() if k != port) == 0


@pytest.mark.parametrize(
    ("kind", "params", "message"),
    [
        ("dci_imbalance", {"dci": "mars"}, "dci must name a DCI of this twin (campus-b)"),
        ("dci_imbalance", {"dci": "campus-b", "skew": 3}, "skew must be between 0 and 1.5"),
        ("dci_imbalance", {"dci": "campus-b", "pattern": "zigzag"}, "pattern must be polarized or spread"),
        ("dci_drops", {"port": "leaf-g0-r0:Ethernet1/1"}, "must be a port of a DR switch"),
        ("dci_drops", {"port": "dr-campus-b-0:Ethernet5/1", "rate": 2}, "rate must be between"),
    ],
)
def test_bad_fault_requests_say_what_to_fix(twin: Twin, kind: str, params: dict[str, object], message: str) -> None:
    with pytest.raises(FaultError, match=message.replace("(", r"\(").replace(")", r"\)")):
        FaultInjector(twin).inject(kind, params, T0 + NS)


def test_optics_wander_is_small_and_degrade_grows_by_the_hour() -> None:
    from topology.units import NS as _NS

    fabric = Fabric(complete_labels(generate_blueprint(load_spec(EXAMPLES / "small-pod.yaml"))))
    clock = [T0]
    twin = Twin(fabric, clock=lambda: clock[0])
    sw = twin.switch("leaf-g0-r1")
    row = sw.index["Ethernet2/1"]
    nominal = float(sw.rx_power_nominal[row])
    readings = []
    for minute in range(0, 24 * 60, 10):  # a day: the daily cycle and the noise stay within a quarter dB
        twin.advance(T0 + minute * 60 * _NS)
        readings.append(twin.rx_power(sw, row) - nominal)
    assert max(abs(r) for r in readings) <= 0.25 and max(readings) - min(readings) > 0.2
    inj = FaultInjector(twin)
    start = T0 + 24 * 3600 * _NS
    inj.inject("optics_degrade", {"port": "leaf-g0-r1:Ethernet2/1", "db_per_hour": 0.5}, start)
    twin.advance(start + 4 * 3600 * _NS)
    assert twin.optics_loss_db[("leaf-g0-r1", "Ethernet2/1")] == pytest.approx(2.0, abs=0.01)
    assert float(sw.rx_power[row]) == pytest.approx(nominal - 2.0, abs=0.01)
    assert float(sw.pre_fec_ber[row]) > 2e-8  # BER follows the loss
    with pytest.raises(FaultError, match="already loses optical power"):
        inj.inject("optics_degrade", {"port": "leaf-g0-r1:Ethernet2/1"}, start + 5 * 3600 * _NS)
    inj.clear(now_ns=start + 5 * 3600 * _NS)
    twin.advance(start + 6 * 3600 * _NS)
    assert ("leaf-g0-r1", "Ethernet2/1") not in twin.optics_loss_db
    assert float(sw.rx_power[row]) == pytest.approx(nominal)
