"""Offline plans with reuse: the cached plan is the plan, a second run hits, one changed switch misses alone,
and a broken cache file costs a warning, never a plan."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from drivers.base import DevicePlan
from drivers.eos.render import render
from drivers.plan_cache import CACHE_FILE, OfflinePlanner, PlanCache, default_cache_dir
from drivers.registry import get_driver
from fabricd.cli import main
from policies.intent import Intent, derive_intent
from policies.policy import Override, OverrideMatch, Policy
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import FabricSpec, load_spec

SMALL = EXAMPLES / "small-pod.yaml"


def _intent(spec: FabricSpec, policy: Policy | None = None) -> Intent:
    return derive_intent(Fabric(generate_blueprint(spec)), spec, policy or Policy())


def _runnings(intent: Intent) -> dict[str, str]:
    """In sync, drifted by one line, bare, and in sync with out-of-scope lines, in turn."""
    out = {}
    for i, dev in enumerate(intent.devices):
        text = render(dev)
        out[dev.device] = [
            text,
            text.replace("minimum-threshold 600", "minimum-threshold 700", 1),
            f"hostname {dev.device}\n",
            "router bgp 1\n   neighbor 10.0.0.1 remote-as 2\n!\n" + text,
        ][i % 4]
    return out


def _plan_all(intent: Intent, runnings: dict[str, str], cache: PlanCache) -> list[DevicePlan]:
    planner = OfflinePlanner(cache)
    try:
        return [planner.plan(get_driver(d.platform), d, runnings[d.device]) for d in intent.devices]
    finally:
        cache.close()


def _direct(intent: Intent, runnings: dict[str, str]) -> list[DevicePlan]:
    plans = []
    for d in intent.devices:
        driver = get_driver(d.platform)
        plans.append(driver.plan(d.device, runnings[d.device], driver.render(d), {p.port for p in d.ports}))
    return plans


def test_second_run_hits_and_plans_are_the_drivers_plans(small_spec: FabricSpec, tmp_path: Path) -> None:
    intent = _intent(small_spec)
    runnings = _runnings(intent)
    expected = _direct(intent, runnings)
    cold = PlanCache(tmp_path)
    assert _plan_all(intent, runnings, cold) == expected
    assert cold.hits < len(expected) and any(p.changed for p in expected)
    warm = PlanCache(tmp_path)
    assert _plan_all(intent, runnings, warm) == expected
    assert (warm.hits, warm.misses) == (len(expected), 0)


def test_one_changed_intent_misses_only_that_switch(small_spec: FabricSpec, tmp_path: Path) -> None:
    intent = _intent(small_spec)
    runnings = _runnings(intent)
    _plan_all(intent, runnings, PlanCache(tmp_path))
    changed = _intent(
        small_spec, Policy(overrides=[Override(match=OverrideMatch(device="leaf-g0-r1"), set={"ecn": {"min_us": 20}})])
    )
    warm = PlanCache(tmp_path)
    assert _plan_all(changed, runnings, warm) == _direct(changed, runnings)
    assert (warm.hits, warm.misses) == (len(intent.devices) - 1, 1)


def test_one_changed_running_config_misses_only_that_switch(small_spec: FabricSpec, tmp_path: Path) -> None:
    intent = _intent(small_spec)
    runnings = _runnings(intent)
    _plan_all(intent, runnings, PlanCache(tmp_path))
    runnings["spine-r0-0"] = runnings["spine-r0-0"].replace("priority-flow-control on", "no priority-flow-control", 1)
    runnings["spine-r0-1"] += "management api http-commands\n   no shutdown\n"  # out of scope: still a hit
    warm = PlanCache(tmp_path)
    assert _plan_all(intent, runnings, warm) == _direct(intent, runnings)
    assert (warm.hits, warm.misses) == (len(intent.devices) - 1, 1)


def test_writes_wait_for_one_transaction(small_spec: FabricSpec, tmp_path: Path) -> None:
    intent = _intent(small_spec)
    runnings = _runnings(intent)
    cache = PlanCache(tmp_path)
    planner = OfflinePlanner(cache)
    for d in intent.devices:
        planner.plan(get_driver(d.platform), d, runnings[d.device])
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        assert db.execute("SELECT count(*) FROM plans").fetchone()[0] == 0
    cache.close()
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        assert db.execute("SELECT count(*) FROM plans").fetchone()[0] > 0


@pytest.mark.parametrize("garbage", [b"not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 4000])
def test_a_corrupt_cache_file_is_rebuilt_with_one_warning(
    small_spec: FabricSpec, tmp_path: Path, garbage: bytes
) -> None:
    intent = _intent(small_spec)
    runnings = _runnings(intent)
    (tmp_path / CACHE_FILE).write_bytes(garbage)
    warnings: list[str] = []
    cache = PlanCache(tmp_path, warn=warnings.append)
    assert _plan_all(intent, runnings, cache) == _direct(intent, runnings)
    assert len(warnings) == 1 and "rebuilt" in warnings[0]
    warm = PlanCache(tmp_path, warn=warnings.append)
    _plan_all(intent, runnings, warm)
    assert warm.misses == 0 and len(warnings) == 1


def test_an_unusable_cache_dir_plans_without_a_cache(small_spec: FabricSpec, tmp_path: Path) -> None:
    intent = _intent(small_spec)
    runnings = _runnings(intent)
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    warnings: list[str] = []
    cache = PlanCache(blocker / "fabricd", warn=warnings.append)
    assert _plan_all(intent, runnings, cache) == _direct(intent, runnings)
    assert len(warnings) == 1 and "planning without it" in warnings[0]


def test_a_locked_cache_is_left_alone(small_spec: FabricSpec, tmp_path: Path) -> None:
    intent = _intent(small_spec)
    runnings = _runnings(intent)
    _plan_all(intent, runnings, PlanCache(tmp_path))
    other = sqlite3.connect(tmp_path / CACHE_FILE)  # another run, in the middle of its write
    other.execute("BEGIN EXCLUSIVE")
    warnings: list[str] = []
    try:
        cache = PlanCache(tmp_path, warn=warnings.append, timeout_s=0.05)
        assert _plan_all(intent, runnings, cache) == _direct(intent, runnings)
    finally:
        other.rollback()
        other.close()
    assert len(warnings) == 1 and "planning without it" in warnings[0]
    warm = PlanCache(tmp_path)  # the other run's file was not deleted
    _plan_all(intent, runnings, warm)
    assert warm.misses == 0


def test_no_cache_stores_nothing(small_spec: FabricSpec) -> None:
    intent = _intent(small_spec)
    runnings = _runnings(intent)
    cache = PlanCache(None)
    assert _plan_all(intent, runnings, cache) == _direct(intent, runnings)
    assert cache.hits == 0


def test_sonic_plans_are_cached_too(dci_spec: FabricSpec, tmp_path: Path) -> None:
    spec = dci_spec.model_copy(update={"platforms": dci_spec.platforms.model_copy(update={"dr": "sonic"})})
    intent = _intent(spec)
    dev = next(d for d in intent.devices if d.platform == "sonic")
    one = Intent(devices=[dev])
    runnings = {dev.device: json.dumps({"DEVICE_METADATA": {"localhost": {"hostname": dev.device}}})}
    expected = _direct(one, runnings)
    assert expected[0].changed
    assert _plan_all(one, runnings, PlanCache(tmp_path)) == expected
    warm = PlanCache(tmp_path)
    assert _plan_all(one, runnings, warm) == expected and warm.hits == 1


def test_default_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "fabricd"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "fabricd"


def test_cli_cache_dir_and_no_cache(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = load_spec(SMALL)
    intent = _intent(spec)
    running = tmp_path / "running"
    running.mkdir()
    for name, text in _runnings(intent).items():
        (running / f"{name}.cfg").write_text(text)
    base = ["plan", "--spec", str(SMALL), "--running-dir", str(running), "--format", "json"]
    outputs = []
    for extra in (["--no-cache"], ["--cache-dir", str(tmp_path / "c")], ["--cache-dir", str(tmp_path / "c")]):
        assert main([*base, *extra]) == 1
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1] == outputs[2]
    assert (tmp_path / "c" / CACHE_FILE).exists()
    (tmp_path / "c" / CACHE_FILE).write_bytes(b"garbage" * 100)
    assert main([*base, "--cache-dir", str(tmp_path / "c")]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == outputs[0]
    assert "warning: plan cache" in captured.err and "rebuilt" in captured.err
