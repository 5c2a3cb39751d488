"""`fabricd collector`: stream a share of the switches' gNMI telemetry to the bus (docs/ha.md, "Collectors")."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path

import typer

from fabricd.cli.service_cmd import DEFAULT_CONFIG


def collector_command(
    config: Path = typer.Option(DEFAULT_CONFIG, "--config", "-c", help="Service configuration (YAML)."),
    instance: str | None = typer.Option(
        None, "--instance", help="This collector's name in its leases (default host:pid)."
    ),
    metrics_port: int = typer.Option(
        8342,
        "--metrics-port",
        min=0,
        max=65535,
        help="Serve this collector's Prometheus metrics at http://HOST:PORT/metrics (0: off).",
    ),
    metrics_host: str = typer.Option(
        "127.0.0.1", "--metrics-host", help="Address the metrics listen on (loopback by default; 0.0.0.0: all)."
    ),
) -> None:
    """Take a fair share of the switches (leases on the bus), subscribe to them and publish what they send to the
    telemetry stream that `fabricd run` reads with telemetry.source: bus. Run any number, on any machines."""
    from prometheus_client import CollectorRegistry, start_http_server

    from drivers.inventory import load_inventory
    from fabricd.bus import connect
    from fabricd.service.config import load_config
    from fabricd.service.leader import default_instance
    from fabricd.service.logs import setup_logging
    from fabricd.telemetry.collector import Collector
    from fabricd.telemetry.platforms import profiles
    from policies.policy import load_policy

    # The bus's credentials only: it serves no API and files no ticket, so it never holds those secrets.
    cfg = load_config(config, secrets=lambda field: field.startswith("bus."))
    inventory = load_inventory(cfg.inventory)
    accesses = [inventory.access(n) for n in inventory.names]
    name = instance or default_instance()
    setup_logging(cfg.log_format, cfg.log_level, [a.password.get_secret_value() for a in accesses])
    t = cfg.telemetry
    profile = profiles(t.interval_s, load_policy(cfg.policy).lossless_priorities, t.intervals)
    registry = CollectorRegistry()
    collector = Collector(
        accesses, lambda: connect(cfg.bus, cfg.source, f"fabricd collector {name}"), instance=name, profile=profile,
        interval_s=t.interval_s, lease_ttl_s=t.collector_lease_ttl_s, max_age_s=t.stream_max_age_s,
        max_bytes=t.stream_max_bytes, registry=registry,
    )  # fmt: skip
    if metrics_port:
        try:
            start_http_server(metrics_port, metrics_host, registry=registry)
        except OSError as e:  # a second collector on one machine without its own --metrics-port: it still streams
            logging.getLogger("fabricd.collector").warning(
                "collector %s: metrics not served on %s:%d (%s); give each collector its own --metrics-port",
                name, metrics_host, metrics_port, e.strerror,
            )  # fmt: skip

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await collector.run(stop)

    asyncio.run(main())
