"""One contract for every driver (as napalm tests all its drivers with one suite): the same checks, over real
sockets, against an EOS switch (eAPI) and a SONiC switch (SSH) of the twin of examples/small-sonic.yaml (SONiC
leaves under EOS spines). A new driver passes these before fabricd may act through it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest

from drivers.base import DriverError, PortMark, Session, UnreachableError
from drivers.eos.session import EosSession
from drivers.inventory import load_inventory
from drivers.marks import Mark
from drivers.registry import get_driver
from drivers.sonic.session import SonicSession
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_thread import TwinThread
from topology.load import load_fabric
from topology.spec import load_spec
from topology.underlay import Underlay

pytestmark = [pytest.mark.slow]
SPEC = EXAMPLES / "small-sonic.yaml"
FABRIC = load_fabric(SPEC, None)[1]
# (platform, switch, a fabric port whose admin state the contract toggles)
CASES = [("eos", "spine-r0-0", "Ethernet2/1"), ("sonic", "leaf-g1-r1", "Ethernet4/1")]


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(SPEC), tmp_path_factory.mktemp("contract-twin")).start()
    yield t
    t.stop()


def connect(twin: TwinThread, device: str) -> Session:
    access = load_inventory(twin.inventory).access(device)
    return get_driver(access.platform).connect(access, timeout_s=15)


def up(s: Session, port: str) -> bool | None:
    """The port's oper state as the driver reads it, found by the driver's own name for the fabricd port."""
    return s.interfaces_up().get(s.port_key(port))


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_facts_running_config_and_interfaces(twin: TwinThread, platform: str, device: str, port: str) -> None:
    assert FABRIC.device(device).platform == platform
    s = connect(twin, device)
    try:
        assert s.device == device
        assert s.facts()["hostname"] == device
        assert len(s.running_config()) > 100
        states = s.interfaces_up()
        assert states and all(isinstance(v, bool) for v in states.values())
        assert up(s, port) is True
    finally:
        s.close()


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_port_down_confirmed_then_back(twin: TwinThread, platform: str, device: str, port: str) -> None:
    s = connect(twin, device)
    try:
        s.set_port_admin(port, False, revert_in_s=60)
        s.confirm()
        assert up(s, port) is False
        s.set_port_admin(port, True, revert_in_s=60)
        s.confirm()
        assert up(s, port) is True
    finally:
        s.close()


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_rollback_undoes_an_unconfirmed_change(twin: TwinThread, platform: str, device: str, port: str) -> None:
    s = connect(twin, device)
    try:
        before = s.running_config()
        s.set_port_admin(port, False, revert_in_s=60)
        s.rollback()
        assert up(s, port) is True
        assert s.running_config() == before
    finally:
        s.close()


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_a_commit_left_pending_by_a_dead_controller_is_found_by_its_key(
    twin: TwinThread, platform: str, device: str, port: str
) -> None:
    # fabricd commits under a key and dies before confirming (no confirm, no close): the next fabricd's session
    # finds the transaction by its key and decides it, confirm or roll back, instead of colliding with it
    dead = connect(twin, device)
    dead.set_port_admin(port, False, revert_in_s=300, key="fabricd_a901")
    s = connect(twin, device)
    try:
        assert s.resume("fabricd_a999") == "none"
        assert s.resume("fabricd_a901") == "pending"
        assert up(s, port) is False
        s.confirm()
        assert up(s, port) is False
        # EOS keeps the completed session; SONiC keeps no record of it (applying the same patch again is a no-op)
        assert s.resume("fabricd_a901") == ("confirmed" if platform == "eos" else "none")

        dead2 = connect(twin, device)
        dead2.set_port_admin(port, True, revert_in_s=300, key="fabricd_a902")
        assert up(s, port) is True
        assert s.resume("fabricd_a902") == "pending"
        s.rollback()
        assert up(s, port) is False
        assert s.resume("fabricd_a902") == "none"  # rolled back: nothing left under the key
        # the key can be used again, and the switch takes a new commit (no timer of the dead one is in the way)
        s.set_port_admin(port, True, revert_in_s=300, key="fabricd_a902")
        s.confirm()
        assert up(s, port) is True
    finally:
        s.close()


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_render_and_plan_of_the_intended_config_against_itself_is_clean(
    twin: TwinThread, platform: str, device: str, port: str
) -> None:
    from policies.intent import derive_intent
    from policies.policy import load_policy
    from topology.spec import load_spec as spec_of

    driver = get_driver(platform)
    intent = derive_intent(FABRIC, spec_of(SPEC), load_policy(None), {device})
    (dev,) = [d for d in intent.devices if d.device == device]
    intended = driver.render(dev)
    ports = {p.port for p in dev.ports}
    s = connect(twin, device)
    try:
        running = s.running_config()
    finally:
        s.close()
    first = driver.plan(device, running, intended, ports)
    assert first.error is None and first.device == device
    # whatever the twin runs today, the intended config planned against an already-applied copy has no change
    assert not driver.plan(device, _applied(platform, running, intended), intended, ports).changed


def _applied(platform: str, running: str, intended: str) -> str:
    """What the switch would run after the intended config: for EOS the rendered text itself (its plan compares
    the lossless sections), for SONiC the running config_db with the rendered tables merged in."""
    if platform == "eos":
        return intended
    import json

    doc = json.loads(running)
    for table, rows in json.loads(intended).items():
        doc.setdefault(table, {}).update(rows)
    return json.dumps(doc)


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_unreachable_and_wrong_password_are_named_driver_errors(
    twin: TwinThread, platform: str, device: str, port: str
) -> None:
    access = load_inventory(twin.inventory).access(device)
    driver = get_driver(platform)
    dead = dataclasses.replace(access, host="127.0.0.254")
    with pytest.raises(UnreachableError) as e:
        driver.connect(dead, timeout_s=3)
    assert device in str(e.value)
    wrong = dataclasses.replace(access, password=type(access.password)("not-the-password"))
    with pytest.raises(DriverError) as e2:
        s = driver.connect(wrong, timeout_s=10)
        s.facts()  # a driver may authenticate lazily: the first call must fail then
    assert device in str(e2.value) and "not-the-password" not in str(e2.value)


def _describe(s: Session, platform: str, port: str, text: str) -> None:
    """The operator's own description on the port, committed as an operator would (not through fabricd's marks)."""
    if platform == "eos":
        s.load([f"interface {port}", f"description {text}"])
    else:
        from drivers.sonic.patch import json_pointer, patch_commands
        from drivers.sonic.render import sonic_port_name

        s.load(patch_commands([{"op": "add", "path": json_pointer("PORT", sonic_port_name(port), "description"),
                                "value": text}]))  # fmt: skip
    s.commit(60)
    s.confirm()


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_the_shutdown_carries_fabricds_mark_beside_the_operators_description(
    twin: TwinThread, platform: str, device: str, port: str
) -> None:
    mark = Mark(action_id=12, ticket_id=7, kind="link_flap")
    s = connect(twin, device)
    try:
        _describe(s, platform, port, "uplink to spine")
        assert s.port_marks() == {}
        s.set_port_admin(port, False, revert_in_s=60, mark=mark)
        s.confirm()
        assert s.port_marks() == {port: PortMark(mark, admin_up=False)}
        assert "uplink to spine [fabricd: down a12 t7 link_flap]" in s.running_config()
        s.set_port_admin(port, True, revert_in_s=60)
        s.confirm()
        assert s.port_marks() == {}
        running = s.running_config()
        assert "uplink to spine" in running and "[fabricd" not in running
        assert up(s, port) is True
    finally:
        s.close()


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_a_new_leader_ends_an_old_leaders_pending_commit_by_its_token(
    twin: TwinThread, platform: str, device: str, port: str
) -> None:
    # leader 5 commits under its token's name and is paused; leader 6 ends it before acting (unless it resumes it),
    # and a session let go with abandon() says nothing more to the switch
    old = connect(twin, device)
    old.set_port_admin(port, False, revert_in_s=60, key="fabricd_t5_a1_00000001")
    old.abandon()  # the paused leader: not a word more
    new = connect(twin, device)
    try:
        assert up(new, port) is False
        assert new.abort_stale(5, keep=()) == []  # not older than 5
        assert new.abort_stale(6, keep={"fabricd_t5_a1_00000001"}) == []  # the one it resumes is kept
        assert new.abort_stale(6, keep=()) == ["fabricd_t5_a1_00000001"]
        assert up(new, port) is True  # rolled back
        assert new.resume("fabricd_t5_a1_00000001") == "none"
        assert new.abort_stale(6, keep=()) == []
    finally:
        new.close()


class Refused(Exception):
    """What a fenced-off leader's guard raises."""


