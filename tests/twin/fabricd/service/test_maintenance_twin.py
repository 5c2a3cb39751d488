"""Planned maintenance end to end on the twin (4 spines per rail: a spine drained leaves each leaf 75 %): the CLI
against the running service, the service against the twin's switches: EOS over eAPI and gNMI (small-pod), SONiC
through its CLI over SSH and gNMI (small-sonic: a leaf's port shut through CONFIG_DB, a spine shifted with TSA)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from fabricd.cli import main as cli
from lab.control_client import inject
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import admin_enabled
from topology.load import load_fabric
from topology.spec import load_spec

from .service_thread import TOKEN, ServiceThread, wait_for, write_config

TO_SPINE = ("leaf-g0-r0", "Ethernet5/1")  # faces spine-r0-0:Ethernet1/1


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = yaml.safe_load((EXAMPLES / "small-pod.yaml").read_text())
    path = tmp_path_factory.mktemp("spec") / "four-spines.yaml"
    path.write_text(yaml.safe_dump({**data, "spines_per_rail": 4}))
    return path


@pytest.fixture(scope="module")
def twin(spec: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(spec), tmp_path_factory.mktemp("twin")).start()
    yield t
    t.stop()


def test_drain_and_undrain_a_spine(twin: TwinThread, spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("FABRICD_API_TOKEN", TOKEN)
    svc = ServiceThread(write_config(tmp_path, twin.inventory, spec=str(spec))).start()
    try:
        assert svc.service is not None
        api = ["--api", svc.url]

        def rate() -> float | None:
            return svc.on_loop(lambda s: s.view.out_rate_bps(*TO_SPINE))  # type: ignore[no-any-return]

        before = wait_for(lambda: (r := rate()) is not None and r > 1e9 and r, 20)
        # --dry-run: the steps, nothing changed
        assert cli(["drain", "switch", "spine-r0-0", "--reason", "NOS upgrade", "--dry-run", *api]) == 0
        out = capsys.readouterr().out
        assert "would take these steps (nothing changed)" in out and "BGP graceful shutdown (65535:0)" in out
        assert svc.get("/api/v1/maintenance")["maintenance"] == []
        # bad input: one line, exit 2
        assert cli(["drain", "switch", "spine-r9-0", "--reason", "x", *api]) == 2
        assert (
            capsys.readouterr()
            .err.strip()
            .endswith("switch spine-r9-0: not a switch of the blueprint; see `fabricd topology`")
        )
        # a spine drained: maintenance mode on the switch, its ports' rates fall, the drain says drained
        assert cli(["drain", "switch", "spine-r0-0", "--reason", "NOS upgrade", *api]) == 0
        (d,) = wait_for(lambda: [x for x in svc.get("/api/v1/maintenance")["maintenance"] if x["state"] == "drained"],
                        90)  # fmt: skip
        assert d["done"] == len(d["steps"]) and d["actor"] == "service-token"
        quiet = rate()
        assert quiet is not None and quiet < 1e6 < before
        assert cli(["maintenance", *api]) == 0
        assert "drained" in capsys.readouterr().out
        assert cli(["status", *api]) in (0, 1)
        assert (
            f"maintenance: drain {d['id']} of switch spine-r0-0: drained (step 4/4, by service-token: NOS upgrade)"
            in (capsys.readouterr().out)
        )
        # a flap on a leaf uplink while the spine is drained: judged with the drained capacity counted (refused)
        inject(twin.state_dir, "link_flap", {"port": "leaf-g0-r0:Ethernet7/1", "count": 8, "period_s": 0.3})
        (refused,) = wait_for(lambda: [a for a in svc.get("/api/v1/actions")["actions"] if a["status"] == "refused"],
                              20)  # fmt: skip
        assert (refused["device"], refused["port"]) in (("leaf-g0-r0", "Ethernet7/1"), ("spine-r0-2", "Ethernet1/1"))
        assert refused["reason"] == (
            "leaf-g0-r0 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75% limit"
        ), refused
        # a drain that would leave a leaf under 75 % (one of its uplinks down) is refused with the reason
        inject(twin.state_dir, "link_down", {"port": "leaf-g0-r1:Ethernet6/1"})
        wait_for(lambda: svc.on_loop(lambda s: s.view.oper("leaf-g0-r1", "Ethernet6/1")) == "DOWN", 20)
        assert cli(["drain", "switch", "spine-r1-0", "--reason", "NOS upgrade", *api]) == 2
        assert "leaf-g0-r1 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75% limit" in (
            capsys.readouterr().err
        )
        # a cable swapped during the work: the undrain refuses and names it; the drain stays
        inject(twin.state_dir, "miscable", {"port": "leaf-g0-r0:Ethernet5/1", "other": "leaf-g0-r0:Ethernet6/1"})

        def heard() -> str:
            return str(svc.on_loop(lambda s: s.view._lldp("spine-r0-0", "Ethernet1/1", 0)))

        wait_for(lambda: heard() == "leaf-g0-r0:Ethernet6/1", 20)
        assert cli(["undrain", "spine-r0-0", *api]) == 2
        err = capsys.readouterr().err
        assert "spine-r0-0 stays drained" in err and "move the cable back to leaf-g0-r0:Ethernet5/1" in err
        assert [x["state"] for x in svc.get("/api/v1/maintenance")["maintenance"]] == ["drained"]
        assert 'fabricd_drains{state="drained"} 1.0' in httpx.get(svc.url + "/metrics").text
    finally:
        svc.stop()


def test_a_port_drain_shuts_it_held_as_maintenance(twin: TwinThread, spec: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    port = ("leaf-g1-r0", "Ethernet7/1")  # faces spine-r0-2
    # no ticket for the port (the first test's swapped cable, still on the shared twin, has its own)
    drain_a_port(twin, spec, tmp_path, monkeypatch, capsys, port)


def drain_a_port(twin: TwinThread, spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 capsys: pytest.CaptureFixture[str], port: tuple[str, str]) -> None:  # fmt: skip
    """A port drained: shut with fabricd's mark through the switch's driver, held as maintenance (no ticket),
    `fabricd status` says so; undrained: back up, no hold."""
    monkeypatch.setenv("FABRICD_API_TOKEN", TOKEN)
    svc = ServiceThread(write_config(tmp_path, twin.inventory, spec=str(spec))).start()
    try:
        api = ["--api", svc.url]
        wait_for(lambda: svc.on_loop(lambda s: s.view.oper(*port)) == "UP", 20)
        assert cli(["drain", "port", ":".join(port), "--reason", "optic swap", *api]) == 0
        (d,) = wait_for(lambda: [x for x in svc.get("/api/v1/maintenance")["maintenance"] if x["state"] == "drained"],
                        60)  # fmt: skip
        assert [(p["device"], p["port"], p["ticket_id"]) for p in svc.get("/api/v1/ports/disabled")["ports"]] == [
            (*port, None)
        ]
        # before the shut, both ends of the link's BGP session de-preferred it (RFC 8326, the AS prepended): the
        # verify step saw the port fall quiet while still up; the policy stays on while drained
        assert [x.split(":")[0] for x in d["steps"]].count("shift_session") == 2, d["steps"]
        peer = load_fabric(spec, None)[1].peer(*port)
        assert peer is not None
        assert set(twin.process.twin.depreferred) == {port[0], peer.device}
        assert not enabled(twin, *port)  # the switch's own config: EOS `shutdown`, SONiC CONFIG_DB admin_status
        wait_for(lambda: svc.on_loop(lambda s: s.view.oper(*port)) == "DOWN", 10)
        mark = wait_for(lambda: (t := described(twin, svc, *port)) and "[fabricd" in t and t, 10)
        assert mark.endswith("t- maintenance]")
        tickets = svc.get("/api/v1/tickets")["tickets"]
        assert [t for t in tickets if t["device"] == port[0] or ":".join(port) in t["fault"]] == []
        capsys.readouterr()
        assert cli(["status", *api]) in (0, 1)
        status = capsys.readouterr().out
        assert f"maintenance: drain {d['id']} of port {':'.join(port)}: drained" in status, status
        assert cli(["undrain", ":".join(port), *api]) == 0
        assert [x["state"] for x in svc.get("/api/v1/maintenance")["maintenance"]] == ["undrained"]
        assert twin.process.twin.depreferred == {}  # the sessions back once the checks passed
        assert svc.get("/api/v1/ports/disabled")["ports"] == []
        assert enabled(twin, *port)
        wait_for(lambda: svc.on_loop(lambda s: s.view.oper(*port)) == "UP", 10)
    finally:
        svc.stop()


# SONiC: small-sonic with 4 spines per rail (one uplink drained leaves a leaf 75 %), its spines SONiC too so that a
# spine drain shifts traffic with TSA. The leaves' ports are shut through CONFIG_DB, the spines shifted with `TSA`.
@pytest.fixture(scope="module")
def sonic_spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = yaml.safe_load((EXAMPLES / "small-sonic.yaml").read_text())
    path = tmp_path_factory.mktemp("spec") / "sonic-four-spines.yaml"
    platforms = {**data["platforms"], "spine": "sonic"}
    path.write_text(yaml.safe_dump({**data, "spines_per_rail": 4, "platforms": platforms}))
    return path


@pytest.fixture(scope="module")
def sonic_twin(sonic_spec: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(sonic_spec), tmp_path_factory.mktemp("sonic-twin")).start()
    yield t
    t.stop()


@pytest.mark.slow
def test_a_sonic_leaf_uplink_drained_and_back(sonic_twin: TwinThread, sonic_spec: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    leaf, port = "leaf-g0-r0", "Ethernet3/1"
    assert sonic_twin.process.twin.switch(leaf).platform == "sonic"
    assert sonic_twin.process.twin.peer(leaf, port).device.startswith("spine-")  # type: ignore[union-attr]
    drain_a_port(sonic_twin, sonic_spec, tmp_path, monkeypatch, capsys, (leaf, port))


@pytest.mark.slow
def test_a_sonic_spine_drained_with_tsa_and_back(sonic_twin: TwinThread, sonic_spec: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    tw = sonic_twin.process.twin
    spine, to_spine = "spine-r0-0", ("leaf-g0-r0", "Ethernet3/1")  # the SONiC leaf's uplink to it
    assert tw.switch(spine).platform == "sonic"
    monkeypatch.setenv("FABRICD_API_TOKEN", TOKEN)
    svc = ServiceThread(write_config(tmp_path, sonic_twin.inventory, spec=str(sonic_spec))).start()
    try:
        api = ["--api", svc.url]

        def rate() -> float | None:
            return svc.on_loop(lambda s: s.view.out_rate_bps(*to_spine))  # type: ignore[no-any-return]

        before = wait_for(lambda: (r := rate()) is not None and r > 1e9 and r, 20)
        assert cli(["drain", "switch", spine, "--reason", "SONiC upgrade", "--dry-run", *api]) == 0
        assert f"shift traffic away from {spine}: TSA (traffic shift away)" in capsys.readouterr().out
        # TSA on the spine (the switch says Maintenance), its leaves' uplinks to it fall quiet, the drain is drained
        assert cli(["drain", "switch", spine, "--reason", "SONiC upgrade", *api]) == 0
        (d,) = wait_for(lambda: [x for x in svc.get("/api/v1/maintenance")["maintenance"] if x["state"] == "drained"],
                        90)  # fmt: skip
        assert spine in tw.maintenance
        quiet = rate()
        assert quiet is not None and quiet < 1e6 < before
        capsys.readouterr()
        assert cli(["status", *api]) in (0, 1)
        assert f"maintenance: drain {d['id']} of switch {spine}: drained" in capsys.readouterr().out
        # undrain: TSB, the checks pass (cabled as before, BGP up, counters clean), traffic comes back
        assert cli(["undrain", spine, *api]) == 0, capsys.readouterr().err
        assert [x["state"] for x in svc.get("/api/v1/maintenance")["maintenance"]] == ["undrained"]
        assert spine not in tw.maintenance
        wait_for(lambda: (r := rate()) is not None and r > 1e9, 20)
    finally:
        svc.stop()


def described(twin: TwinThread, svc: ServiceThread, device: str, port: str) -> str | None:
    """The port's description: as an EOS switch streams it; a SONiC switch's CONFIG_DB PORT `description`, which
    fabricd's SONiC telemetry does not decode (its driver reads it from CONFIG_DB where the mark is written)."""
    if twin.process.twin.switch(device).platform == "eos":
        return svc.on_loop(lambda s: s.view.description(device, port))  # type: ignore[no-any-return]
    return twin.process.twin.port_config(device, port).description


def enabled(twin: TwinThread, device: str, port: str) -> bool:
    if twin.process.twin.switch(device).platform == "eos":
        return admin_enabled(twin, device, port)
    return twin.process.twin.port_config(device, port).admin_up  # CONFIG_DB PORT admin_status, as applied
