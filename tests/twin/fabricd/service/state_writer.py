"""Writes to a state file until it is killed: `python -m tests.twin.fabricd.service.state_writer STATE SEED` makes
the writes a service makes (findings, tickets and their updates, actions and their holds, tokens, audit entries, the
mode), some several to a transaction, as fast as it can, in an order SEED draws. test_state_processes.py kills it
(SIGKILL) at a random moment, maybe several times on one file, and then starts `fabricd run` on what is left."""

from __future__ import annotations

import itertools
import os
import random
import sys
from pathlib import Path

from fabricd.detectors.finding import Finding
from fabricd.service.state import StateStore

T0 = 1_700_000_000_000_000_000
PORTS = [("leaf-g0-r0", "Ethernet1/1"), ("leaf-g0-r1", "Ethernet2/1"), ("leaf-g1-r2", "Ethernet3/1")]


def main(path: Path, seed: int) -> None:
    rng = random.Random(seed)
    s = StateStore(path)
    print("writing", flush=True)  # the test's kill clock starts now, not while Python imports
    now = T0 + seed
    tokens = itertools.count()
    while True:
        now += rng.randrange(1, 10**9)
        device, port = rng.choice(PORTS)
        fault = f"link_flap:{device}:{port}"
        with s.transaction():
            for _ in range(rng.randrange(1, 4)):
                what = rng.randrange(6)
                if what == 0:
                    f = Finding(kind="link_flap", device=device, port=port, devices=(device,),
                                ports=(f"{device}:{port}",), start_ts=now, detected_ts=now, severity="warning",
                                confidence=1.0, summary="flaps", evidence={"flaps": rng.randrange(100)})  # fmt: skip
                    s.findings.record(f, fault, now)
                elif what == 1:
                    t = s.tickets.open_for(fault)
                    if t is None:
                        s.tickets.create(fault, "link_flap", device, port, f"flaps on {device}:{port}", {"n": 1}, now)
                    else:
                        s.tickets.update(t.id, now, body={**t.body, "n": int(t.body.get("n", 0)) + 1}, recurrence=True)
                elif what == 2:
                    a = s.actions.add("disable", device, port, "auto", "running", "flaps", now)
                    s.actions.finish(a.id, rng.choice(["done", "failed"]), now, "down", now)
                elif what == 3:
                    s.access.add_token(
                        f"user{rng.randrange(5)}", "viewer", f"hash-{os.getpid()}-{next(tokens)}", now, "writer"
                    )
                elif what == 4:
                    s.mode.set(rng.choice(["observe", "approve", "auto"]), "writer", "test", now)
                else:
                    s.audit.record(now, "writer", "x" * rng.randrange(2000))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