class FencedAfter:
    """A session guard that lets `n` requests through and refuses the rest (the process fenced off, or dead)."""

    def __init__(self, n: int) -> None:
        self.n, self.asked = n, 0

    def __call__(self) -> None:
        self.asked += 1
        if self.asked > self.n:
            raise Refused


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_the_guard_is_asked_before_every_request_and_a_late_confirm_finds_nothing_to_commit(
    twin: TwinThread, platform: str, device: str, port: str
) -> None:
    # the guard is asked before each request, inside a confirm too: refused after its first, the commit is not sent
    old = connect(twin, device)
    asked: list[int] = []

    def guard() -> None:
        asked.append(1)
        if refuse:
            raise Refused

    refuse = False
    old.guard = guard
    new = connect(twin, device)
    try:
        old.set_port_admin(port, False, revert_in_s=60, key="fabricd_t8_a3_00000003")
        assert asked  # every request of the commit asked it
        before = len(asked)
        refuse = True
        with pytest.raises(Refused):
            old.confirm()
        assert len(asked) == before + 1  # refused at the first request: nothing more was sent
        # the new leader ends it and does the step again under its own name; the old one's late confirm (its guard
        # passed just before it was paused) then finds nothing to commit
        assert new.abort_stale(9, keep=()) == ["fabricd_t8_a3_00000003"]
        new.set_port_admin(port, False, revert_in_s=60, key="fabricd_t9_a3_00000003")
        refuse = False
        with pytest.raises(DriverError):
            old.confirm()
        new.confirm()
        assert up(new, port) is False
        assert new.resume("fabricd_t8_a3_00000003") == "none"  # never committed
        new.set_port_admin(port, True, revert_in_s=60)
        new.confirm()
    finally:
        old.abandon()
        new.close()


