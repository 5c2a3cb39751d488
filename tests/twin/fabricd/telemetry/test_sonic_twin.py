"""SONiC switches of the twin serve sonic-gnmi's DB paths, and fabricd streams them: a raw grpc client sees
JSON_IETF rows of SAI counters (and PROTO refused); fabricd's client streams a SONiC leaf next to an EOS spine, its
counters advance, and a link going down arrives as an ON_CHANGE oper-status event."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from drivers.inventory import DeviceAccess, load_inventory
from fabricd.telemetry import CounterStore, Ingestor, TelemetryClient
from fabricd.telemetry.platforms import profiles
from lab.control_client import call, inject
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_thread import TwinThread
from topology.spec import load_spec

from .helpers import running, until

LEAF, SPINE = "leaf-g0-r0", "spine-r0-0"  # SONiC leaf, EOS spine (examples/small-sonic.yaml)
INTERVAL = 0.4


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(EXAMPLES / "small-sonic.yaml"), tmp_path_factory.mktemp("sonic-twin")).start()
    yield t
    t.stop()


def access(twin: TwinThread, name: str) -> DeviceAccess:
    return load_inventory(twin.inventory).access(name)


def _path(text: str) -> Any:
    p = gnmi_pb2.Path()
    for e in text.strip("/").split("/"):
        p.elem.add(name=e)
    return p


def test_db_paths_over_raw_grpc(twin: TwinThread) -> None:
    a = access(twin, LEAF)
    md = [("username", a.username), ("password", a.password.get_secret_value())]
    with grpc.insecure_channel(f"{a.host}:{a.gnmi.port}") as channel:
        stub = gnmi_pb2_grpc.gNMIStub(channel)

        def get(target: str, path: str, encoding: int = 4) -> Any:
            return stub.Get(gnmi_pb2.GetRequest(prefix=gnmi_pb2.Path(target=target), path=[_path(path)],
                                                encoding=encoding), metadata=md)  # fmt: skip

        (note,) = get("COUNTERS_DB", "COUNTERS/Ethernet0").notification
        assert note.prefix.target == "COUNTERS_DB" and [e.name for e in note.update[0].path.elem] == [
            "COUNTERS",
            "Ethernet0",
        ]
        row = json.loads(note.update[0].val.json_ietf_val)
        assert int(row["SAI_PORT_STAT_IF_IN_UCAST_PKTS"]) > 0 and isinstance(row["SAI_PORT_STAT_PFC_3_RX_PKTS"], str)
        ports = get("APPL_DB", "PORT_TABLE/Ethernet*").notification
        assert len(ports) == 4 and json.loads(ports[0].update[0].val.json_ietf_val)["oper_status"] == "up"
        queues = json.loads(get("COUNTERS_DB", "COUNTERS/Ethernet8/Queues").notification[0].update[0].val.json_ietf_val)
        assert set(queues) == {f"Ethernet8:{q}" for q in range(8)}
        dom = json.loads(
            get("STATE_DB", "TRANSCEIVER_DOM_SENSOR/Ethernet0").notification[0].update[0].val.json_ietf_val
        )
        assert -4 < float(dom["rx1power"]) < 0 and 20 < float(dom["temperature"]) < 70
        for target, path, encoding, code in [
            ("COUNTERS_DB", "COUNTERS/Ethernet0", 2, grpc.StatusCode.UNIMPLEMENTED),  # PROTO: not for DB paths
            ("COUNTERS_DB", "COUNTERS/Ethernet4", 4, grpc.StatusCode.NOT_FOUND),  # not a port's first lane
            ("COUNTERS_DB", "NO_TABLE/Ethernet0", 4, grpc.StatusCode.NOT_FOUND),
        ]:
            with pytest.raises(grpc.RpcError) as info:
                get(target, path, encoding)
            assert info.value.code() == code
    s = access(twin, SPINE)  # an EOS switch has no databases: the target must name the switch
    with grpc.insecure_channel(f"{s.host}:{s.gnmi.port}") as channel, pytest.raises(grpc.RpcError) as info:
        gnmi_pb2_grpc.gNMIStub(channel).Get(
            gnmi_pb2.GetRequest(prefix=gnmi_pb2.Path(target="COUNTERS_DB"), path=[_path("COUNTERS/Ethernet0")],
                                encoding=4), metadata=md)  # fmt: skip
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_fabricd_streams_a_sonic_leaf_next_to_an_eos_spine(twin: TwinThread) -> None:
    c = TelemetryClient([access(twin, LEAF), access(twin, SPINE)], Ingestor(CounterStore()),
                        profile=profiles(INTERVAL), interval_s=INTERVAL, rng=random.Random(2))  # fmt: skip

    async def go() -> None:
        async with running(c):
            assert await c.wait_synced(15)
            await asyncio.sleep(2.5 * INTERVAL)
            snap = c.ingestor.snapshot()
            for name in (LEAF, SPINE):
                rate = snap.rate_of(name, "Ethernet1/1", "if.in-pkts")
                assert rate is not None and rate > 0
                assert snap.find(name, "Ethernet1/1", "pfc.in-frames", 3) is not None
                assert snap.find(name, "Ethernet1/1", "queue.transmit-pkts", 3) is not None
                # the lossless queue's watermark: EOS's max-queue-len, SONiC's PERSISTENT_WATERMARKS by its OID
                assert snap.find(name, "Ethernet1/1", "queue.max-queue-len", 3) is not None
                # the lossless PG's watermarks: SONiC's PERSISTENT_WATERMARKS by PG OID; EOS streams none
                for leaf in ("pg.shared-watermark", "pg.headroom-watermark"):
                    assert (snap.find(name, "Ethernet1/1", leaf, 3) is not None) == (name == LEAF)
                assert snap.select(device=name, port="Ethernet1/1", leaf="optics.input-power").size > 0
            assert c.state(LEAF).rejected == () and c.state(LEAF).attempts == 1
            fault = inject(twin.state_dir, "link_down", {"port": f"{LEAF}:Ethernet3/1"})

            def went_down() -> bool:
                events = c.ingestor.snapshot().events_since(0, leaf="oper-status", changes_only=True)
                return any(e.device == LEAF and e.port == "Ethernet3/1" and e.value == "DOWN" for e in events)

            await until(went_down, 5)  # ON_CHANGE from APPL_DB's PORT_TABLE, not the next sample
            call(twin.state_dir, "DELETE", f"/faults/{fault['id']}")

    asyncio.run(go())
