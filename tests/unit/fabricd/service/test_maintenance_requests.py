"""Drain and undrain through the remediator (the service's I/O of maintenance.py): recorded before anything else,
audited with the user, counted by the guard from then on, refused in one line with nothing written; a fault on the
drained switch opens no ticket, a fault elsewhere is judged with the drain counted. On the pod with 4 spines per
rail (a spine drained leaves each of its leaves exactly 75 %)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from fabricd.service.maintenance.drains import DrainRefusedError
from fabricd.service.maintenance.plan import MaintenanceInputError
from fabricd.service.remediation.errors import ActionError
from fabricd.service.remediation.wiring import Remediation
from fabricd.service.state import DrainRecord
from topology.fabric import Fabric
from topology.model import Endpoint
from topology.units import NS

from .harness import T0, Harness, flap, pod_variant, report, run

HOUR_LATER = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 / NS + 3600))
LEAF_UP = Endpoint("leaf-g0-r0", "Ethernet5/1")  # to spine-r0-0:Ethernet1/1
SPINE_END = Endpoint("spine-r0-0", "Ethernet1/1")


@pytest.fixture(scope="module")
def four(tmp_path_factory: pytest.TempPathFactory) -> Fabric:
    return pod_variant(tmp_path_factory.mktemp("four-spines"), spines_per_rail=4)


@pytest.fixture
def h(make: Callable[..., Harness], four: Fabric) -> Harness:
    return make(four)


def drains_written(h: Harness) -> int:
    return len(h.state.drains.all())


def test_a_spine_drain_is_recorded_audited_and_counted(h: Harness) -> None:
    p = run(h.rem.maintenance.drain("switch", "spine-r0-0", "alice", "NOS upgrade", until="2030-01-01T00:00Z"))
    d = p.drain
    assert d is not None and not p.dry_run
    assert (d.kind, d.target, d.state, d.done, d.actor, d.reason) == (
        "switch", "spine-r0-0", "draining", 1, "alice", "NOS upgrade")  # fmt: skip
    assert d.until_ts == 1_893_456_000 * NS and d.steps[0].startswith("guard: ")
    assert len(d.ports) == 2 * len(h.fabric.links_of("spine-r0-0")) and str(SPINE_END) in d.ports
    (audit,) = [a for a in h.state.audit.entries() if a["what"].startswith("drain ")]
    assert audit["what"] == f"drain {d.id} of switch spine-r0-0 begun" and audit["actor"] == "alice"
    assert audit["why"] == "NOS upgrade, until 2030-01-01T00:00:00Z"
    # the guard counts it: a leaf uplink to another spine may no longer go down (it would leave 50 %)
    v = h.rem.holds.guard(Endpoint("leaf-g0-r0", "Ethernet6/1"))
    assert (v.rule, v.reason) == (
        "capacity", "leaf-g0-r0 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75% limit")  # fmt: skip
    # a restart (or a standby taking over) sees it from the state
    assert SPINE_END in h.restart().holds.drained_ports()


def test_a_drain_that_leaves_a_leaf_under_75pct_is_refused_with_the_reason(h: Harness) -> None:
    h.world.oper[Endpoint("leaf-g0-r0", "Ethernet6/1")] = "DOWN"  # one uplink already down
    with pytest.raises(DrainRefusedError) as e:
        run(h.rem.maintenance.drain("switch", "spine-r0-0", "alice", "NOS upgrade"))
    assert str(e.value) == (
        "drain of switch spine-r0-0 refused by the guard (capacity): leaf-g0-r0 would keep 800 of 1600 Gb/s uplink "
        "capacity (50%), below the 75% limit"
    )
    assert drains_written(h) == 0
    (audit,) = [a for a in h.state.audit.entries() if "refused" in a["what"]]
    assert audit["what"] == "drain of switch spine-r0-0 refused" and audit["actor"] == "alice"


def test_an_admin_may_force_a_drain_the_guard_refuses_audited(h: Harness) -> None:
    h.world.oper[Endpoint("leaf-g0-r0", "Ethernet6/1")] = "DOWN"
    d = run(
        h.rem.maintenance.drain("switch", "spine-r0-0", "admin-ann", "the spine is failing anyway", force=True)
    ).drain
    assert d is not None and d.state == "draining"
    (audit,) = [a for a in h.state.audit.entries() if "forced" in a["what"]]
    assert audit["what"] == "drain of switch spine-r0-0 forced past the guard" and audit["actor"] == "admin-ann"
    assert audit["why"] == (
        "guard (capacity): leaf-g0-r0 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75% limit; "
        "forced by admin-ann: the spine is failing anyway"
    )


def test_dry_run_prints_the_steps_and_changes_nothing(h: Harness) -> None:
    p = run(h.rem.maintenance.drain("switch", "spine-r0-0", "alice", "NOS upgrade", shut=True, dry_run=True))
    assert p.dry_run and p.drain is None
    assert [s.split(":")[0] for s in p.steps] == ["guard", "shift", "verify", "shut", "hold", "drained"]
    assert drains_written(h) == 0 and h.state.audit.entries() == [] and h.world.calls == []


@pytest.mark.parametrize(
    ("kind", "name", "until", "message"),
    [
        ("switch", "spine-r9-0", None, "switch spine-r9-0: not a switch of the blueprint; see `fabricd topology`"),
        ("port", "leaf-g0-r0:Ethernet99/1", None,
         "port leaf-g0-r0:Ethernet99/1: Ethernet99/1 is not a cabled port of leaf-g0-r0 in the blueprint"),
        ("switch", "spine-r0-1", "2020-01-01T00:00Z",
         f"--until is in the past; give a time after now (UTC), e.g. {HOUR_LATER}"),
        ("switch", "spine-r0-1", "9999-01-01", "--until '9999-01-01': too far ahead; give a time before 2262"),
        ("switch", "spine-r0-1", "tomorrow", "--until 'tomorrow': not a time; give it as ISO 8601 UTC, e.g. "
         "2026-11-28T08:00Z"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_writes_nothing(h: Harness, kind: str, name: str, until: str | None,
                                                  message: str) -> None:  # fmt: skip
    with pytest.raises(MaintenanceInputError) as e:
        run(h.rem.maintenance.drain(kind, name, "alice", "work", until=until))  # type: ignore[arg-type]
    assert str(e.value) == message and "\n" not in message
    assert drains_written(h) == 0 and h.state.audit.entries() == []


def test_already_drained_and_not_drained(h: Harness) -> None:
    run(h.rem.maintenance.drain("link", str(LEAF_UP), "alice", "optic swap"))
    with pytest.raises(MaintenanceInputError, match=r"^switch spine-r0-0: leaf-g0-r0:Ethernet5/1 is already drained"):
        run(h.rem.maintenance.drain("switch", "spine-r0-0", "alice", "NOS upgrade"))
    with pytest.raises(MaintenanceInputError, match=r"^spine-r0-1 is not drained; see `fabricd maintenance`$"):
        run(h.rem.maintenance.undrain("spine-r0-1", "alice"))
    assert drains_written(h) == 1


def test_undrain_with_a_swapped_cable_stays_drained_and_names_the_cable(h: Harness) -> None:
    async def drained() -> DrainRecord | None:
        p = await h.rem.maintenance.drain("link", str(LEAF_UP), "alice", "optic swap")
        await h.rem.idle()
        return p.drain

    d = run(drained())
    assert d is not None
    wrong = Endpoint("spine-r0-0", "Ethernet2/1")  # the cable went back into the spine's next port
    h.world.lldp = {LEAF_UP: wrong, SPINE_END: Endpoint("leaf-g1-r0", "Ethernet5/1")}
    with pytest.raises(ActionError) as e:
        run(h.rem.maintenance.undrain(str(LEAF_UP), "bob"))
    assert str(e.value).startswith("link leaf-g0-r0:Ethernet5/1 stays drained: leaf-g0-r0:Ethernet5/1: ")
    assert "came up facing spine-r0-0:Ethernet2/1" in str(e.value) and "(then undrain again)" in str(e.value)
    again = h.state.drains.get(d.id)
    assert again is not None and again.state == "drained" and again.detail.startswith("undrain refused: ")
    assert LEAF_UP in h.rem.holds.drained_ports()
    assert any(a["what"] == f"undrain of drain {d.id} (link {LEAF_UP}) refused" and a["actor"] == "bob"
               for a in h.state.audit.entries())  # fmt: skip
    h.world.lldp = {LEAF_UP: SPINE_END, SPINE_END: LEAF_UP}  # the cable put back
    done = run(h.rem.maintenance.undrain(str(LEAF_UP), "bob"))
    assert done.state == "undrained" and h.rem.holds.drained_ports() == frozenset()


def test_faults_during_a_drain(h: Harness) -> None:
    run(h.rem.maintenance.drain("switch", "spine-r0-0", "alice", "NOS upgrade"))
    # a flap on a drained link (the work itself): recorded, no ticket, nothing done
    (o,) = run(report(h, flap(h.fabric, LEAF_UP)))
    assert o.ticket is None and o.action is None and h.tickets() == []
    assert any(a["what"].endswith("during maintenance") for a in h.state.audit.entries())
    # a flap elsewhere: ticketed, and judged with the drained capacity counted (refused: it would leave 50 %)
    (o,) = run(report(h, flap(h.fabric, Endpoint("leaf-g0-r0", "Ethernet6/1"), start_ts=T0 + 60 * NS)))
    assert o.ticket is not None and o.verdict is not None and o.verdict.rule == "capacity"
    assert o.action is None or o.action.status == "refused"


def drained_through(h: Harness, kind: str, name: str, **kw: object) -> DrainRecord:
    async def go() -> DrainRecord:
        p = await h.rem.maintenance.drain(kind, name, "alice", "work", **kw)  # type: ignore[arg-type]
        await h.rem.idle()
        assert p.drain is not None
        d = h.state.drains.get(p.drain.id)
        assert d is not None
        return d

    return run(go())


def test_a_spine_drain_is_carried_out_step_by_step(h: Harness) -> None:
    d = drained_through(h, "switch", "spine-r0-0")
    assert shifts(h) == [("shift_traffic", "spine-r0-0", True)]
    assert (d.state, d.done, len(d.steps), d.detail) == ("drained", 4, 4, "drained: done")
    # undrain: the traffic comes back to the spine once its ports check out
    h.world.lldp = {ep: p for ep in map(_ep, d.ports) if (p := h.fabric.peer(ep.device, ep.port)) is not None}
    done = run(h.rem.maintenance.undrain("spine-r0-0", "bob"))
    assert done.state == "undrained" and shifts(h)[-1] == ("shift_traffic", "spine-r0-0", False)


@pytest.mark.slow  # several seconds: CI runs it, `pytest tests/unit -m "not slow"` does not
def test_traffic_that_does_not_move_stops_the_drain_and_says_so(make: Callable[..., Harness], four: Fabric) -> None:
    h = make(four, maintenance={"shift_timeout_s": 0.01})  # remediation.maintenance in the config
    h.world.rates[SPINE_END] = 5e9
    d = drained_through(h, "switch", "spine-r0-0")
    assert (d.state, d.done) == ("stopped", 2)  # still counted by the guard: its traffic may have partly moved
    assert d.detail == (
        "stopped: traffic did not move away within 0.01 s: spine-r0-0:Ethernet1/1: 5e+09 b/s; left: shift traffic "
        "away from spine-r0-0; `fabricd undrain` brings them back"
    )
    assert SPINE_END in h.rem.holds.drained_ports()  # a stopped drain's ports stay counted
    # a stopped drain is undrained as any other: the traffic comes back
    h.world.lldp = {ep: p for ep in map(_ep, d.ports) if (p := h.fabric.peer(ep.device, ep.port)) is not None}
    h.world.rates[SPINE_END] = 0.0
    done = run(h.rem.maintenance.undrain("spine-r0-0", "bob"))
    assert done.state == "undrained" and shifts(h)[-1] == ("shift_traffic", "spine-r0-0", False)
    assert any(a["what"] == f"drain {d.id} of switch spine-r0-0 stopped" for a in h.state.audit.entries())


def test_a_link_drain_shuts_and_holds_its_ports_as_maintenance(h: Harness) -> None:
    d = drained_through(h, "link", str(LEAF_UP))
    assert shifts(h) == []  # maintenance mode is the whole switch's: the link's BGP session is drained instead
    assert (d.state, d.done, len(d.steps)) == ("drained", 7, 7)
    # both ends de-prefer the session first (RFC 8326), then the ports go down
    touched = [c[:4] for c in h.world.touched() if c[0] in ("shift_session", "set_port_admin")]
    assert touched[:2] == [("shift_session", "leaf-g0-r0", "10.0.0.0", True),
                           ("shift_session", "spine-r0-0", "10.0.0.1", True)]  # fmt: skip
    assert {c[0] for c in touched[2:]} == {"set_port_admin"}
    held = {(p["device"], p["port"]): p["ticket_id"] for p in h.state.holds.all()}
    assert held == {(LEAF_UP.device, LEAF_UP.port): None, (SPINE_END.device, SPINE_END.port): None}  # no ticket
    assert {ep: mk.kind for ep, mk in h.world.marks.items()} == {LEAF_UP: "maintenance", SPINE_END: "maintenance"}
    assert h.tickets() == [] and h.world.state(LEAF_UP) == "DOWN"
    # a flap elsewhere on the leaf is not refused by fabricd's own budgets for the maintenance holds
    assert h.rem.holds.known().held_down == frozenset()
    # undrain: the ports come back (LLDP checked), then the traffic
    h.world.lldp = {LEAF_UP: SPINE_END, SPINE_END: LEAF_UP}
    done = run(h.rem.maintenance.undrain(str(LEAF_UP), "bob"))
    assert done.state == "undrained" and h.state.holds.all() == [] and h.world.state(LEAF_UP) == "UP"
    assert shifts(h) == []
    last = [c[:4] for c in h.world.touched() if c[0] in ("shift_session", "set_port_admin")][-4:]
    assert last[2:] == [("shift_session", "leaf-g0-r0", "10.0.0.0", False),
                        ("shift_session", "spine-r0-0", "10.0.0.1", False)]  # fmt: skip
    assert {c[0] for c in last[:2]} == {"set_port_admin"}  # the ports came up (and were checked) first


def test_a_shut_drain_undrained_on_a_swapped_cable_stays_down_and_drained(h: Harness) -> None:
    d = drained_through(h, "port", str(LEAF_UP))
    assert d.state == "drained"
    h.world.lldp = {LEAF_UP: Endpoint("spine-r0-1", "Ethernet1/1")}
    with pytest.raises(ActionError, match=r"^port leaf-g0-r0:Ethernet5/1 stays drained: leaf-g0-r0:Ethernet5/1: "):
        run(h.rem.maintenance.undrain(str(LEAF_UP), "bob"))
    again = h.state.drains.get(d.id)
    assert again is not None and again.state == "drained" and h.world.state(LEAF_UP) == "DOWN"
    assert "spine-r0-1:Ethernet1/1" in again.detail, again.detail


def test_a_restart_resumes_a_drain_where_it_was_recorded(h: Harness) -> None:
    """A fabricd that died after recording the guard step: the next one takes the remaining steps, once."""
    steps = ["guard: x", "shift: x", "verify: x", "drained: x"]
    ports = [str(SPINE_END)]
    d = h.state.drains.add("switch", "spine-r0-0", ports, "upgrade", "alice", False, None, steps, 1, T0)
    rem = h.restart()
    assert run(resumed(rem)) == [d.id]
    again = h.state.drains.get(d.id)
    assert again is not None and (again.state, again.done) == ("drained", 4)
    assert shifts(h) == [("shift_traffic", "spine-r0-0", True)]
    assert run(resumed(rem)) == []  # nothing left: not taken twice


async def resumed(rem: Remediation) -> list[int]:
    """What a new leader does at its start: the drains left between steps carried on, until idle."""
    ids = rem.maintenance.resume_drains()
    await rem.idle()
    return ids


def shifts(h: Harness) -> list[tuple[object, ...]]:
    return [c for c in h.world.touched() if c[0] == "shift_traffic"]


def _ep(text: str) -> Endpoint:
    device, port = text.split(":", 1)
    return Endpoint(device, port)


def test_a_drain_past_its_until_is_a_finding_never_a_return(h: Harness) -> None:
    """'maintenance overran': one finding per drain from its --until on, refreshed every tick while the drain lasts
    (audited once), naming who, why and what to do; the ports stay drained; once undrained it is no longer reported
    (and cleared like any finding)."""
    d = drained_through(h, "port", str(LEAF_UP), until=HOUR_LATER)
    assert d.until_ts == T0 + 3600 * NS
    h.clock.now = d.until_ts
    assert h.rem.maintenance.report_overruns(h.clock.now) == []  # at the --until: not yet over it
    h.clock.advance(90)
    (f,) = h.rem.maintenance.report_overruns(h.clock.now)
    assert (f.kind, f.device, f.port, f.ports, f.start_ts) == (
        "maintenance_overran", LEAF_UP.device, LEAF_UP.port, (str(LEAF_UP),), d.until_ts,
    )  # fmt: skip
    assert f.summary == (
        f"maintenance overran: drain {d.id} of port {LEAF_UP} by alice (work) was to end by "
        f"{HOUR_LATER}, still drained 1 min 30 s later; fabricd never ends a drain: `fabricd undrain {LEAF_UP}` "
        "once the work is done"
    )
    h.clock.advance(60)
    (again,) = h.rem.maintenance.report_overruns(h.clock.now)
    assert again.key == f.key and again.evidence["late_s"] == 150
    (stored,) = [x for x in h.state.findings.all() if x["kind"] == "maintenance_overran"]
    assert stored["status"] == "active" and stored["last_seen_ts"] == h.clock.now
    audit = [r["what"] for r in h.state.audit.entries()]
    assert audit.count(f"drain {d.id} of port {LEAF_UP} overran") == 1
    drain = h.state.drains.get(d.id)
    assert drain is not None and drain.state == "drained" and h.world.state(LEAF_UP) == "DOWN"  # never a return

    h.world.lldp = {LEAF_UP: SPINE_END, SPINE_END: LEAF_UP}
    run(h.rem.maintenance.undrain(str(LEAF_UP), "bob"))
    h.clock.advance(5)
    assert h.rem.maintenance.report_overruns(h.clock.now) == []
    assert h.state.findings.clear_not_seen_since(h.clock.now - 2 * NS) == 1


def test_an_undrain_watches_the_counters_and_stays_drained_while_they_rise(
    make: Callable[..., Harness], four: Fabric
) -> None:
    """What maintenance most often leaves behind besides a swapped cable: a dirty optic. Back up, on the blueprint's
    cable, its error counters rising while the undrain watches: the drain stays, says so; clean, it ends."""
    h = make(four, maintenance={"undrain_watch_s": 0.2})
    d = drained_through(h, "link", str(LEAF_UP))
    h.world.lldp = {LEAF_UP: SPINE_END, SPINE_END: LEAF_UP}
    h.world.errors = {LEAF_UP: 100, SPINE_END: 7}
    h.world.errors_per_read = {LEAF_UP: 25}  # every read of the leaf's end finds 25 more errors
    with pytest.raises(ActionError) as e:
        run(h.rem.maintenance.undrain(str(LEAF_UP), "bob"))
    assert str(e.value) == (
        f"link {LEAF_UP} stays drained: {LEAF_UP}: error counters rose by 25 in 0.2 s (clean the optic or reseat "
        "the cable, then undrain again)"
    )
    again = h.state.drains.get(d.id)
    assert again is not None and again.state == "drained" and again.detail.startswith("undrain refused: ")
    # out of service again as the drain had it: both ends shut anew, held as maintenance, no ticket
    assert h.world.state(LEAF_UP) == h.world.state(SPINE_END) == "DOWN"
    held = {(p["device"], p["port"]): p["ticket_id"] for p in h.state.holds.all()}
    assert held == {(LEAF_UP.device, LEAF_UP.port): None, (SPINE_END.device, SPINE_END.port): None}
    assert {ep: mk.kind for ep, mk in h.world.marks.items()} == {LEAF_UP: "maintenance", SPINE_END: "maintenance"}
    downs = [a for a in h.state.actions.all() if a.op == "disable" and a.device == LEAF_UP.device]
    assert [a.status for a in downs] == ["done", "done"] and downs[0].key != downs[1].key
    h.world.errors_per_read = {}
    done = run(h.rem.maintenance.undrain(str(LEAF_UP), "bob"))
    assert done.state == "undrained" and h.world.state(LEAF_UP) == "UP" and h.state.holds.all() == []


@pytest.mark.parametrize("n", [2, 20])
def test_concurrent_undrains_of_one_drain_are_one_undrain(h: Harness, n: int) -> None:
    """Issue 54: n undrains of one drain at once (a client that timed out and retried): the first begins it, the
    others join it (the API answers each 202 with the drain's id); each port comes up once, the traffic comes back
    once, nothing is shut again. Before: each brought the ports up, the others' LLDP checks failed, and each shut
    them again."""
    d = drained_through(h, "link", str(LEAF_UP))
    h.world.lldp = {LEAF_UP: SPINE_END, SPINE_END: LEAF_UP}
    before = len(h.world.touched())

    async def all_at_once() -> tuple[list[bool], list[DrainRecord | BaseException]]:
        begun = [h.rem.maintenance.begin_undrain(str(LEAF_UP), f"user{i}")[1] for i in range(n)]
        ended = await asyncio.gather(*(h.rem.maintenance.undrain(str(LEAF_UP), f"user{i}") for i in range(n)),
                                     return_exceptions=True)  # fmt: skip
        await h.rem.idle()
        return begun, list(ended)

    begun, ended = run(all_at_once())
    assert begun == [True] + [False] * (n - 1)
    assert {x.state if isinstance(x, DrainRecord) else repr(x) for x in ended} == {"undrained"}
    after = [c[:4] for c in h.world.touched()[before:] if c[0] in ("shift_session", "set_port_admin")]
    assert sorted(after) == sorted([("set_port_admin", LEAF_UP.device, LEAF_UP.port, True),
                                    ("set_port_admin", SPINE_END.device, SPINE_END.port, True),
                                    ("shift_session", "leaf-g0-r0", "10.0.0.0", False),
                                    ("shift_session", "spine-r0-0", "10.0.0.1", False)])  # fmt: skip
    assert [a.op for a in h.state.actions.all() if a.op == "enable"] == ["enable", "enable"]
    assert h.state.drains.get(d.id).state == "undrained"  # type: ignore[union-attr]
    begun_audit = [a for a in h.state.audit.entries() if a["what"] == f"undrain of drain {d.id} (link {LEAF_UP}) begun"]
    assert len(begun_audit) == 1


def test_an_undrain_left_under_way_is_finished_by_the_next_fabricd(h: Harness) -> None:
    """Issue 54: a fabricd killed during an undrain after its ports came back left the drain `drained` with the
    ports up. The undrain is recorded (`undraining`) before a port comes up, so the next fabricd finishes it."""
    d = drained_through(h, "link", str(LEAF_UP))
    h.world.lldp = {LEAF_UP: SPINE_END, SPINE_END: LEAF_UP}
    # what the killed one left: the drain recorded as undraining, the ports up and no longer held
    h.state.drains.update(d.id, T0, state="undraining", detail="undrain by bob under way")
    for ep in (LEAF_UP, SPINE_END):
        h.state.holds.drop(ep.device, ep.port)
        h.world.admin[ep], h.world.oper[ep] = True, "UP"
    rem = h.restart()
    assert run(resumed(rem)) == [d.id]
    again = h.state.drains.get(d.id)
    assert again is not None and again.state == "undrained", again
    assert [c[:4] for c in h.world.touched() if c[0] == "shift_session"][-2:] == [
        ("shift_session", "leaf-g0-r0", "10.0.0.0", False),
        ("shift_session", "spine-r0-0", "10.0.0.1", False),
    ]


def test_a_port_drain_of_a_server_nic_shuts_its_leaf_port(h: Harness) -> None:
    """Issue 54: `drain port gpu-g0-000:nic0` (a server's own NIC) reported drained with nothing shut. It is drained
    as its link is: the leaf's port shut and held."""
    d = drained_through(h, "port", "gpu-g0-000:nic0")
    leaf = Endpoint("leaf-g0-r0", "Ethernet1/1")
    assert d.state == "drained" and sorted(d.ports) == ["gpu-g0-000:nic0", str(leaf)]
    assert [(c[1], c[2], c[3]) for c in h.world.touched() if c[0] == "set_port_admin"] == [
        (leaf.device, leaf.port, False)
    ]
    assert {(p["device"], p["port"]) for p in h.state.holds.all()} == {(leaf.device, leaf.port)}


def test_releasing_a_drained_port_says_to_undrain(h: Harness) -> None:
    """Issue 54: `fabricd release` of a maintenance hold said "resolve the ticket (ticket -)"; its way back is the
    undrain."""
    d = drained_through(h, "link", str(LEAF_UP))
    with pytest.raises(ActionError) as e:
        run(h.rem.requests.release_hold(LEAF_UP, "bob", "done"))
    assert str(e.value) == (
        f"{LEAF_UP} is down and held by drain {d.id} (link {LEAF_UP}): `fabricd undrain {LEAF_UP}` brings it back"
    )
