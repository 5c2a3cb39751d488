"""SONiC per release (reference/sonic-releases.md): the twin of small-sonic on 202305, 202405 and 202411 serves that
release's sonic-gnmi virtual paths (Pfcwd yields no row before 202411; RATES exists from 202411), and the service
plans, streams, decodes and detects on each: the watchdog counters come from the queue rows on every release, the
pre-FEC BER from RATES where it exists, and health and `fabricd status` say what an older release leaves degraded.
A link flap on the SONiC leaf is found on every release."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from drivers.inventory import load_inventory
from fabricd.cli import main
from lab.control_client import inject
from lab.model import PortConfig
from lab.sonic_config import sonic_port
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_thread import TwinThread
from topology.spec import load_spec

from .service_thread import ServiceThread, wait_for, write_config

pytestmark = [pytest.mark.slow]
LEAF = "leaf-g0-r0"  # a SONiC leaf of examples/small-sonic.yaml
RATES_WHY = "not in SONiC {} (from 202411; reference/sonic-releases.md: RATES/Ethernet* from 202411)"


@pytest.fixture(params=["202305", "202405", "202411"])
def twin(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(EXAMPLES / "small-sonic.yaml"), tmp_path_factory.mktemp(f"sonic-{request.param}"),
                   sonic_version=request.param).start()  # fmt: skip
    # the lossless queue 3 with its watchdog on every port of the leaf (what `fabricd apply` configures)
    tw = t.process.twin
    for port in tw.switch(LEAF).ports:
        tw.set_port_config(LEAF, port, PortConfig(pfc_enabled=True, no_drop=frozenset({3}), watchdog=True))
    yield t
    t.stop()


def db_get(twin: TwinThread, target: str, path: str) -> Any:
    a = load_inventory(twin.inventory).access(LEAF)
    md = [("username", a.username), ("password", a.password.get_secret_value())]
    p = gnmi_pb2.Path()
    for e in path.split("/"):
        p.elem.add(name=e)
    with grpc.insecure_channel(f"{a.host}:{a.gnmi.port}") as channel:
        return gnmi_pb2_grpc.gNMIStub(channel).Get(
            gnmi_pb2.GetRequest(prefix=gnmi_pb2.Path(target=target), path=[p], encoding=4), metadata=md
        )


def test_each_release_serves_its_paths_and_fabricd_streams_and_detects_on_it(
    twin: TwinThread, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    release = twin.sonic_version
    new = release >= "202411"
    assert load_inventory(twin.inventory).access(LEAF).os_version == f"SONiC.{release}.fabricd-twin"
    # the switch itself, over raw gNMI
    wd = db_get(twin, "COUNTERS_DB", "COUNTERS/Ethernet0/Pfcwd").notification
    assert (len(wd) > 0) is new  # before 202411 the path reads a CONFIG_DB table that does not exist: no row
    queues = json.loads(db_get(twin, "COUNTERS_DB", "COUNTERS/Ethernet0/Queues").notification[0].update[0].val
                        .json_ietf_val)  # fmt: skip
    assert queues["Ethernet0:3"]["PFC_WD_STATUS"] == "operational"  # on the queue rows, every release
    if new:
        rates = json.loads(db_get(twin, "COUNTERS_DB", "RATES/Ethernet0").notification[0].update[0].val.json_ietf_val)
        assert float(rates["FEC_PRE_BER"]) > 0
    else:
        with pytest.raises(grpc.RpcError) as info:
            db_get(twin, "COUNTERS_DB", "RATES/Ethernet0")
        assert info.value.code() == grpc.StatusCode.NOT_FOUND

    # the service: planned for the release, streaming, decoding, detecting
    svc = ServiceThread(write_config(tmp_path, twin.inventory, spec=str(EXAMPLES / "small-sonic.yaml"))).start()
    try:
        n = len(twin.process.twin.switches)
        tel = wait_for(lambda: (t := svc.get("/api/v1/health")["telemetry"])["synced"] == n and t, 30)
        cov = {e["device"]: e for e in tel["coverage"]}
        entry = cov.get(LEAF, {"skipped": [], "missing": [], "degraded": []})
        missing = {m["leaf"]: m["reason"] for m in entry["missing"]}
        degraded = {d["detector"]: set(d["leaves"]) for d in entry["degraded"]}
        if new:
            assert "fec.pre-fec-ber" not in missing and "/RATES/Ethernet*" not in [s["path"] for s in entry["skipped"]]
        else:
            assert entry["os_version"] == f"SONiC.{release}.fabricd-twin"
            assert entry["skipped"] == [{"path": "/RATES/Ethernet*", "reason": RATES_WHY.format(release)}]
            assert missing["fec.pre-fec-ber"] == RATES_WHY.format(release)
            assert "fec.pre-fec-ber" in degraded["link_corruption"] and "fec.pre-fec-ber" in degraded["optics_trend"]
        assert "pfc_storm" not in degraded  # the watchdog and queue counters arrive on every release

        inject(twin.state_dir, "link_flap", {"port": f"{LEAF}:Ethernet1/1", "count": 8, "period_s": 0.3})
        flaps = wait_for(lambda: [f for f in svc.get("/api/v1/findings")["findings"] if f["kind"] == "link_flap"], 20)
        assert any(f["device"] == LEAF or f"{LEAF}:Ethernet1/1" in f["ports"] for f in flaps)

        assert main(["status", "--api", svc.url]) == 0
        out = capsys.readouterr().out
        if not new:
            line = next(ln for ln in out.splitlines() if ln.strip().startswith("link_corruption degraded on"))
            assert f"no fec.pre-fec-ber: {RATES_WHY.format(release)}" in line
    finally:
        svc.stop()


def test_a_switch_keying_its_counters_by_vendor_aliases_is_read_through_its_port_table(tmp_path: Path) -> None:
    """sonic-gnmi with vendor aliases keys COUNTERS rows by alias (`Ethernet0/1`, `Ethernet0/1:3`); fabricd maps them
    back through the aliases the switch's APPL_DB PORT_TABLE rows carry, so every counter lands on its port."""
    t = TwinThread(load_spec(EXAMPLES / "small-sonic.yaml"), tmp_path / "twin", sonic_aliases=True).start()
    try:
        dev = t.process.sonic.device(LEAF)
        ports = t.process.twin.switch(LEAF).ports
        # vendor aliases, numbered from 0 as some vendors do (so that no alias is a topology name by chance)
        patch = [{"op": "replace", "path": f"/PORT/{sonic_port(p)}/alias", "value": f"Ethernet{i}/1"}
                 for i, p in enumerate(ports)]  # fmt: skip
        dev.apply_patch(json.dumps(patch), dry_run=False)
        rows = db_get(t, "COUNTERS_DB", "COUNTERS/Ethernet*").notification
        keys = sorted(n.update[0].path.elem[1].name for n in rows)
        assert keys == sorted(f"Ethernet{i}/1" for i in range(len(ports)))
        svc = ServiceThread(write_config(tmp_path, t.inventory, spec=str(EXAMPLES / "small-sonic.yaml"))).start()
        try:
            n = len(t.process.twin.switches)
            wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["synced"] == n, 30)
            inject(t.state_dir, "link_flap", {"port": f"{LEAF}:Ethernet2/1", "count": 8, "period_s": 0.3})
            flaps = wait_for(lambda: [f for f in svc.get("/api/v1/findings")["findings"] if f["kind"] == "link_flap"],
                             20)  # fmt: skip
            assert any(f"{LEAF}:Ethernet2/1" in f["ports"] for f in flaps)
            # every port's counters land on that port: none under an alias (`Ethernet0/1` is no port of the fabric)
            metrics = httpx.get(svc.url + "/metrics", timeout=10).text
            labelled = set(
                re.findall(rf'fabricd_port_receive_bytes_total{{device="{LEAF}",group="\d+",port="([^"]+)"', metrics)
            )
            assert labelled == set(ports)
        finally:
            svc.stop()
    finally:
        t.stop()
