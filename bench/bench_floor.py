"""The capacity floor's optimizer (fabricd/service/capacity_floor.py `choose`, CorrOpt's set choice, issue 49): how
long one decision takes with N faulty candidates spread over a fabric's uplinks, against the same search over all
candidates at once (the baseline, measured in the same run: what `choose` did before it split the candidates into
groups that share a switch). The service makes this decision on its event loop every detector pass while anything
is held: a chaos run on small-pod saw the loop stalled 1-2.5 s by it (fabricd/service/loop_watch.py).

Run: .venv/bin/python bench/bench_floor.py [--spec examples/small-pod.yaml] [--candidates 8,12,16,20]
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fabricd.service import capacity_floor
from fabricd.service.capacity_floor import Floor, Held, Lost, choose, uplink_ends
from topology.fabric import Fabric
from topology.load import load_fabric
from topology.model import Endpoint

REPO = Path(__file__).resolve().parent.parent


def case(fabric: Fabric, n: int, seed: int) -> tuple[Floor, list[Held], frozenset[Endpoint]]:
    """N candidates on random uplinks (a third of them held), two other uplinks lost, floor 75 %."""
    rng = random.Random(seed)
    ports = uplink_ends(fabric)
    rng.shuffle(ports)
    cands = [Held(p, rng.random() * 0.01) for p in ports[:n]]
    lost = {ports[n]: Lost.BGP_DOWN, ports[n + 1]: Lost.LINK_DOWN}
    return Floor(lost, 0.75), cands, frozenset(c.port for c in cands[: n // 3])


def timed(
    fabric: Fabric, floor: Floor, cands: list[Held], held: frozenset[Endpoint], whole: bool
) -> tuple[float, float]:
    """(seconds, loss left) of one decision; `whole`: every candidate in one group (the baseline search)."""
    groups = capacity_floor._groups
    if whole:
        capacity_floor._groups = lambda _fabric, c: [list(c)]  # type: ignore[assignment]  # the baseline's search
    try:
        t = time.perf_counter()
        got = choose(fabric, floor, cands, held)
        return time.perf_counter() - t, got.loss_left
    finally:
        capacity_floor._groups = groups


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default=str(REPO / "examples" / "small-pod.yaml"))
    ap.add_argument("--candidates", default="8,12,16,20")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="one small case (a test runs it)")
    args = ap.parse_args()
    sizes = [6] if args.smoke else [int(x) for x in args.candidates.split(",")]
    seeds = 1 if args.smoke else args.seeds
    fabric = load_fabric(Path(args.spec), None)[1]
    print(f"machine: {platform.machine()}, Python {platform.python_version()}; {Path(args.spec).name}: "
          f"{len(uplink_ends(fabric))} uplink ends; worst of {seeds} seeds")  # fmt: skip
    print(f"{'candidates':>10} {'choose':>10} {'one group':>10} {'ratio':>8}  same loss left")
    for n in sizes:
        ours, base, same = 0.0, 0.0, True
        for seed in range(seeds):
            floor, cands, held = case(fabric, n, seed)
            t1, l1 = timed(fabric, floor, cands, held, whole=False)
            t0, l0 = timed(fabric, floor, cands, held, whole=True)
            ours, base, same = max(ours, t1), max(base, t0), same and abs(l1 - l0) < 1e-12
        print(f"{n:>10} {ours * 1000:>8.2f}ms {base * 1000:>8.1f}ms {base / max(ours, 1e-9):>7.0f}x  {same}")


if __name__ == "__main__":
    main()
