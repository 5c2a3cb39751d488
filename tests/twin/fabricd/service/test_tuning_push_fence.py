"""A leader's tuning push and an older leader's late one (issue 53's fencing, for tuning's pushes): a push is named
with the leader's token (`fabricd_t<token>_tune_...`) and ends every older leader's transaction on the switch first
(fabricd/service/remediation/older_leaders.py), so a paused old leader's push left pending under its revert timer
neither blocks the new leader's push (EOS refuses a commit while another session's timer is pending) nor reverts it
later (a SONiC timer rolls the switch back to its checkpoint when it ends). Real EOS (eAPI) and SONiC (SSH) switches
of the small-sonic twin."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from drivers.inventory import load_inventory
from drivers.registry import get_driver
from fabricd.service.actuator import DriverActuator
from fabricd.service.remediation.context import Fence
from fabricd.service.tuning.push import Pusher, overlay, subject_ports
from fabricd.tuning.propose import Knob
from policies.intent import DeviceIntent, derive_intent
from policies.policy import load_policy
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_thread import TwinThread
from topology.load import load_fabric
from topology.spec import load_spec

pytestmark = [pytest.mark.slow]
SPEC = EXAMPLES / "small-sonic.yaml"
FABRIC = load_fabric(SPEC, None)[1]
CASES = [("eos", "spine-r0-0", "Ethernet2/1"), ("sonic", "leaf-g1-r1", "Ethernet4/1")]


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(SPEC), tmp_path_factory.mktemp("push-fence-twin")).start()
    yield t
    t.stop()


def intent_with(device: str, port: str, kmin: int) -> DeviceIntent:
    """The device's intent for the one port a push of that subject brings (push.py pushes the subject's ports)."""
    base = derive_intent(FABRIC, load_spec(SPEC), load_policy(None), {device})
    dev = overlay(base, FABRIC, {f"{device}:{port}": {Knob.KMIN: kmin}}).device(device)
    assert dev is not None
    return dev.model_copy(update={"ports": subject_ports(dev, FABRIC, f"{device}:{port}")})


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_a_leaders_push_ends_an_older_leaders_pending_push_and_is_not_undone_by_it(
    twin: TwinThread, platform: str, device: str, port: str
) -> None:
    actuator = DriverActuator(load_inventory(twin.inventory))
    driver = get_driver(platform)
    # leader 5's push of Kmin 111,111 committed under its timer, then paused before its confirm
    old = actuator.connect(device)
    plan = driver.plan(device, old.running_config(), driver.render(intent_with(device, port, 111_111)), {port})
    assert plan.changed
    old.load(plan.commands, key="fabricd_t5_tune_0a0b0c")
    old.commit(120)
    old.abandon()
    # leader 6 pushes Kmin 222,222 on the same port
    pusher = Pusher(actuator, Fence(token=lambda: 6), lambda _d: asyncio.Lock(), 60)
    base = derive_intent(FABRIC, load_spec(SPEC), load_policy(None), {device})
    target = overlay(base, FABRIC, {f"{device}:{port}": {Knob.KMIN: 222_222}})
    result = asyncio.run(pusher.push(target, FABRIC, f"{device}:{port}"))
    assert result.status == "applied", (result.status, result.error, result.steps)
    check = actuator.connect(device)
    try:
        # the switch runs leader 6's values, and nothing of leader 5 is left to revert them
        new = driver.render(intent_with(device, port, 222_222))
        assert not driver.plan(device, check.running_config(), new, {port}).changed
        assert check.abort_stale(7, keep=()) == []  # leader 6's push was confirmed; leader 5's was ended before it
    finally:
        check.close()