def test_a_sonic_decision_an_old_leader_won_but_never_carried_out_leaves_no_timer_to_undo_the_new_leaders_work(
    twin: TwinThread,
) -> None:
    # SONiC only (EOS has no lock: its confirm is one request). The old leader's confirm wins the decision lock and
    # is fenced off (or dies) before its next command: the lock stays taken and its revert timer sleeps on. The new
    # leader cannot win that lock, so it takes the commit as decided elsewhere, frees the lock and does the step
    # again under its own name. The old timer, when it ends, must not roll the switch back to its checkpoint (taken
    # before either commit: that would undo the new leader's confirmed work); removing the pid file disarms it.
    # (Before: the timer won the freed lock and rolled the port back up.)
    _, device, port = CASES[1]
    old, new = connect(twin, device), connect(twin, device)
    guard = FencedAfter(1)  # the lock's mkdir goes out; the old leader finds itself fenced before the next command
    try:
        old.set_port_admin(port, False, revert_in_s=4, key="fabricd_t8_a4_00000004")
        timer_ends = time.monotonic() + 4
        old.guard = guard
        with pytest.raises(Refused):
            old.confirm()
        assert guard.asked == 2
        assert new.abort_stale(9, keep=()) == []  # not its to roll back: decided by the old leader
        new.set_port_admin(port, False, revert_in_s=60, key="fabricd_t9_a4_00000004")
        new.confirm()
        time.sleep(max(0.0, timer_ends + 0.6 - time.monotonic()))  # the old timer has ended
        assert up(new, port) is False
        new.set_port_admin(port, True, revert_in_s=60)
        new.confirm()
        assert up(new, port) is True
    finally:
        old.abandon()
        new.close()


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_rollback_after_the_commit_was_decided_elsewhere_changes_nothing(
    twin: TwinThread, platform: str, device: str, port: str
) -> None:
    # an old leader that wakes and rolls back a commit the new leader has meanwhile confirmed must not undo anything
    # (napalm's own rollback falls back to `configure replace flash:rollback-0`, the config before the commit)
    old = connect(twin, device)
    new = connect(twin, device)
    try:
        old.set_port_admin(port, False, revert_in_s=60, key="fabricd_t7_a2_00000002")
        assert new.resume("fabricd_t7_a2_00000002") == "pending"
        new.confirm()
        before = new.running_config()
        old.rollback()
        assert new.running_config() == before and up(new, port) is False
        new.set_port_admin(port, True, revert_in_s=60)
        new.confirm()
    finally:
        old.abandon()
        new.close()


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_released_sessions_end_their_transaction_and_a_kept_one_carries_the_next(
    twin: TwinThread, platform: str, device: str, port: str
) -> None:
    # release() ends the transaction as close() does (an unconfirmed commit is rolled back now); a driver that keeps
    # the session (EOS over eAPI) carries the switch's next action on it without opening again
    s = connect(twin, device)
    s.set_port_admin(port, False, revert_in_s=60, key="fabricd_a951")
    kept = s.release()
    assert kept is (platform == "eos")
    check = connect(twin, device)
    try:
        assert up(check, port) is True  # rolled back
        assert check.resume("fabricd_a951") == "none"
    finally:
        check.close()
    if not kept:
        return
    s.set_port_admin(port, False, revert_in_s=60, key="fabricd_a952")
    s.confirm()
    assert up(s, port) is False
    s.set_port_admin(port, True, revert_in_s=60, key="fabricd_a953")
    s.confirm()
    assert up(s, port) is True
    assert s.release() is True
    s.close()


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_a_change_the_switch_refuses_leaves_nothing_pending(
    twin: TwinThread, platform: str, device: str, port: str
) -> None:
    s = connect(twin, device)
    try:
        with pytest.raises(DriverError) as e:
            s.set_port_admin("Ethernet99/1", False, revert_in_s=60, key="fabricd_a961")
        assert device in str(e.value)
        assert s.resume("fabricd_a961") == "none"
        # the switch takes the next change (no session of the refused one holds it)
        s.set_port_admin(port, False, revert_in_s=60, key="fabricd_a962")
        s.rollback()
        assert up(s, port) is True
    finally:
        s.close()


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_the_mark_goes_beside_the_description_handed_over_without_reading_it(
    twin: TwinThread, platform: str, device: str, port: str
) -> None:
    # fabricd hands the session the description telemetry streams: the mark goes beside that text
    mark = Mark(action_id=14, ticket_id=9, kind="link_flap")
    s = connect(twin, device)
    try:
        _describe(s, platform, port, "uplink to spine")
        s.set_port_admin(port, False, revert_in_s=60, mark=mark, description="uplink to spine")
        s.confirm()
        assert "uplink to spine [fabricd: down a14 t9 link_flap]" in s.running_config()
        s.set_port_admin(port, True, revert_in_s=60, description="uplink to spine [fabricd: down a14 t9 link_flap]")
        s.confirm()
        running = s.running_config()
        assert "uplink to spine" in running and "[fabricd" not in running
        assert up(s, port) is True
    finally:
        s.close()


