"""Planned maintenance as data: a drain of a switch, a link or a port is a plan of steps, each recorded before the
next is taken (so a standby that takes over finishes it once), and an undrain is allowed only once the ports came
back as the blueprint has them. Pure: the fabric, records and readings in, plans, verdicts and problems out; the
service (drains.py) does the I/O.

The steps of a drain:
1. guard: the drain's capacity counted as lost with every fault, BGP-down uplink, hold and other drain
   (guard.check_drain); refused with the reason;
2. shift (a switch drain): traffic moved away before anything goes down: on EOS maintenance mode, whose BGP
   quiesce is RFC 8326's GRACEFUL_SHUTDOWN (65535:0; receivers set LOCAL_PREF 0, /work/shared/reference/
   maintenance-lldp-bgp-state.md), on SONiC `TSA` (the switch announces only its loopback);
3. verify (after a shift): the drained ports' rates fall below a threshold within a timeout, else the drain stops;
4. shut (a link or port drain, or a switch drain with --shut): the ports shut with fabricd's mark of kind
   `maintenance` under the revert timer, then held as maintenance (no fault ticket);
5. drained.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from drivers.drain_policy import GRACEFUL_SHUTDOWN, PREPEND
from fabricd.detectors.finding import Finding
from topology.errors import FabricdError
from topology.fabric import Fabric
from topology.model import Endpoint
from topology.underlay import Underlay

from ..guard import is_uplink
from ..state.records import DrainKind, DrainRecord

TargetKind = DrainKind
DrainState = Literal["planned", "draining", "drained", "undraining", "undrained", "stopped"]
# a drain in these states holds its ports out of service (the guard counts them, a second drain is refused)
# (`stopped`: a step failed; what it shut and shifted stays so until an undrain brings it back)
ACTIVE: tuple[DrainState, ...] = ("planned", "draining", "drained", "undraining", "stopped")
OVERRAN = "maintenance_overran"  # the finding of a drain still active past its --until


class MaintenanceInputError(FabricdError):
    """A drain or undrain request that cannot be carried out as asked (already drained, --until in the past):
    nothing changed."""


class UnknownTargetError(MaintenanceInputError):
    """The request names no switch or port of the blueprint, or nothing that is drained."""


@dataclass(frozen=True)
class SessionEnd:
    """One end of a drained link's BGP session: the switch de-prefers what it advertises to `peer_address`."""

    local: Endpoint
    peer_address: str
    asn: int  # the switch's own (prepended)


@dataclass(frozen=True)
class DrainTarget:
    kind: TargetKind
    name: str  # as the person wrote it: a switch, or device:port
    ports: tuple[Endpoint, ...]  # the ports taken out of service, both ends of each link (sorted)
    shifted: tuple[str, ...]  # the switches whose traffic is shifted away (maintenance mode / TSA)
    sessions: tuple[SessionEnd, ...] = ()  # a link's or port's BGP session, at both ends (RFC 8326 per session)

    @property
    def spared(self) -> str | None:
        """The switch drained whole: it carries nothing while drained, so its own uplinks are not judged."""
        return self.name if self.kind == "switch" else None


@dataclass(frozen=True)
class Step:
    name: Literal["guard", "shift", "shift_session", "verify", "shut", "hold", "drained"]
    text: str


def _endpoint(fabric: Fabric, text: str, kind: str) -> Endpoint:
    device, sep, port = text.partition(":")
    if not sep or not device or not port:
        raise UnknownTargetError(f"{kind} {text!r}: name it as device:port, e.g. leaf-g0-r0:Ethernet5/1")
    if device not in fabric:
        raise UnknownTargetError(f"{kind} {text}: no device {device} in the blueprint; see `fabricd topology`")
    if fabric.link_of(device, port) is None:
        raise UnknownTargetError(f"{kind} {text}: {port} is not a cabled port of {device} in the blueprint")
    return Endpoint(device, port)


def target(fabric: Fabric, kind: TargetKind, name: str) -> DrainTarget:
    """What `fabricd drain <kind> <name>` takes out of service, or MaintenanceInputError (one line)."""
    if kind == "switch":
        dev = fabric.get(name)
        if dev is None or not dev.is_switch or dev.is_remote:
            raise UnknownTargetError(f"switch {name}: not a switch of the blueprint; see `fabricd topology`")
        ports = {ep for lk in fabric.links_of(name) for ep in (lk.a, lk.b)}
        return DrainTarget(kind, name, tuple(sorted(ports, key=str)), (name,))
    ep = _endpoint(fabric, name, kind)
    link = fabric.link_of(ep.device, ep.port)
    assert link is not None  # _endpoint checked it
    # A link or port is not put in maintenance mode (it acts on the whole switch): its BGP session is drained at
    # both ends before the ports go down (each end de-prefers what it advertises over it, so neither sends there).
    # A server-facing port has no session: its traffic moves as the drain hook and the shut take it away.
    # A server's own NIC (`drain port gpu-g0-000:nic0`) is drained as its link is: only the leaf's end can be shut.
    dev = fabric.get(ep.device)
    ports = {ep} if kind == "port" and dev is not None and dev.is_switch else {link.a, link.b}
    underlay = Underlay(fabric)
    sessions = tuple(
        SessionEnd(end, s.peer_address, s.local_asn)
        for end in sorted((link.a, link.b), key=str)
        if (s := underlay.session(end.device, end.port)) is not None
    )
    return DrainTarget(kind, name, tuple(sorted(ports, key=str)), (), sessions)


