"""A restart of the twin is a power cycle of every switch: each boots from what it saved (EOS `write memory`, SONiC
`config save`), as a real switch does, not from the config it was first given; what was committed and never saved
is gone. (Before: every switch came back with the lab's initial config, the lossless settings fabricd had applied
and confirmed dropped, so a chaos run could not judge storms after a twin restart.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from drivers.base import Session
from drivers.inventory import load_inventory
from drivers.marks import Mark
from drivers.registry import get_driver
from lab.saved_config import SAVED_DIR
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_child import TwinChild

pytestmark = [pytest.mark.slow]
SPEC = EXAMPLES / "small-sonic.yaml"
# (switch, a port whose shutdown is saved, a port whose shutdown is committed and not saved)
CASES = [("spine-r0-0", "Ethernet2/1", "Ethernet1/1"), ("leaf-g1-r1", "Ethernet4/1", "Ethernet3/1")]


@pytest.fixture
def twin(tmp_path: Path) -> Iterator[TwinChild]:
    t = TwinChild(SPEC, tmp_path).start()
    yield t
    t.stop()


def connect(twin: TwinChild, device: str) -> Session:
    access = load_inventory(twin.inventory).access(device)
    return get_driver(access.platform).connect(access, timeout_s=15)


def test_a_restarted_twin_boots_every_switch_from_what_it_saved(twin: TwinChild) -> None:
    mark = Mark(action_id=41, ticket_id=7, kind="link_flap")
    for device, saved, unsaved in CASES:
        s = connect(twin, device)
        try:
            s.set_port_admin(saved, False, revert_in_s=120, mark=mark)
            s.confirm()  # napalm's confirm writes memory; SONiC's runs `config save -y`
            s.set_port_admin(unsaved, False, revert_in_s=120)  # committed under the timer, never confirmed
            assert s.interfaces_up().get(s.port_key(unsaved)) is False
            s.abandon()
        finally:
            s.close()
    assert sorted(p.name for p in (twin.state_dir / SAVED_DIR).iterdir()) == [
        "leaf-g1-r1.config_db.json", "spine-r0-0.startup-config",
    ]  # fmt: skip
    assert all(p.stat().st_mode & 0o077 == 0 for p in (twin.state_dir / SAVED_DIR).iterdir())

    twin.stop()
    twin.start()
    for device, saved, unsaved in CASES:
        s = connect(twin, device)
        try:
            up = s.interfaces_up()
            assert up.get(s.port_key(saved)) is False, device  # saved: still shut, with fabricd's mark
            assert s.port_marks()[saved].mark == mark, device
            assert up.get(s.port_key(unsaved)) is True, device  # never saved: gone with the power cycle
        finally:
            s.close()


def test_lab_up_starts_a_new_lab_without_what_an_earlier_one_saved(tmp_path: Path) -> None:
    import random
    import subprocess
    import sys

    from tests.conftest import REPO

    saved = tmp_path / SAVED_DIR
    saved.mkdir()
    (saved / "spine-r0-0.startup-config").write_text("hostname from-an-earlier-lab\n")
    base = f"127.{random.randint(100, 250)}.{random.randint(0, 250)}.1"
    fabricd = [sys.executable, "-m", "fabricd", "lab"]
    up = subprocess.run([*fabricd, "up", "--spec", str(SPEC), "--state-dir", str(tmp_path), "--base-address", base],
                        cwd=REPO, capture_output=True, text=True, timeout=120)  # fmt: skip
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert not saved.exists()
        s = get_driver("eos").connect(load_inventory(tmp_path / "inventory.yaml").access("spine-r0-0"), timeout_s=15)
        try:
            assert s.facts()["hostname"] == "spine-r0-0"
        finally:
            s.close()
    finally:
        subprocess.run([*fabricd, "down", "--state-dir", str(tmp_path)], cwd=REPO, capture_output=True, timeout=60)
