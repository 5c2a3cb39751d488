"""bgp_session over recorded traces of the small pod's underlay (both ends of a leaf uplink's session), table-driven:
what makes a finding (down with the link up, flapping, prefixes collapsed), what does not (a blip, the link itself
down, a healthy session), and which end it sits on. Plus `sessions_down`, what the guard counts."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from fabricd.detectors import run_trace
from fabricd.detectors.bgp_session import BgpSessionState, detect, sessions_down
from fabricd.detectors.runner import Detector
from fabricd.telemetry import CounterStore, Ingestor, render, replay
from tests.conftest import EXAMPLES
from topology.fabric import Fabric
from topology.load import load_fabric
from topology.model import Endpoint
from topology.underlay import Session, Underlay

from .tracegen import NS, T0, at

FABRIC = load_fabric(EXAMPLES / "small-pod.yaml", None)[1]
UNDERLAY = Underlay(FABRIC)
LEAF = "leaf-g0-r0"
S = UNDERLAY.sessions(LEAF)[0]  # the leaf's end of one uplink's session
_PEER = UNDERLAY.session(S.peer.device, S.peer.port)
assert _PEER is not None
PEER: Session = _PEER  # the spine's end
Line = dict[str, object]


class Trace:
    """Both ends of session S sampled every second: addresses, oper-status, session state and received prefixes."""

    def __init__(self) -> None:
        self.lines: list[Line] = []
        self.state = {S: "ESTABLISHED", PEER: "ESTABLISHED"}
        self.prefixes = {S: 16, PEER: 2}
        self.oper = {S: "UP", PEER: "UP"}
        self.transitions = {S: 1, PEER: 1}  # established-transitions: up once, when the sessions came up
        for s in (S, PEER):
            self.add(T0 - NS, s.local.device, s.local.port, "ipv4.ip", None, s.local_address)
            self.add(T0 - NS, s.local.device, s.local.port, "ipv4.prefix-length", None, 31)

    def add(self, ts: int, device: str, port: str, leaf: str, index: str | None, value: object) -> None:
        self.lines.append({"ts": ts, "device": device, "path": render(port, leaf, index), "value": value})

    def sample(self, ts: int) -> None:
        for s in (S, PEER):
            d = s.local.device
            self.add(ts, d, s.local.port, "oper-status", None, self.oper[s])
            self.add(ts, d, s.peer_address, "bgp.session-state", None, self.state[s])
            self.add(
                ts,
                d,
                s.peer_address,
                "bgp.prefixes-received",
                None,
                self.prefixes[s] * (self.state[s] == "ESTABLISHED"),
            )
            self.add(ts, d, s.peer_address, "bgp.peer-as", None, s.peer_asn)
            self.add(ts, d, s.peer_address, "bgp.established-transitions", None, self.transitions[s])

    def run(self, seconds: int, step: Callable[[Trace, int], None]) -> Trace:
        for k in range(seconds):
            step(self, k)
            self.sample(at(k))
        return self

    def write(self, path: Path) -> Path:
        self.lines.sort(key=lambda r: int(str(r["ts"])))
        path.write_text("".join(json.dumps(r) + "\n" for r in self.lines))
        return path


def session_down(start: int, end: int = 99, link: bool = True) -> Callable[[Trace, int], None]:
    def step(t: Trace, k: int) -> None:
        down = start <= k < end
        for s in (S, PEER):
            t.state[s] = "ACTIVE" if down else "ESTABLISHED"
            if not link:
                t.oper[s] = "DOWN" if down else "UP"
                t.state[s] = "IDLE" if down else "ESTABLISHED"

    return step


def flapping(times: int) -> Callable[[Trace, int], None]:
    def step(t: Trace, k: int) -> None:
        down = k >= 2 and (k - 2) % 3 == 0 and (k - 2) // 3 < times
        for s in (S, PEER):
            t.state[s] = "ACTIVE" if down else "ESTABLISHED"

    return step


def collapse(at_s: int, to: int) -> Callable[[Trace, int], None]:
    def step(t: Trace, k: int) -> None:
        t.prefixes[S] = to if k >= at_s else 16

    return step


def healthy(t: Trace, k: int) -> None:
    return None


def link_then_session(link_down: tuple[int, int], session_down: tuple[int, int]) -> Callable[[Trace, int], None]:
    """The link is down for `link_down` seconds; the session for `session_down` (it comes back later than the link:
    BGP re-establishes in seconds)."""

    def step(t: Trace, k: int) -> None:
        for s in (S, PEER):
            t.oper[s] = "DOWN" if link_down[0] <= k < link_down[1] else "UP"
            t.state[s] = (
                ("IDLE" if t.oper[s] == "DOWN" else "ACTIVE")
                if session_down[0] <= k < session_down[1]
                else ("ESTABLISHED")
            )

    return step


def short_drops(times: int) -> Callable[[Trace, int], None]:
    """Drops shorter than a sample: no state sample shows them, the established-transitions counter does."""

    def step(t: Trace, k: int) -> None:
        if k >= 2 and (k - 2) % 2 == 0 and (k - 2) // 2 < times:
            for s in (S, PEER):
                t.transitions[s] += 1

    return step


def link_flapping(times: int) -> Callable[[Trace, int], None]:
    """The link flaps; the session drops with it each time (the link's fault, not the session's)."""

    def step(t: Trace, k: int) -> None:
        down = k >= 2 and (k - 2) % 3 == 0 and (k - 2) // 3 < times
        for s in (S, PEER):
            if t.oper[s] == "DOWN" and not down:
                t.transitions[s] += 1
            t.oper[s] = "DOWN" if down else "UP"
            t.state[s] = "IDLE" if down else "ESTABLISHED"

    return step


def link_flapping_slow_return(times: int, link_s: int = 6) -> Callable[[Trace, int], None]:
    """The link goes down for `link_s` s every 15 s; the session drops with it and is back a second after the link
    (BGP's reconnect): its established-transitions counter rises then, seconds after the link went down (chaos seeds
    5150 and 8128, links down 5.5-13.1 s, called this a session flap)."""

    def step(t: Trace, k: int) -> None:
        j = (k - 2) % 15 if k >= 2 else -1
        flap = k >= 2 and (k - 2) // 15 < times
        for s in (S, PEER):
            t.oper[s] = "DOWN" if flap and 0 <= j < link_s else "UP"
            down = flap and 0 <= j < link_s + 1
            if t.state[s] != "ESTABLISHED" and not down:
                t.transitions[s] += 1
            t.state[s] = ("IDLE" if t.oper[s] == "DOWN" else "ACTIVE") if down else "ESTABLISHED"

    return step


DETECTOR = [Detector("bgp_session", detect, BgpSessionState)]

# trace -> (reason, start second) of the one finding, or None
CASES = [
    pytest.param(healthy, None, id="healthy"),
    pytest.param(session_down(3), ("down", 3), id="down-with-link-up"),
    pytest.param(session_down(3, 5), None, id="two-second-blip"),
    pytest.param(session_down(3, link=False), None, id="link-down-is-link-flap-s"),
    pytest.param(flapping(3), ("flapping", 2), id="three-drops-flapping"),
    pytest.param(flapping(2), None, id="two-drops-in-the-window"),
    pytest.param(collapse(4, 4), ("prefixes_collapsed", 4), id="prefixes-16-to-4"),
    pytest.param(collapse(4, 12), None, id="prefixes-16-to-12"),
    # the link's faults are not the session's: down with the link and back 1-2 s after it, or dropping with a flap
    pytest.param(link_then_session((3, 6), (3, 8)), None, id="back-two-seconds-after-its-link"),
    pytest.param(link_flapping(4), None, id="drops-with-a-flapping-link"),
    pytest.param(short_drops(3), ("flapping", 2), id="drops-shorter-than-a-sample"),
    # the link is back, the session is not: its own fault, counted from the link's return
    pytest.param(link_then_session((2, 4), (2, 99)), ("down", 2), id="stays-down-after-its-link-came-back"),
]


@pytest.mark.parametrize(("build", "want"), CASES)
def test_bgp_session(build: Callable[[Trace, int], None], want: tuple[str, int] | None, tmp_path: Path) -> None:
    trace = Trace().run(14, build).write(tmp_path / "t.jsonl")
    found = run_trace(trace, FABRIC, detectors=DETECTOR)
    if want is None:
        assert found == []
        return
    (f,) = found
    reason, start = want
    assert f.kind == "bgp_session" and f.evidence["reason"] == reason
    assert (f.device, f.port) == (LEAF, S.local.port)  # the leaf's end, not the spine's
    assert set(f.ports) == {str(S.local), str(S.peer)}
    assert f.start_ts // NS == at(start) // NS
    assert f.evidence["peer_address"] == S.peer_address and f.evidence["peer_as"] == S.peer_asn
    assert f.summary.startswith(f"BGP session {S.local} -> {S.peer} ({S.peer_address}) ")


def test_a_session_back_seconds_after_each_of_its_links_flaps_is_not_a_session_flap(tmp_path: Path) -> None:
    # the counter's rises come a second after the link is back, 7 s after it went down: the link's drops
    trace = Trace().run(64, link_flapping_slow_return(4)).write(tmp_path / "t.jsonl")
    assert run_trace(trace, FABRIC, detectors=DETECTOR) == []

    # the same returns with the link up all along are the session's own (flapping; each drop long enough to be
    # down on its own as well)
    def own(t: Trace, k: int) -> None:
        link_flapping_slow_return(4)(t, k)
        t.oper = {s: "UP" for s in t.oper}

    trace = Trace().run(64, own).write(tmp_path / "own.jsonl")
    assert "flapping" in {f.evidence["reason"] for f in run_trace(trace, FABRIC, detectors=DETECTOR)}


def test_a_links_drops_stay_the_links_as_they_age_out_of_the_window(tmp_path: Path) -> None:
    """Chaos seed 8128 (+275.8 s, +323.0 s): 120 s after a link's flaps, its going down aged out of the window before
    the session returns it explained, which then counted as the session's own ("left ESTABLISHED 3 times in 120 s
    with its link up") on a session that had been up for two minutes. Here the link flaps (down a second) and the
    session's established-transitions counter rises by 3 three seconds later (3 short drops, the link's); passes
    every 0.1 s until 130 s on."""

    def step(tr: Trace, k: int) -> None:
        for s in (S, PEER):
            tr.oper[s] = "DOWN" if k == 2 else "UP"
            if k == 5:
                tr.transitions[s] += 3

    trace = Trace().run(130, step).write(tmp_path / "t.jsonl")
    assert run_trace(trace, FABRIC, detectors=DETECTOR, tick_s=0.1) == []


def snapshot_of(trace: Path, fabric: Fabric) -> frozenset[Endpoint]:
    ing = Ingestor(CounterStore())
    replay(trace, ing)
    return sessions_down(ing.snapshot(), fabric)


def test_sessions_down_names_both_ends_of_a_session_that_is_down_now(tmp_path: Path) -> None:
    up = Trace().run(3, healthy).write(tmp_path / "up.jsonl")
    assert snapshot_of(up, FABRIC) == frozenset()
    down = Trace().run(3, session_down(2)).write(tmp_path / "down.jsonl")
    assert snapshot_of(down, FABRIC) == {S.local, S.peer}


def test_without_streamed_addresses_the_underlay_plan_names_the_port(tmp_path: Path) -> None:
    """A switch that streams no port address (SONiC: NEIGH_STATE_TABLE is keyed by the neighbour's address alone)
    has its sessions matched to ports by the underlay's plan: the same one finding, on the leaf's uplink."""
    t = Trace()
    t.lines = [r for r in t.lines if "ipv4" not in str(r["path"])]
    path = t.run(8, session_down(2)).write(tmp_path / "t.jsonl")
    (f,) = run_trace(path, FABRIC, detectors=DETECTOR)
    assert (f.device, f.port, f.evidence["peer_address"]) == (LEAF, S.local.port, S.peer_address)
    assert set(f.ports) == {str(S.local), str(S.peer)} and f.confidence > 0.9
    assert snapshot_of(path, FABRIC) == {S.local, S.peer}  # what the guard counts as lost capacity, the same


def test_a_neighbour_outside_every_streamed_subnet_has_no_port(tmp_path: Path) -> None:
    """A switch that streams its addresses is matched by them alone: a neighbour outside every subnet (here each
    port streams a /32) has no port and no link; each end reports its own session at a lower confidence."""
    t = Trace()
    t.lines = [{**r, "value": 32} if "prefix-length" in str(r["path"]) else r for r in t.lines]
    path = t.run(8, session_down(2)).write(tmp_path / "t.jsonl")
    found = run_trace(path, FABRIC, detectors=DETECTOR)
    assert sorted((f.device, f.port, f.evidence["peer_address"]) for f in found) == sorted(
        [(LEAF, None, S.peer_address), (S.peer.device, None, S.local_address)]
    )
    assert all(f.confidence < 0.9 and f.evidence["reason"] == "down" for f in found)


def test_the_ends_seeing_it_apart_still_make_one_finding_on_the_leaf(tmp_path: Path) -> None:
    """The spine's samples show the session down 2 s longer than the leaf's (each switch samples on its own):
    one incident, always on the leaf's end, with the leaf's neighbour address, from the first onset."""

    def step(t: Trace, k: int) -> None:
        t.state[S] = "ACTIVE" if 2 <= k < 9 else "ESTABLISHED"
        t.state[PEER] = "ACTIVE" if 3 <= k < 11 else "ESTABLISHED"

    (f,) = run_trace(Trace().run(14, step).write(tmp_path / "t.jsonl"), FABRIC, detectors=DETECTOR)
    assert (f.device, f.port) == (LEAF, S.local.port) and f.evidence["reason"] == "down"
    assert f.evidence["peer_address"] == S.peer_address and f.start_ts == at(2)
    assert f.summary.startswith(f"BGP session {S.local} -> {S.peer} ({S.peer_address}) is ACTIVE for ")
