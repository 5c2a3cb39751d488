"""`fabricd validate --inventory`: the cabling as the live switches' LLDP says it is, read through the drivers (EOS
spines over eAPI, SONiC leaves over SSH: examples/small-sonic.yaml), validated by the same loader and rules as
`--cabling` on a directory of LLDP tables; the twin's `miscable` fault swaps two cables' far ends. On the model and
on the real daemons (lldpd's tables)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.control_client import inject
from tests.conftest import EXAMPLES, REPO
from tests.twin.fabricd.service.service_thread import wait_for
from tests.twin.lab.real_daemons import MODES, START_S
from tests.twin.lab.twin_thread import TwinThread
from topology.spec import load_spec

SPEC = EXAMPLES / "small-sonic.yaml"


@pytest.fixture
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(SPEC), tmp_path_factory.mktemp("lldp-twin")).start()
    yield t
    t.stop()


@pytest.fixture(params=MODES)
def either(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    """The model's LLDP, or lldpd's own tables (`--daemons real`)."""
    t = TwinThread(load_spec(SPEC), tmp_path_factory.mktemp("lldp-twin"), daemons=request.param)
    yield t.start(START_S[request.param])
    t.stop()


def validate(*args: str) -> tuple[int, dict[str, Any], str]:
    r = subprocess.run([sys.executable, "-m", "fabricd", "validate", "--spec", str(SPEC), *args, "--format", "json"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)  # fmt: skip
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else {}, r.stderr


def test_live_lldp_matches_the_saved_tables_on_the_blueprint_and_on_a_swapped_pair(
    either: TwinThread, tmp_path: Path
) -> None:
    twin = either
    code, live, err = validate("--inventory", str(twin.inventory), "--save-lldp", str(tmp_path / "clean"))
    assert code == 0, err
    assert live["violations"] == [] and live["unreachable"] == []
    assert live["summary"]["links"] == 16 and live["summary"]["devices"]["leaf"] == 4
    assert sorted(p.name for p in (tmp_path / "clean").iterdir()) == sorted(
        f"{n}.json" for n in yaml.safe_load(twin.inventory.read_text())["devices"]
    )
    code, saved, _ = validate("--cabling", str(tmp_path / "clean"))
    assert code == 0 and saved["violations"] == live["violations"]

    # a technician swaps the cables on two leaves' first server ports (SONiC leaves): the links stay up
    inject(twin.state_dir, "miscable", {"port": "leaf-g0-r0:Ethernet2/1", "other": "leaf-g0-r1:Ethernet2/1"})
    if twin.process.twin.daemons is not None:  # the veths' ends move; lldpd hears the new neighbour
        wait_for(lambda: lldpd_hears(twin, "leaf-g0-r0", "Ethernet2/1") == ("gpu-g0-001", "nic1"), 15)
    code, live, err = validate("--inventory", str(twin.inventory), "--save-lldp", str(tmp_path / "swapped"))
    assert code == 1, err
    (v,) = live["violations"]
    assert v["code"] == "RAIL_MISMATCH"
    assert v["fix"] == "swap the cables on leaf-g0-r0:Ethernet2/1 and leaf-g0-r1:Ethernet2/1"
    code, saved, _ = validate("--cabling", str(tmp_path / "swapped"))
    assert code == 1 and saved["violations"] == live["violations"]


def lldpd_hears(twin: TwinThread, device: str, port: str) -> tuple[str, str] | None:
    d = twin.process.twin.daemons
    got = d.lldp.get(device, {}).get(port) if d is not None else None
    return (got.system, got.port_id) if got is not None else None


def test_an_unreachable_switch_is_named_and_the_rest_validated(twin: TwinThread, tmp_path: Path) -> None:
    inv = yaml.safe_load(twin.inventory.read_text())
    inv["devices"]["spine-r0-0"]["eapi"] = {"port": 1, "transport": "http"}  # nothing listens there
    broken = tmp_path / "inventory.yaml"
    broken.write_text(yaml.safe_dump(inv))
    code, live, err = validate("--inventory", str(broken))
    assert code == 2  # no violation among the switches read, but the picture is incomplete
    assert [u["device"] for u in live["unreachable"]] == ["spine-r0-0"]
    assert "fabricd: warning: spine-r0-0 not read: spine-r0-0: cannot open eAPI" in err
    assert live["violations"] == []  # its cables are still seen from the leaves' end
    assert live["summary"]["links"] == 16


def test_a_refused_leaf_and_an_unreachable_spine_are_named_and_not_judged(twin: TwinThread, tmp_path: Path) -> None:
    inv = yaml.safe_load(twin.inventory.read_text())
    inv["devices"]["spine-r0-0"]["eapi"] = {"port": 1, "transport": "http"}  # EOS: nothing listens there
    wrong = tmp_path / "wrong.secret"
    wrong.write_text("not-the-password\n")
    wrong.chmod(0o600)
    inv["devices"]["leaf-g0-r0"]["password_file"] = str(wrong)  # SONiC: the login is refused
    broken = tmp_path / "inventory.yaml"
    broken.write_text(yaml.safe_dump(inv))
    code, live, err = validate("--inventory", str(broken))
    assert code == 2, err  # nothing wrong among the switches read, but two were not read
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert [line.split(" not read: ")[0] for line in lines] == [
        "fabricd: warning: leaf-g0-r0", "fabricd: warning: spine-r0-0"
    ]  # fmt: skip
    assert all(line.endswith("its cables no switch that was read sees are not judged") for line in lines)
    assert [u["device"] for u in live["unreachable"]] == ["leaf-g0-r0", "spine-r0-0"]
    assert live["violations"] == []  # the refused leaf's server cables: no false MISSING_LINK
    # its two server cables and its link to the unreachable spine: nobody that was read sees them
    assert live["summary"]["not_judged"] == 3

    # a real fault among the switches read is still found (exit 1)
    inject(twin.state_dir, "miscable", {"port": "leaf-g1-r0:Ethernet2/1", "other": "leaf-g1-r1:Ethernet2/1"})
    code, live, err = validate("--inventory", str(broken))
    assert code == 1, err
    assert [v["code"] for v in live["violations"]] == ["RAIL_MISMATCH"]
    r = subprocess.run([sys.executable, "-m", "fabricd", "validate", "--spec", str(SPEC), "--inventory", str(broken)],
                       capture_output=True, text=True, cwd=REPO, timeout=120)  # fmt: skip
    assert "2 switch(es) not read (named above): 3 finding(s) only they could show are not judged" in r.stdout
    assert "Traceback" not in r.stderr
