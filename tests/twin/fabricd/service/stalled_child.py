"""`fabricd run` whose event loop the test blocks, for test_lease_stall.py: SIGUSR1 blocks it for STALL_S seconds (a
stall of the kind issue 53 saw: 1.5 s between a statement and its COMMIT, everything on the loop waiting), SIGUSR2
for an hour (a loop wedged for good). The handlers run on the loop itself (`add_signal_handler`), so the loop is
what stops: the process's other threads run on. The service is the real one.

Run: python -m tests.twin.fabricd.service.stalled_child CONFIG STALL_S
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

from fabricd.service import daemon
from fabricd.service.config import load_config


def main() -> None:
    config, stall_s = Path(sys.argv[1]), float(sys.argv[2])
    cfg = load_config(config)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, time.sleep, stall_s)
        loop.add_signal_handler(signal.SIGUSR2, time.sleep, 3600.0)
        await daemon.Service(cfg).run()

    asyncio.run(run())


if __name__ == "__main__":
    main()
