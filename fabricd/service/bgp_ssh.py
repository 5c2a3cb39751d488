"""SONiC's BGP state over SSH where STATE_DB has none: a synced SONiC switch on which the underlay plans sessions but
that has streamed no NEIGH_STATE_TABLE row `after_s` after its sync (FRR in unified or split mode: bgpmon writes
nothing) is read with `vtysh -c 'show bgp summary json'` every `interval_s`, through its driver, in the service's
I/O pool. Each read becomes the NEIGH_STATE_TABLE notification bgpmon would have streamed, ingested as a streamed one
is: the same store leaves (`bgp.session-state` per neighbour address), so bgp_session and the guard's BGP count read
it unchanged. A switch stays read over SSH once chosen (its stream cannot be told apart from the SSH reads after).
The decisions (`over_ssh`, `notification`) are pure; `BgpOverSsh.run` is the loop around them."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Executor

from pygnmi.spec.v080 import gnmi_pb2

from drivers.base import ReadsFrrBgp
from fabricd.detectors import bgp_session
from fabricd.telemetry import sonic
from topology.errors import FabricdError
from topology.fabric import Fabric
from topology.units import NS

from .actuator import DriverActuator
from .passes import guarded

log = logging.getLogger("fabricd.service")


def over_ssh(
    now: int, synced_since: Mapping[str, int], planned: Collection[str], streamed: Collection[str], after_ns: int
) -> set[str]:
    """The switches to read over SSH from now on: synced for `after_ns` at least, BGP sessions planned on them by the
    underlay, and no neighbour state streamed (`streamed`: the switches whose store holds a session state)."""
    return {d for d, t in synced_since.items() if now - t >= after_ns and d in planned and d not in streamed}


def notification(states: Mapping[str, str], gone: Collection[str], ts: int) -> bytes:
    """The STATE_DB NEIGH_STATE_TABLE notification bgpmon would stream for `states` (neighbour address -> state),
    with a delete for each neighbour FRR no longer lists (`gone`)."""
    n = gnmi_pb2.Notification(timestamp=ts)
    n.prefix.target = "STATE_DB"
    for address in sorted(gone):
        d = n.delete.add()
        d.elem.add(name="NEIGH_STATE_TABLE")
        d.elem.add(name=address)
    for address, state in sorted(states.items()):
        u = n.update.add()
        u.path.elem.add(name="NEIGH_STATE_TABLE")
        u.path.elem.add(name=address)
        u.val.json_ietf_val = json.dumps({"state": state}).encode()
    return bytes(gnmi_pb2.SubscribeResponse(update=n).SerializeToString())


class BgpOverSsh:
    """Chooses the SONiC switches to read over SSH and reads them. `ingest(message, device)` and the callables run on
    the event loop; the SSH reads in `executor`."""

    def __init__(
        self,
        sonic_switches: Collection[str],
        fabric: Fabric,
        actuator: DriverActuator,
        executor: Executor,
        ingest: Callable[[bytes, str], None],
        clock: Callable[[], int],
        after_s: float,
        interval_s: float,
    ) -> None:
        planned = {device for device, _ in bgp_session.planned_ports(fabric)}
        self.candidates = frozenset(d for d in sonic_switches if d in planned)
        self.actuator, self.executor, self.ingest, self.clock = actuator, executor, ingest, clock
        self.after_ns, self.interval_s = int(after_s * NS), interval_s
        self.devices: set[str] = set()  # read over SSH
        self.errors: dict[str, str] = {}  # device -> its last read's error, while it fails
        self._since: dict[str, int] = {}  # device -> when it was first seen synced
        self._known: dict[str, set[str]] = {}  # device -> the neighbours its last read listed

    def _read(self, device: str) -> dict[str, str]:
        """One SSH read (blocking, in the executor): each neighbour's state, by address."""
        session = self.actuator.connect(device)
        try:
            if not isinstance(session, ReadsFrrBgp):
                raise FabricdError(f"{device}: its driver cannot read FRR's BGP summary")
            return sonic.frr_states(session.bgp_summary())
        finally:
            self.actuator.release(session)

    def choose(self, synced: Mapping[str, bool], streamed: Callable[[], Collection[str]]) -> None:
        now = self.clock()
        for d in self.candidates - self.devices:
            if synced.get(d):
                self._since.setdefault(d, now)
        due = {d: t for d, t in self._since.items() if d not in self.devices and now - t >= self.after_ns}
        if due:
            for d in sorted(over_ssh(now, due, self.candidates, streamed(), self.after_ns)):
                log.warning("%s streams no STATE_DB NEIGH_STATE_TABLE row: its BGP state is read over SSH "
                            "(vtysh -c 'show bgp summary json') every %g s", d, self.interval_s)  # fmt: skip
                self.devices.add(d)
            for d in due:
                self._since.pop(d, None)  # streamed: it stays on gNMI

    async def poll(self) -> None:
        """Read every switch chosen, at once in the executor; feed what each gives, log what fails (once a streak)."""
        loop = asyncio.get_running_loop()
        devices = sorted(self.devices)
        got = await asyncio.gather(*(loop.run_in_executor(self.executor, self._read, d) for d in devices),
                                   return_exceptions=True)  # fmt: skip
        for d, states in zip(devices, got, strict=True):
            if isinstance(states, FabricdError):
                if d not in self.errors:
                    log.warning("%s: BGP state over SSH: %s", d, states)
                self.errors[d] = str(states)
                continue
            if isinstance(states, BaseException):
                raise states  # not a switch's trouble: `run`'s guard logs it with its traceback
            self.errors.pop(d, None)
            gone = self._known.get(d, set()) - states.keys()
            self._known[d] = set(states)
            self.ingest(notification(states, gone, self.clock()), d)

    async def run(self, synced: Callable[[], Mapping[str, bool]], streamed: Callable[[], Collection[str]]) -> None:
        while True:
            self.choose(synced(), streamed)
            if self.devices:
                await guarded("BGP state over SSH", self.poll())
            await asyncio.sleep(self.interval_s)

    @property
    def late_reason(self) -> str:
        """What `fabricd status` says of a switch read over SSH (its coverage's `late` entry for the BGP state)."""
        return (f"read over SSH (vtysh -c 'show bgp summary json') every {self.interval_s:g} s, as STATE_DB has no "
                f"NEIGH_STATE_TABLE rows: a session's change shows up to ~{self.interval_s:g} s late")  # fmt: skip

    def status(self) -> dict[str, object]:
        """Health's view: the switches read over SSH, how often (the delay it implies), the reads failing now."""
        return {"devices": sorted(self.devices), "interval_s": self.interval_s, "delay_s": self.interval_s,
                "errors": dict(self.errors)}  # fmt: skip

    def close(self) -> None:
        self.actuator.close()
