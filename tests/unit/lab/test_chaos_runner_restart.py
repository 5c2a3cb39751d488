"""A `--restart NAME=COMMAND` of a chaos run that starts a daemon (`pg_ctl restart`, `fabricd bus up`) returns when the
command does, not when the daemon exits: its output goes to the run's log, never to a pipe the daemon inherits
(seed 3131: `pg_ctl restart` was reported "timed out after 120 s", twice, with PostgreSQL long up again)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from lab.chaos.facts import FabricFacts
from lab.chaos.observe import Api, Switches
from lab.chaos.runner import Runner, Target
from lab.chaos.schedule import ChaosOptions, make_schedule
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import load_spec

FACTS = FabricFacts.of(Fabric(generate_blueprint(load_spec(EXAMPLES / "small-pod.yaml"))), "small-pod")


def test_a_restart_that_leaves_a_daemon_running_returns_with_the_command(tmp_path: Path) -> None:
    log = tmp_path / "fabricd.log"
    marker = "31.4159"  # the daemon's sleep, to find and end it
    target = Target(tmp_path, EXAMPLES / "small-pod.yaml", Api(["http://127.0.0.1:9"], "t"), Switches({}, FACTS),
                    log=log, restarts={"db": f"sleep {marker} & echo db restarted"})  # fmt: skip
    runner = Runner(make_schedule(1, FACTS, ChaosOptions(minutes=1)), FACTS, target, lambda line: None)
    try:
        began = time.monotonic()
        runner._restart_other(0)
        took = time.monotonic() - began
    finally:
        subprocess.run(["pkill", "-f", f"sleep {marker}"], check=False)
        target.api.close()
        target.switches.close()
    assert took < 5
    (e,) = [e for e in runner.run.events if e.kind == "restart"]
    assert e.where == "db" and e.detail.startswith("exit 0 in ") and e.end_s is not None
    assert "db restarted" in log.read_text()