def plan(fabric: Fabric, t: DrainTarget, *, shut: bool, threshold_bps: float, timeout_s: float) -> list[Step]:
    """The steps a drain takes, in order (what --dry-run prints). A link or port drain always shuts its ports; a
    switch drain only with --shut (maintenance mode alone keeps the switch reachable for the upgrade)."""
    steps = [Step("guard", f"check capacity with {len(t.ports)} port(s) of {t.kind} {t.name} counted lost")]
    for sw in t.shifted:
        platform = fabric.device(sw).platform or "eos"
        how = (
            "TSA (traffic shift away)"
            if platform == "sonic"
            else f"maintenance mode, BGP graceful shutdown ({GRACEFUL_SHUTDOWN})"
        )
        steps.append(Step("shift", f"shift traffic away from {sw}: {how}"))
    for se in t.sessions:
        how = f"RFC 8326 {GRACEFUL_SHUTDOWN} and AS {se.asn} prepended {PREPEND} times"
        steps.append(Step("shift_session", f"de-prefer {se.local}'s BGP session to {se.peer_address}: {how}"))
    if t.shifted or t.sessions:
        steps.append(Step("verify", f"wait up to {timeout_s:g} s for the drained ports' rates to fall below "
                                    f"{threshold_bps:g} b/s, else stop"))  # fmt: skip
    if shut or t.kind != "switch":
        steps.append(Step("shut", f"shut {', '.join(map(str, t.ports))} with fabricd's mark (kind maintenance)"))
        steps.append(Step("hold", "hold them as maintenance (no fault ticket), reconciled like every hold"))
    steps.append(Step("drained", f"{t.kind} {t.name} drained"))
    return steps


def left_behind(taken: Sequence[Step]) -> str:
    """What a drain's steps begun so far left on the switches (a stopped drain names it), or ''."""
    shifted = [s.text.split(": ", 1)[0] for s in taken if s.name in ("shift", "shift_session")]
    shut = any(s.name == "shut" for s in taken)
    parts = shifted + (["its ports shut and held"] if shut else [])
    if not parts:
        return ""
    return f"left: {'; '.join(parts)}; `fabricd undrain` brings them back"


def next_step(steps: Sequence[Step], done: int) -> Step | None:
    """The step to take after `done` were recorded (a restart or a new leader resumes here); None: finished."""
    return steps[done] if 0 <= done < len(steps) else None


def check_new(t: DrainTarget, active_ports: Iterable[Endpoint], until_ts: int | None, now: int) -> None:
    """A drain's request, before anything is written: not already drained, an --until in the future."""
    busy = sorted(set(t.ports) & set(active_ports), key=str)
    if busy:
        raise MaintenanceInputError(f"{t.kind} {t.name}: {busy[0]} is already drained; see `fabricd maintenance`")
    if until_ts is not None and until_ts <= now:
        raise MaintenanceInputError(
            f"--until is in the past; give a time after now (UTC), e.g. {_iso(now + 3600 * 1_000_000_000)}"
        )


def still_carrying(rates_bps: Mapping[Endpoint, float | None], threshold_bps: float) -> list[str]:
    """The drained ports whose traffic has not fallen yet (a port with no rate yet is not known to be quiet)."""
    out = []
    for ep, rate in sorted(rates_bps.items(), key=lambda kv: str(kv[0])):
        if rate is None:
            out.append(f"{ep}: no rate yet")
        elif rate >= threshold_bps:
            out.append(f"{ep}: {rate:.3g} b/s")
    return out


@dataclass(frozen=True)
class PortReading:
    """What telemetry says of a drained port when its drain is to end."""

    up: bool
    lldp: Endpoint | None  # who LLDP hears there in a sample newer than the undrain request (None: nobody yet)
    bgp_established: bool | None  # None: no routed session on this link
    errors_rose: int  # how much its error counters (in-errors, FCS, CRC, symbol) rose while the undrain watched


