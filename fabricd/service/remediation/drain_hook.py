"""The node-drain hook (`remediation.drain_hook`): run before fabricd takes down a server-facing port, so the
scheduler moves the node's jobs away first."""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Callable

from topology.fabric import Fabric
from topology.model import Endpoint, Role

from ..config import RemediationSettings


async def run_drain_hook(
    settings: RemediationSettings, fabric: Fabric, ep: Endpoint, reason: str, started: Callable[[], None]
) -> str:
    """Run the node-drain hook for a server-facing port; returns a note for the ticket ('' if none). `started` is
    called once the hook runs (the switch comes after it)."""
    hook = settings.drain_hook
    peer = fabric.peer(ep.device, ep.port)
    node = fabric.get(peer.device) if peer is not None else None
    if not hook or node is None or node.role is not Role.SERVER:
        return ""
    values = {k: _inert(v) for k, v in (("node", node.name), ("reason", reason), ("device", ep.device),
                                           ("port", ep.port))}  # fmt: skip
    argv = [a.format(**values) for a in shlex.split(hook)]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        started()
    except OSError as e:
        return f"drain hook for {node.name} failed ({type(e).__name__}: {e})"
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), settings.drain_timeout_s)
    except TimeoutError:
        proc.kill()  # not left running behind us
        await proc.wait()
        return f"drain hook for {node.name} did not finish within {settings.drain_timeout_s:g} s; killed it"
    tail = out.decode(errors="replace").strip()[-200:]
    if proc.returncode:
        return f"drain hook for {node.name} exited {proc.returncode}: {tail}"
    return f"drained {node.name}"


def _inert(text: str) -> str:
    """A value safe inside any quoting a hook template may use (`sh -c '... reason="{reason}"'` included): the
    finding's summary has `<->`, `>` and parentheses, which a shell would read as redirections and subshells."""
    return re.sub(r"[^\w .,:/=+@%-]", "_", text.replace("<->", "--").replace(">", "gt"))
