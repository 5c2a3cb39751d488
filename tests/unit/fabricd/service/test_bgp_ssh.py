"""SONiC's BGP state over SSH (fabricd/service/bgp_ssh.py): which switches are read over SSH, and a read fed to the
store as the NEIGH_STATE_TABLE rows bgpmon would have streamed (the same series, so bgp_session reads it unchanged)."""

from __future__ import annotations

import pytest

from fabricd.service.bgp_ssh import notification, over_ssh
from fabricd.telemetry import CounterStore, Ingestor, Stat

S = 10**9
SYNCED = {"leaf-a": 0, "leaf-b": 0, "leaf-c": 20 * S, "spine-x": 0}
PLANNED = {"leaf-a", "leaf-b", "leaf-c"}  # spine-x: no BGP session planned on it


@pytest.mark.parametrize(
    ("now", "streamed", "chosen"),
    [
        (29 * S, set(), set()),  # not synced for 30 s yet: bgpmon may still be to write its first rows
        (30 * S, set(), {"leaf-a", "leaf-b"}),  # leaf-c synced later; spine-x has no session to read
        (30 * S, {"leaf-a"}, {"leaf-b"}),  # leaf-a streams its neighbours' state: it stays on gNMI
        (50 * S, {"leaf-a", "leaf-b", "leaf-c"}, set()),
        (50 * S, set(), {"leaf-a", "leaf-b", "leaf-c"}),
    ],
)
def test_a_synced_sonic_switch_without_streamed_bgp_state_is_read_over_ssh(
    now: int, streamed: set[str], chosen: set[str]
) -> None:
    assert over_ssh(now, SYNCED, PLANNED, streamed, 30 * S) == chosen


def test_a_read_feeds_the_series_a_streamed_neigh_state_row_does() -> None:
    """What SSH read is stored as STATE_DB's rows are (OpenConfig's session-state per neighbour address), and a
    neighbour FRR no longer lists is forgotten, as bgpmon's delete does."""
    ing = Ingestor(CounterStore())
    dev = "leaf-g0-r0"
    ing.ingest(notification({"10.0.0.0": "ESTABLISHED", "10.0.0.2": "IDLE"}, (), 5 * S), dev)
    snap = ing.snapshot()
    rows = {a: snap.find(dev, a, "bgp.session-state") for a in ("10.0.0.0", "10.0.0.2")}
    got = {a: snap.text(i) for a, i in rows.items() if i is not None}
    assert got == {"10.0.0.0": "ESTABLISHED", "10.0.0.2": "IDLE"}
    ing.ingest(notification({"10.0.0.0": "ACTIVE"}, {"10.0.0.2"}, 6 * S), dev)
    snap = ing.snapshot()
    i = snap.find(dev, "10.0.0.0", "bgp.session-state")
    assert i is not None and snap.text(i) == "ACTIVE"
    gone = snap.find(dev, "10.0.0.2", "bgp.session-state")
    assert gone is None or not snap.text(gone)
    assert snap.stat(dev, Stat.UNKNOWN) == 0 and snap.stat(dev, Stat.DELETES) == 1