def in_maintenance(s: Session) -> bool:
    """What the switch says: EOS's running config, SONiC's `TSC` (reference/maintenance-lldp-bgp-state.md)."""
    if isinstance(s, SonicSession):
        return "System Mode: Maintenance" in s._run("TSC")[1]
    return "      quiesce" in s.running_config()


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_traffic_shifted_away_and_back(twin: TwinThread, platform: str, device: str, port: str) -> None:
    s = connect(twin, device)
    try:
        assert not in_maintenance(s)
        s.shift_traffic(True, revert_in_s=60, key="fabricd_m1_1")
        assert in_maintenance(s)
        s.shift_traffic(True, revert_in_s=60, key="fabricd_m1_2")  # a resumed step taken twice: the same state
        assert in_maintenance(s)
        s.shift_traffic(False, revert_in_s=60, key="fabricd_m1_back")
        assert not in_maintenance(s)
    finally:
        s.close()


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_one_sessions_traffic_shifted_away_and_back(twin: TwinThread, platform: str, device: str, port: str) -> None:
    """A link's drain: the switch de-prefers what it advertises over one BGP session (RFC 8326's community and its
    AS prepended), so its peer stops sending over that link; again (a resumed step) is the same state; back, the
    peer sends there again. What the switch shows: EOS's running config, FRR's through the twin's model of it."""
    underlay = Underlay(FABRIC)
    session = underlay.session(device, port)
    assert session is not None
    tw = twin.process.twin
    s = connect(twin, device)
    try:
        s.shift_session(session.peer_address, session.local_asn, True, revert_in_s=60, key="fabricd_m2_1")
        s.shift_session(session.peer_address, session.local_asn, True, revert_in_s=60, key="fabricd_m2_2")
        assert tw.depreferred.get(device) == frozenset({session.peer_address})
        if platform == "eos":
            running = s.running_config()
            assert f"neighbor {session.peer_address} route-map FABRICD-DRAIN out" in running
            assert "set community 65535:0 additive" in running
        s.shift_session(session.peer_address, session.local_asn, False, revert_in_s=60, key="fabricd_m2_back")
        assert device not in tw.depreferred
        if platform == "eos":
            assert f"neighbor {session.peer_address} route-map" not in s.running_config()
            assert "route-map FABRICD-DRAIN" not in s.running_config()  # its definition went with its last use
        else:
            assert isinstance(s, SonicSession)
            assert "FABRICD-DRAIN" not in s._ok("vtysh -c 'show running-config'", "frr")
    finally:
        s.close()


