"""The chaos checker reads SONiC switches over SSH as an operator would (lab/chaos/observe.py `Switches`,
sonic_show.py): a twin of examples/small-sonic.yaml (SONiC leaves under EOS spines), real sockets, a real SSH client.
What fabricd's SONiC driver writes (a shutdown with its mark in the description) and what the run's operator types
(`sudo config interface shutdown`) show in the samples; LLDP and BGP land on the blueprint's ports; a switch that stops
answering is silent and read again once it answers."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator

import pytest

from drivers.inventory import load_inventory
from drivers.marks import Mark
from drivers.sonic.session import SonicSession
from lab.chaos.facts import FabricFacts
from lab.chaos.history import PortObs
from lab.chaos.observe import ChaosError, Switches, read_inventory
from tests.conftest import EXAMPLES, free_port
from tests.twin.lab.twin_thread import TwinThread
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import FabricSpec, load_spec

LEAF = "leaf-g0-r0"
SAMPLE_S = 1.0  # the chaos run samples once a second


@pytest.fixture(scope="module")
def spec() -> FabricSpec:
    return load_spec(EXAMPLES / "small-sonic.yaml")


@pytest.fixture(scope="module")
def facts(spec: FabricSpec) -> FabricFacts:
    return FabricFacts.of(Fabric(generate_blueprint(spec)), spec.name)


@pytest.fixture(scope="module")
def twin(spec: FabricSpec, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(spec, tmp_path_factory.mktemp("chaos-sonic")).start()
    yield t
    t.stop()


@pytest.fixture
def switches(twin: TwinThread, facts: FabricFacts) -> Iterator[Switches]:
    s = Switches(read_inventory(twin.inventory), facts)
    yield s
    s.close()


def until(switches: Switches, ok: Callable[[dict[str, PortObs], frozenset[str]], bool], timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        ports, silent = switches.sample()
        if ok(ports, silent):
            return
        assert time.monotonic() < deadline, (ports, silent)
        time.sleep(0.2)


def leaf_ports(facts: FabricFacts, leaf: str) -> list[str]:
    return sorted(p for p in facts.peer if p.startswith(leaf + ":"))


def test_sonic_leaves_are_read_with_lldp_and_bgp_on_their_ports(switches: Switches, facts: FabricFacts) -> None:
    leaves = sorted(d for d in facts.switches if d.startswith("leaf-"))
    assert set(switches.sonic) == set(leaves) and switches.not_read == []
    uplink = facts.uplinks_of[LEAF][0]
    server = next(p for p in facts.server_ports if p.startswith(LEAF + ":"))
    # LLDP learns a neighbour a while after a port comes up
    until(switches, lambda ports, _: ports[uplink].neighbor is not None and ports[server].neighbor is not None)
    took = []
    for _ in range(3):
        started = time.monotonic()
        ports, silent = switches.sample()
        took.append(time.monotonic() - started)
    assert silent == frozenset()
    assert set(leaf_ports(facts, LEAF)) <= set(ports)
    assert all(set(leaf_ports(facts, leaf)) <= set(ports) for leaf in leaves)
    up = ports[uplink]
    assert (up.admin_up, up.oper_up, up.description) == (True, True, "")
    assert up.neighbor == facts.peer[uplink]  # spine-r0-N:EthernetK/1, as the spine's EOS names it
    assert up.bgp_up is True
    assert ports[server].neighbor == facts.peer[server] and ports[server].bgp_up is None  # gpu-g0-000:nic0
    # the EOS spine hears the SONiC leaf's alias (etpN) and the checker names it by the blueprint
    assert ports[facts.peer[uplink]].neighbor == uplink
    assert max(took) < SAMPLE_S / 2, took  # the persistent connections leave most of the second free


def test_fabricds_mark_and_an_operators_shutdown_show(twin: TwinThread, switches: Switches, facts: FabricFacts) -> None:
    marked, by_hand = facts.uplinks_of[LEAF][0], facts.server_ports[0]
    assert marked.startswith(LEAF) and by_hand.startswith(LEAF)
    driver = SonicSession(load_inventory(twin.inventory).access(LEAF), timeout_s=10)
    try:
        # what fabricd's SONiC driver does to a port it shuts: admin down and its mark in PORT|EthernetM description
        driver.set_port_admin(marked.split(":")[1], up=False, revert_in_s=60, mark=Mark(12, 7, "link_flap"))
        driver.confirm()
        until(switches, lambda ports, _: not ports[marked].admin_up)
        ports, _ = switches.sample()
        assert ports[marked].description == "[fabricd: down a12 t7 link_flap]" and ports[marked].marked
        assert not ports[marked].oper_up and ports[marked].bgp_up is False
        assert ports[facts.peer[marked]].oper_up is False  # the spine's end went down with it

        switches.set_admin(by_hand, False)  # the run's operator: sudo config interface shutdown EthernetM
        ports, _ = switches.sample()
        assert (ports[by_hand].admin_up, ports[by_hand].oper_up, ports[by_hand].description) == (False, False, "")
        switches.set_admin(by_hand, True)
        until(switches, lambda ports, _: ports[by_hand].admin_up and ports[by_hand].oper_up)
        with pytest.raises(ChaosError, match="config interface shutdown Ethernet792"):
            switches.set_admin(f"{LEAF}:Ethernet100/1", False)  # no such port: the switch refuses, the run hears it
    finally:
        driver.set_port_admin(marked.split(":")[1], up=True, revert_in_s=60)
        driver.confirm()
        driver.close()
    until(switches, lambda ports, _: ports[marked].admin_up and ports[marked].description == "")


def test_a_switch_that_does_not_answer_is_silent_then_read_again(twin: TwinThread, facts: FabricFacts) -> None:
    access = read_inventory(twin.inventory)
    closed = dataclasses.replace(access[LEAF], ssh_port=free_port())  # nothing listens there
    s = Switches({**access, LEAF: closed}, facts, timeout_s=1.0)
    try:
        ports, silent = s.sample()
        assert silent == {LEAF} and not any(p.startswith(LEAF + ":") for p in ports)
        assert "leaf-g0-r1:Ethernet1/1" in ports
    finally:
        s.close()
    s = Switches(access, facts)
    try:
        assert s.sample()[1] == frozenset()
        connection = s.sonic[LEAF].client
        s.sample()
        assert s.sonic[LEAF].client is connection  # one connection, kept from sample to sample
        assert connection is not None
        connection.close()  # the connection drops (a reboot, a restarted sshd): the next sample connects again
        ports, silent = s.sample()
        assert silent == frozenset() and f"{LEAF}:Ethernet1/1" in ports
        assert s.sonic[LEAF].client is not connection
    finally:
        s.close()
