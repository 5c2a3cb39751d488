"""`fabricd shard`: the detectors over one range of aggregation groups, findings to the bus
(docs/telemetry-scale-out.md, "Detector shards")."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path

import typer

from fabricd.cli.service_cmd import DEFAULT_CONFIG


def shard_command(
    config: Path = typer.Option(DEFAULT_CONFIG, "--config", "-c", help="Service configuration (YAML)."),
    index: int = typer.Option(..., "--index", help="This shard's number, 0 .. count-1."),
    count: int = typer.Option(..., "--count", help="How many shards split the aggregation groups."),
) -> None:
    """Read the telemetry of one range of aggregation groups (and the switches above them), run the detectors on
    it and publish the findings this shard owns to the bus, for `fabricd run` with detectors.source: shards."""
    from fabricd.detectors.shards import ShardError
    from fabricd.service.config import load_config
    from fabricd.service.logs import setup_logging
    from fabricd.service.shard import ShardProcess
    from topology.errors import InputError

    # The bus's credentials only: it serves no API and files no ticket, so it never holds those secrets.
    cfg = load_config(config, secrets=lambda field: field.startswith("bus."))
    try:
        shard = ShardProcess(cfg, index, count)
    except ShardError as e:
        raise InputError(str(config), f"--index/--count: {e}") from None
    setup_logging(cfg.log_format, cfg.log_level, [])

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, shard.stop)
        await shard.run()

    asyncio.run(main())
