"""link_flap over a time fabricd was not watching: a restart, a kill -9, an upgrade, a leaderless gap in HA.

link_flap counts flaps as they stream (oper-status events, carrier-transitions samples); while fabricd is down it
sees none, and when it is back the port is up and stable: nothing to find. The switch's carrier-transitions counter
kept counting. The service remembers each port's last value (fabricd/service/carrier_watch.py); `missed` compares it
with the first fresh sample after a start or takeover: a rise of at least a flap train (what link_flap needs to call
a link flapping) within `unwatched_max_s` is a link_flap finding with `unwatched` evidence. When within the gap the
flaps fell is not known (a counter only), so the train is judged by its count alone, as if the flaps came at once.
A pure function: no socket, no clock, no state.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

from topology.fabric import Fabric
from topology.units import NS

from .finding import Finding
from .link_flap import LinkFlapConfig, _link_ends, _origin_end


@dataclass(frozen=True)
class CarrierSample:
    """One port's carrier-transitions value and when it held (remembered: the last time fabricd knew it held)."""

    value: int
    ts: int  # unix ns


def flap_train(cfg: LinkFlapConfig) -> int:
    """The fewest flaps link_flap calls a link flapping: n flaps at once leave a penalty of n * penalty, a finding
    once above suppress (5 with the defaults: 4 flaps, even at once, are not a finding)."""
    return math.floor(cfg.suppress / cfg.penalty) + 1


def _utc(ts: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts / NS))


def missed(
    remembered: Mapping[str, CarrierSample],
    fresh: Mapping[str, CarrierSample],
    fabric: Fabric,
    cfg: LinkFlapConfig,
    now: int,
) -> list[Finding]:
    """Per link, the flaps its carrier-transitions counters show between the remembered value ("device:port" ->
    sample) and the first fresh one: a finding when they make a flap train. Both ends of a link count one flap once
    (the end that counted more speaks for the link). A counter that went back (the switch rebooted, or its counters
    were cleared) shows no flap; a remembered value older than `unwatched_max_s` is history, not an incident."""
    best: dict[tuple[str, ...], tuple[int, str, CarrierSample, CarrierSample]] = {}
    window = int(cfg.unwatched_max_s * NS)
    for end, new in fresh.items():
        old = remembered.get(end)
        if old is None or new.ts <= old.ts or new.ts - old.ts > window:
            continue
        rise = new.value - old.value
        if rise <= 0:
            continue
        device, port = end.split(":", 1)
        ends = _link_ends(fabric, device, port)
        seen = best.get(ends)
        if seen is None or (rise, end) > (seen[0], seen[1]):
            best[ends] = (rise, end, old, new)
    train = flap_train(cfg)
    out = []
    for ends, (rise, end, old, new) in sorted(best.items()):
        flaps = math.ceil(rise / 2)  # two transitions a flap (down, up); a lone one is a link left down
        if flaps < train:
            continue
        device, port = _origin_end(ends, fabric).split(":", 1)
        out.append(
            Finding(
                kind="link_flap",
                device=device,
                port=port,
                devices=tuple(sorted({e.split(":", 1)[0] for e in ends})),
                ports=ends,
                start_ts=old.ts,
                detected_ts=now,
                severity="warning",
                confidence=0.8,  # a counter only: no event shows when the flaps were
                summary=f"link {'--'.join(ends)} went down {flaps} times while fabricd was not watching (between "
                f"{_utc(old.ts)} and {_utc(new.ts)})",
                evidence={
                    "unwatched": {"from_ts": old.ts, "to_ts": new.ts, "transitions": rise},
                    "flaps": flaps,
                    "counted_at": end,
                    "flap_train": train,
                },
            )
        )
    return out
