"""cEOS startup configs from `fabricd topology export --format clab --startup-dir`: the twin's EOS grammar
(which rejects what EOS rejects) takes every line, and the topology points each node at its file."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricd.cli import main
from lab.eos_cli import CliSession
from lab.eos_config import ConfigStore
from lab.model import Twin
from tests.conftest import EXAMPLES
from topology.exports.clab import ceos_startup_config
from topology.fabric import Fabric
from topology.model import Cabling


def test_every_startup_line_is_valid_eos_for_the_twin(small_blueprint: Cabling) -> None:
    fabric = Fabric(small_blueprint)
    twin = Twin(fabric)
    configs = ConfigStore(twin)
    for device in fabric.switches():
        session = CliSession(twin, configs, device.name, privileged=True)
        session.run("configure")
        for line in ceos_startup_config(device, fabric).splitlines():
            if line.strip() not in ("!", "end"):
                session.run(line)  # raises CliError on anything EOS would reject
        session.run("end")
        running = session.run("show running-config")
        assert "management api gnmi" in running and "transport grpc default" in running
        assert f"hostname {device.name}" in running


def test_clab_export_writes_one_startup_config_per_switch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lab.clab.yml"
    code = main(["topology", "export", "--spec", str(EXAMPLES / "small-pod.yaml"), "--format", "clab",
                 "-o", str(out), "--startup-dir", str(tmp_path / "configs")])  # fmt: skip
    assert code == 0
    configs = sorted(p.name for p in (tmp_path / "configs").iterdir())
    assert len(configs) == 18 and "leaf-g0-r0.cfg" in configs
    assert 'startup-config: "configs/leaf-g0-r0.cfg"' in out.read_text()
    assert main(["topology", "export", "--spec", str(EXAMPLES / "small-pod.yaml"), "--format", "slurm",
                 "--startup-dir", str(tmp_path / "x")]) == 2  # fmt: skip
    assert "--startup-dir goes with --format clab only" in capsys.readouterr().err