def test_the_drain_map_stays_while_another_session_uses_it(twin: TwinThread) -> None:
    device = "spine-r0-0"
    underlay = Underlay(FABRIC)
    ends = [x for p in ("Ethernet1/1", "Ethernet2/1") if (x := underlay.session(device, p)) is not None]
    assert len(ends) == 2
    s = connect(twin, device)
    try:
        for n, e in enumerate(ends):
            s.shift_session(e.peer_address, e.local_asn, True, revert_in_s=60, key=f"fabricd_m5_{n}")
        s.shift_session(ends[0].peer_address, ends[0].local_asn, False, revert_in_s=60, key="fabricd_m5_back0")
        assert "route-map FABRICD-DRAIN permit 10" in s.running_config()  # the other session still uses it
        s.shift_session(ends[1].peer_address, ends[1].local_asn, False, revert_in_s=60, key="fabricd_m5_back1")
        assert "route-map FABRICD-DRAIN" not in s.running_config()
    finally:
        s.close()


@pytest.mark.parametrize("left", ["pending", "completed"])
def test_a_shift_step_taken_again_finds_its_session_by_name(twin: TwinThread, left: str) -> None:
    """EOS (issue 54): a drain's step a killed fabricd left pending under its timer is confirmed when taken again;
    one it left completed is committed again under a name of its own. Before: "Cannot enter session fabricd_m17_2
    (session is pending a commit timer)" / "(session is completed)"."""
    device = "spine-r0-1"
    s = connect(twin, device)
    try:
        key = f"fabricd_m17_{left}"
        assert isinstance(s, EosSession)
        s._commit_now(["maintenance", "unit System", "quiesce"], 60, key)  # the step as a killed fabricd left it
        if left == "completed":
            s.confirm()
        s.close()
        s = connect(twin, device)
        s.shift_traffic(True, revert_in_s=60, key=key)  # the step taken again
        assert in_maintenance(s)
        assert isinstance(s, EosSession)
        sessions = s._sessions()
        assert sessions.get("commitTimerSessionName") in (None, ""), sessions
        s.shift_traffic(False, revert_in_s=60, key=f"{key}_back")
        s.shift_traffic(False, revert_in_s=60, key=f"{key}_back")  # an undrain taken again: its session completed
        assert not in_maintenance(s)
    finally:
        s.close()


def test_a_key_committed_again_is_not_rolled_back_by_the_timer_of_its_decided_first_attempt(
    twin: TwinThread,
) -> None:
    # SONiC only. One instance (no leader token: the key repeats across its restarts) takes the confirm's decision
    # lock for its commit and dies before stopping the timer. Restarted, it finds that commit decided elsewhere and
    # commits the step again under the same key. The first timer, waking before the second commit is confirmed,
    # must not win a lock and roll back to a checkpoint: the second attempt is under a name of its own.
    # (Before: resume freed the lock, the new commit reused the names, and the old timer, finding the new pid
    # file, rolled the new commit back: its confirm failed "too late to confirm".)
    _, device, port = CASES[1]
    key = "fabricd_a7_00000007"
    old, new = connect(twin, device), connect(twin, device)
    guard = FencedAfter(1)  # the lock's mkdir goes out; the process dies before its next command
    try:
        old.set_port_admin(port, False, revert_in_s=3, key=key)
        timer_ends = time.monotonic() + 3
        old.guard = guard
        with pytest.raises(Refused):
            old.confirm()
        assert new.resume(key) == "none"  # decided by the dead one
        new.set_port_admin(port, False, revert_in_s=60, key=key)
        time.sleep(max(0.0, timer_ends + 0.6 - time.monotonic()))  # the first timer has ended, unconfirmed second
        assert up(new, port) is False
        new.confirm()
        assert up(new, port) is False
        assert new.resume(key) == "none"
        # a key still pending on the switch is not committed again beside it (its timer would undo both)
        new.set_port_admin(port, True, revert_in_s=60, key="fabricd_a9_00000009")
        other = connect(twin, device)
        try:
            with pytest.raises(DriverError, match="still pending; resume it first"):
                other.set_port_admin(port, True, revert_in_s=60, key="fabricd_a9_00000009")
        finally:
            other.close()
        new.confirm()
        assert up(new, port) is True
    finally:
        old.abandon()
        new.close()


