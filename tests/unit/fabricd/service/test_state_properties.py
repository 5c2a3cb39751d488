"""A property of the state layer (hypothesis): whatever sequence of writes ran, wherever a kill stopped it (the files
as they were at that moment, a transaction open or not), and whatever damage the rows or the file took after, a
start either refuses with one line (the CLI's exit 2) or succeeds and then serves: the remediator's reconcile, a
detector's finding, a reconcile pass and every read the API, health and /metrics make raise nothing but a StateError
(which the service's passes take as a failed write: state.WriteHealth), and nothing is logged with a traceback.
The real processes of the same property are in tests/twin/fabricd/service/test_state_processes.py."""

from __future__ import annotations

import itertools
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fabricd.service.state import StateStore, Ticket
from fabricd.service.state.db import StateError
from tests.state_damage import apply_damage, damages
from topology.fabric import Fabric
from topology.model import Endpoint

from .harness import Clock, Harness, World, flap, make_remediator, report, run

PORTS = [
    Endpoint("leaf-g0-r0", "Ethernet1/1"),
    Endpoint("leaf-g0-r1", "Ethernet2/1"),
    Endpoint("leaf-g1-r2", "Ethernet3/1"),
]

_tokens = itertools.count()

# --- what ran before the kill ----------------------------------------------------------------------------------
writes = st.lists(
    st.one_of(
        st.tuples(st.just("flap"), st.sampled_from(PORTS)),
        st.tuples(st.just("resolve"), st.integers(1, 4)),
        st.tuples(st.just("token"), st.sampled_from(["alice", "bob", "carol"])),
        st.tuples(st.just("mode"), st.sampled_from(["observe", "approve", "auto"])),
        st.tuples(st.just("advance"), st.integers(1, 900)),
    ),
    min_size=1,
    max_size=6,
)
# the kill: after how many writes, and whether inside a transaction with a write of its own (the files as they
# are then: what the disk holds when the process is killed)
kills = st.tuples(st.integers(1, 6), st.booleans())


def write(h: Harness, op: tuple[Any, ...], fabric: Fabric) -> None:
    kind = op[0]
    if kind == "flap":
        run(report(h, flap(fabric, op[1], h.clock())))
    elif kind == "resolve":
        if (t := h.state.tickets.get(op[1])) is not None and t.status == "open":
            run(h.rem.requests.resolve(t.id, "alice"))
    elif kind == "token":
        h.state.access.add_token(op[1], "viewer", f"hash-{op[1]}-{next(_tokens)}", h.clock(), "test")
    elif kind == "mode":
        h.state.mode.set(op[1], "alice", "test", h.clock())
    else:
        h.clock.advance(op[1])


class Crashed:
    """The files of the state as a kill would leave them: copied while the store (and maybe a transaction) is open."""

    def __init__(self, src: Path, dst: Path) -> None:
        for suffix in ("", "-wal"):
            f = src.with_name(src.name + suffix)
            if f.exists():
                shutil.copyfile(f, dst.with_name(dst.name + suffix))


def serve(store: StateStore, fabric: Fabric) -> None:
    """What a started service does with the state in its first passes and on its API, health and /metrics."""
    h = harness(store, fabric)
    h.clock.advance(3600)
    for work in (
        lambda: run(h.rem.reconciler.reconcile()),
        lambda: run(report(h, flap(fabric, PORTS[0], h.clock()))),
        lambda: run(h.rem.reconciler.reconcile_pass(h.clock(), ())),
    ):
        try:
            work()
        except StateError as e:  # a pass that fails on the state: guarded (passes.py), the service goes on
            assert "\n" not in str(e)
    clock = h.clock
    store.tickets.all("open"), store.tickets.all(), store.tickets.unsynced(), store.tickets.open_ids()
    store.actions.all(), store.actions.with_status("running", "awaiting_approval"), store.holds.all()
    store.findings.all("active", limit=100_000), store.findings.counts(), store.actions.counts()
    store.audit.entries(), store.access.tokens(), store.mode.override(), store.quarantine.entries()
    store.holds.probation("leaf-g0-r0", "Ethernet1/1", clock()), store.access.token_by_hash("hash-alice")


def harness(state: StateStore, fabric: Fabric) -> Harness:
    world, clock, published = World(), Clock(), list[Ticket]()
    return Harness(fabric, state, world, clock, make_remediator(fabric, state, world, clock, published), published)


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(ops=writes, kill=kills, damage=damages)
def test_a_start_refuses_in_one_line_or_serves(
    tmp_path_factory: pytest.TempPathFactory, small: Fabric, caplog: pytest.LogCaptureFixture,
    ops: list[tuple[Any, ...]], kill: tuple[int, bool], damage: list[tuple[Any, ...]],
) -> None:  # fmt: skip
    tmp = tmp_path_factory.mktemp("prop")
    live, image = tmp / "live.db", tmp / "state.db"
    h = harness(StateStore(live), small)
    at, in_tx = kill
    for op in ops[:at]:
        write(h, op, small)
    if in_tx:
        with h.state.transaction():
            h.state.audit.record(h.clock(), "half-done", "killed inside a transaction")
            Crashed(live, image)
    else:
        Crashed(live, image)
    h.state.close()
    apply_damage(image, damage)

    caplog.clear()
    caplog.set_level(logging.WARNING)
    try:
        store = StateStore(image, owner=True)
        store.scan()
    except StateError as e:
        assert "\n" not in str(e) and str(image) in str(e), str(e)  # exit 2, one line naming the file
        event("refused: " + str(e).removeprefix(f"{image}: ").split(" (")[0].split(";")[0])
        return
    event(f"served, {len(store.quarantine.entries())} row(s) quarantined")
    try:
        serve(store, small)
    finally:
        store.close()
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert not tracebacks, tracebacks[0].getMessage()
