"""`python -m lab --spec S --state-dir D`: run the twin in the foreground (what `fabricd lab up` starts)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from topology.errors import FabricdError
from topology.spec import load_spec

from .eos_releases import DEFAULT_EOS_VERSION, VersionError, release
from .service import TwinOptions, TwinProcess
from .sonic_releases import DEFAULT_RELEASE as DEFAULT_SONIC_RELEASE
from .sonic_releases import SonicReleaseError, release_of


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab", description="Run the fabricd twin in the foreground.")
    parser.add_argument("--spec", required=True, type=Path, help="fabric spec (YAML)")
    parser.add_argument("--state-dir", required=True, type=Path, help="where inventory, secret and logs go")
    parser.add_argument("--base-address", default="127.42.0.1", help="first loopback address (one per switch)")
    parser.add_argument("--port-offset", type=int, default=0, help="added to the gNMI/eAPI/SSH ports")
    parser.add_argument("--probe-interval", type=float, default=5.0, help="seconds between host probe rounds")
    parser.add_argument(
        "--eos-version", default=DEFAULT_EOS_VERSION, help="the EOS release the switches run and serve gNMI paths of"
    )
    parser.add_argument(
        "--sonic-version", default=DEFAULT_SONIC_RELEASE, help="the SONiC release the SONiC switches run (202305...)"
    )
    parser.add_argument("--sonic-aliases", action="store_true", help="sonic-gnmi keys counters by port aliases")
    parser.add_argument("--daemons", choices=("model", "real"), default="model",
                        help="real: FRR and lldpd, a network namespace per switch (root; lab/daemons.py)")  # fmt: skip
    parser.add_argument("--sonic-no-neigh-state", action="store_true",
                        help="SONiC's STATE_DB has no NEIGH_STATE_TABLE rows (FRR unified/split mode)")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        release(args.eos_version)
    except VersionError as e:
        print(f"error: --eos-version: {e}", file=sys.stderr)
        return 2
    try:
        release_of(args.sonic_version)
    except SonicReleaseError as e:
        print(f"error: --sonic-version: {e}", file=sys.stderr)
        return 2
    try:
        spec = load_spec(args.spec)
        options = TwinOptions(
            args.state_dir, args.base_address, args.port_offset, args.probe_interval, args.eos_version,
            args.sonic_version, args.sonic_aliases, args.daemons, args.sonic_no_neigh_state,
        )  # fmt: skip
        asyncio.run(TwinProcess(spec, options).run())
    except FabricdError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(
            f"error: {e} (is another twin running? `fabricd lab down`, or pick --base-address/--port-offset)",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