def undrain_problems(fabric: Fabric, readings: Mapping[Endpoint, PortReading], watch_s: float) -> list[str]:
    """Why the drain must stay (empty: it may end): each port up, facing its blueprint neighbour by fresh LLDP, its
    BGP session established, its error counters still while watched for `watch_s`. What maintenance most often
    breaks (a swapped cable, a session not configured back, a dirty optic)."""
    out = []
    for ep, r in sorted(readings.items(), key=lambda kv: str(kv[0])):
        want = fabric.peer(ep.device, ep.port)
        if not r.up:
            out.append(f"{ep} is down")
            continue
        if r.lldp is None:
            out.append(f"{ep}: no fresh LLDP neighbour heard yet (the blueprint has {want} there)")
        elif want is not None and r.lldp != want:
            out.append(f"{ep} faces {r.lldp} by LLDP, the blueprint has {want}: move the cable back to {want}")
        if r.bgp_established is False:
            out.append(f"{ep}: its BGP session is not established")
        if r.errors_rose > 0:
            out.append(f"{ep}: error counters rose by {r.errors_rose} in {watch_s:g} s (clean the optic or "
                       "reseat the cable, then undrain again)")  # fmt: skip
    return out


def errors_rose(before: Mapping[str, float], after: Mapping[str, float]) -> int:
    """How much a port's error counters rose between two readings (leaf -> value); a counter that went back (the
    switch restarted) or appeared counts from zero."""
    total = 0.0
    for leaf, v in after.items():
        was = before.get(leaf, 0.0)
        total += v - was if v >= was else v
    return int(total)


@dataclass(frozen=True)
class DrainedCapacity:
    """What active drains take out of service at one switch, on one side of it (/metrics, the Grafana panels)."""

    device: str
    direction: Literal["uplink", "downlink"]
    links: int
    gbps: float  # the blueprint's line rates; a link without a speed counts 0


def drained_capacity(fabric: Fabric, drained: Iterable[Endpoint]) -> list[DrainedCapacity]:
    """Per switch and side, the links out of service because a drain holds either end: a link is gone when either
    end is, as the guard counts it (a spine's port drained takes the uplink away from its leaf too). Each
    inter-switch link is an uplink of its lower end only, so the `uplink` rows summed over switches count each
    drained link once. Servers and remote switches get no row; ports the blueprint no longer has are skipped."""
    links = {lk for ep in drained if (lk := fabric.link_of(ep.device, ep.port)) is not None}
    per: dict[tuple[str, Literal["uplink", "downlink"]], tuple[int, float]] = {}
    for lk in links:
        for end in {lk.a.device, lk.b.device}:
            dev = fabric.get(end)
            if dev is None or not dev.is_switch or dev.is_remote:
                continue
            side: Literal["uplink", "downlink"] = "uplink" if is_uplink(fabric, end, lk) else "downlink"
            key = (end, side)
            n, gbps = per.get(key, (0, 0.0))
            per[key] = (n + 1, gbps + float(lk.speed_gbps or 0))
    return [DrainedCapacity(d, side, n, gbps) for (d, side), (n, gbps) in sorted(per.items())]


def overran(until_ts: int | None, state: str, now: int) -> bool:
    """A drain still active past its --until: a finding ("maintenance overran"), never an automatic return."""
    return until_ts is not None and state in ACTIVE and now > until_ts


def overran_finding(d: DrainRecord, now: int) -> Finding:
    """The finding of a drain past its --until: one incident per drain (it began at the --until), reported every tick
    while the drain stays active; it says who drained what and why, and what to do. fabricd never ends a drain."""
    assert d.until_ts is not None
    device, _, port = d.target.partition(":")
    late_s = max(0, now - d.until_ts) // 1_000_000_000
    late = f"{late_s // 3600} h {late_s % 3600 // 60} min" if late_s >= 3600 else f"{late_s // 60} min {late_s % 60} s"
    return Finding(
        kind=OVERRAN,
        device=device,
        port=port or None,
        devices=tuple(sorted({p.partition(":")[0] for p in d.ports} | {device})),
        ports=tuple(d.ports) if d.kind != "switch" else (),
        start_ts=d.until_ts,
        detected_ts=now,
        severity="warning",
        confidence=1.0,
        summary=(
            f"maintenance overran: drain {d.id} of {d.kind} {d.target} by {d.actor} ({d.reason}) was to end by "
            f"{_iso(d.until_ts)}, still {d.state} {late} later; fabricd never ends a drain: `fabricd undrain "
            f"{d.target}` once the work is done"
        ),
        evidence={
            "drain_id": d.id,
            "until_ts": d.until_ts,
            "state": d.state,
            "actor": d.actor,
            "reason": d.reason,
            "late_s": late_s,
        },
    )


def _iso(ns: int) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns / 1e9))