def test_a_sonic_command_of_an_older_leader_is_refused_by_the_switch_once_a_newer_leader_raised_its_fence(
    twin: TwinThread,
) -> None:
    # SONiC only (EOS refuses a second commit timer by itself; its late request is ended by the new leader's commit or
    # sweep). Leader 20 raises the switch's fence before its commit (abort_stale), as every leader's commit does; it
    # is then paused past its own guard. Leader 21 raises the fence: the old leader's next command, already past every
    # check fabricd makes, reaches the switch and is refused there: nothing of it runs, no timer, no pid file.
    # (Before, its one command past the guard ran: a revert timer started under its token, which nobody owned.)
    # Tokens above the other tests': the module's twin keeps the newest leader's token file.
    _, device, port = CASES[1]
    old, new = connect(twin, device), connect(twin, device)
    try:
        assert old.abort_stale(20, keep=()) == []
        old.set_port_admin(port, False, revert_in_s=60, key="fabricd_t20_a1_00000001")
        old.confirm()
        assert new.abort_stale(21, keep=()) == []
        with pytest.raises(DriverError, match="refused by the switch"):
            old.set_port_admin(port, True, revert_in_s=60, key="fabricd_t20_a2_00000002")
        again = connect(twin, device)  # nor can a new session of leader 20 raise the fence back
        try:
            with pytest.raises(DriverError, match=r"a newer leader \(token 21\)"):
                again.abort_stale(20, keep=())
        finally:
            again.close()
        assert up(new, port) is False  # the port stays as leader 20 left it when it still led
        assert isinstance(new, SonicSession)
        assert "fabricd_t20_a2" not in new._run("ls /tmp/")[1]  # no pid file, no lock of the refused commit
        new.set_port_admin(port, True, revert_in_s=60, key="fabricd_t21_a3_00000003")
        new.confirm()
        assert up(new, port) is True
    finally:
        old.abandon()
        new.close()


@pytest.mark.parametrize(("platform", "device", "port"), CASES, ids=[c[0] for c in CASES])
def test_a_loaded_change_named_by_a_leaders_key_left_pending_is_ended_by_a_newer_leader(
    twin: TwinThread, platform: str, device: str, port: str
) -> None:
    # A tuning push (a plan's commands loaded, committed under the timer) named with its leader's token, and that
    # leader paused before confirming: the next leader ends it by the token in its name, as it ends a port action's.
    # (Tokens above the module's earlier tests': a SONiC switch keeps the highest leader fence it was shown.)
    from fabricd.service.tuning.push import overlay
    from fabricd.tuning.propose import Knob
    from policies.intent import derive_intent
    from policies.policy import load_policy
    from topology.spec import load_spec as spec_of

    driver = get_driver(platform)
    intent = derive_intent(FABRIC, spec_of(SPEC), load_policy(None), {device})
    changed = overlay(intent, FABRIC, {f"{device}:{port}": {Knob.KMIN: 123_456}})
    (dev,) = [d for d in changed.devices if d.device == device]
    old = connect(twin, device)
    before = old.running_config()
    plan = driver.plan(device, before, driver.render(dev), {p.port for p in dev.ports})
    assert plan.error is None and plan.changed
    old.load(plan.commands, key="fabricd_t9005_tune_a1b2c3")
    old.commit(60)
    old.abandon()  # the paused leader: not a word more
    new = connect(twin, device)
    try:
        assert new.running_config() != before  # committed, pending under its timer
        assert new.abort_stale(9005, keep=()) == []  # not older than 9005
        assert new.abort_stale(9006, keep=()) == ["fabricd_t9005_tune_a1b2c3"]
        assert new.running_config() == before  # rolled back
        assert new.abort_stale(9006, keep=()) == []
    finally:
        new.close()
