"""Fault injection: each fault changes twin state, is logged with its time, and can be cleared.

Tests compare what fabricd found with `FaultInjector.log`, so every record says what was injected, where,
when it started and when it was cleared.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from topology.deadlock import FailedLink, cable_name, deadlock_risk, resolve_failed
from topology.errors import InputError
from topology.model import Endpoint, Role
from topology.units import NS

from .model import LinkKey, PauseSource, Recompute, Twin, link_key


class FaultError(ValueError):
    """A fault request the twin cannot carry out (unknown kind, device or port, bad value)."""


def number(
    params: dict[str, Any], key: str, default: float, low: float, high: float, error: type[ValueError] = FaultError
) -> float:
    """`params[key]` (or `default`) as a number within [low, high], else `error` naming the key and the range."""
    raw = params.get(key, default)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise error(f"{key} must be a number, got {raw!r}") from None
    if not low <= value <= high:
        raise error(f"{key} must be between {low:g} and {high:g}, got {value:g}")
    return value


@dataclass
class FaultRecord:
    id: str
    kind: str
    params: dict[str, Any]
    start_ns: int
    devices: list[str]
    ports: list[str]
    cleared_ns: int | None = None
    undo: Callable[[int], object] | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "params": self.params,
            "start_ts": self.start_ns,
            "cleared_ts": self.cleared_ns,
            "devices": self.devices,
            "ports": self.ports,
        }


class FaultInjector:
    KINDS = (
        "link_flap",
        "link_down",
        "pfc_storm",
        "pfc_deadlock",
        "link_corruption",
        "silent_corruption",
        "optics",
        "reboot",
        "gnmi_drop",
        "microburst",
        "counter_wrap",
        "dci_imbalance",
        "dci_drops",
        "optics_degrade",
        "miscable",
        "bgp_down",
        "bgp_flap",
    )

    def __init__(self, twin: Twin, on_reboot: Callable[[str, int], None] | None = None):
        self.twin = twin
        self.log: list[FaultRecord] = []
        self._ids = itertools.count(1)
        # The config engine reloads the startup config of a rebooted switch.
        self.on_reboot = on_reboot

    # --- public --------------------------------------------------------------------------------
    def inject(self, kind: str, params: dict[str, Any], now_ns: int | None = None) -> FaultRecord:
        handler = getattr(self, f"_{kind}", None) if kind in self.KINDS else None
        if handler is None:
            raise FaultError(f"unknown fault kind '{kind}': use one of {', '.join(self.KINDS)}")
        now = self.twin.advance(now_ns)
        record: FaultRecord = handler(dict(params), now)
        self.log.append(record)
        self.twin.touch()
        self.twin.advance(now)
        return record

    def clear(self, fault_id: str | None = None, now_ns: int | None = None) -> list[FaultRecord]:
        """Clear one fault by id, or every active one; returns what was cleared."""
        now = self.twin.advance(now_ns)
        active = [r for r in self.log if r.cleared_ns is None]
        if fault_id is not None:
            active = [r for r in active if r.id == fault_id]
            if not active:
                raise FaultError(f"no active fault '{fault_id}' (see `fabricd lab status`)")
        for record in active:
            if record.undo is not None:
                record.undo(now)
            record.cleared_ns = now
        self.twin.touch()
        self.twin.advance(now)
        return active

    def active(self) -> list[FaultRecord]:
        return [r for r in self.log if r.cleared_ns is None]

    # --- argument helpers ----------------------------------------------------------------------
    def _endpoint(self, text: Any, what: str = "port") -> Endpoint:
        if not isinstance(text, str) or ":" not in text:
            raise FaultError(f"{what} must be 'device:port', got {text!r}")
        device, port = text.split(":", 1)
        if (device, port) in self.twin.peers:
            return Endpoint(device, port)
        if self.twin.fabric.link_of(device, port) is not None:
            return Endpoint(device, port)  # a server NIC or far-end DR port
        raise FaultError(f"{what} '{text}' is not a cabled port of this fabric")

    def _link(self, params: dict[str, Any]) -> tuple[LinkKey, Endpoint]:
        end = self._endpoint(params.get("port") or params.get("link"), "link")
        peer = self.twin.peer_of(end)
        if peer is None:
            raise FaultError(f"'{end}' has no peer")
        return link_key(end, peer), end

    def _switch(self, params: dict[str, Any]) -> str:
        name = params.get("device")
        if not isinstance(name, str) or name not in self.twin.switches:
            raise FaultError(f"device {name!r} is not a switch of this twin")
        return name

    @staticmethod
    def _number(params: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
        return number(params, key, default, low, high)

    def _record(self, kind: str, params: dict[str, Any], now: int, eps: list[Endpoint]) -> FaultRecord:
        devices = sorted({e.device for e in eps})
        return FaultRecord(f"f{next(self._ids)}", kind, params, now, devices, [str(e) for e in eps])

    # --- kinds ---------------------------------------------------------------------------------
    def _link_down(self, params: dict[str, Any], now: int) -> FaultRecord:
        key, _ = self._link(params)
        self.twin.link_down.add(key)
        rec = self._record("link_down", params, now, list(key))
        rec.undo = lambda _t: self.twin.link_down.discard(key)
        return rec

    def _link_flap(self, params: dict[str, Any], now: int) -> FaultRecord:
        key, _ = self._link(params)
        count = int(self._number(params, "count", 5, 1, 1000))
        period = self._number(params, "period_s", 1.0, 0.01, 3600)
        down_for = self._number(params, "down_s", period / 2, 0.001, period)
        params.update(count=count, period_s=period, down_s=down_for)
        cancelled = False

        def go_down(_t: int) -> None:
            if not cancelled:
                self.twin.flap_down.add(key)

        def go_up(_t: int) -> None:
            self.twin.flap_down.discard(key)

        for i in range(count):
            start = now + int(i * period * NS)
            self.twin.schedule(start, go_down, Recompute.LINKS)
            self.twin.schedule(start + int(down_for * NS), go_up, Recompute.LINKS)
        rec = self._record("link_flap", params, now, list(key))

        def undo(_t: int) -> None:
            nonlocal cancelled
            cancelled = True
            self.twin.flap_down.discard(key)

        rec.undo = undo
        return rec

    def _pfc_storm(self, params: dict[str, Any], now: int) -> FaultRecord:
        nic = self._endpoint(params.get("nic"), "nic")
        if self.twin.is_switch(nic.device):
            raise FaultError(f"nic '{nic}' must be a server NIC (server:nicK); a storm starts at an endpoint")
        prio = int(self._number(params, "priority", 3, 0, 7))
        params["priority"] = prio
        return self._pause_fault("pfc_storm", params, now, [PauseSource(nic, prio)])

    def _microburst(self, params: dict[str, Any], now: int) -> FaultRecord:
        """A pause shorter than any watchdog's detection time, while traffic keeps draining."""
        nic = self._endpoint(params.get("nic"), "nic")
        prio = int(self._number(params, "priority", 3, 0, 7))
        duration = self._number(params, "duration_ms", 20, 1, 1000)
        params.update(priority=prio, duration_ms=duration)
        rec = self._pause_fault("microburst", params, now, [PauseSource(nic, prio, fraction=0.3, propagate=False)])
        self.twin.schedule(now + int(duration * 1e6), lambda t: self._end(rec, t))
        return rec

    def _pfc_deadlock(self, params: dict[str, Any], now: int) -> FaultRecord:
        """A cycle of switches A -> B -> ... -> A in which every egress queue waits on the next switch: named
        (`cycle`), or formed by failed links (`failed`)."""
        prio = int(self._number(params, "priority", 3, 0, 7))
        params["priority"] = prio
        if params.get("failed") is not None:
            return self._deadlock_from_failure(params, now, prio)
        cycle = params.get("cycle")
        if isinstance(cycle, str):
            cycle = [c.strip() for c in cycle.split(",") if c.strip()]
        if not isinstance(cycle, list) or len(cycle) < 2:
            raise FaultError(
                "cycle must list at least two switches in order, e.g. leaf-g0-r0,spine-r0-0,..., "
                "or give failed=devA--devB,... to let failed links form it"
            )
        eps = []
        for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True):
            ports = [(p, peer) for (d, p), peer in self.twin.peers.items() if d == a and peer.device == b]
            if a not in self.twin.switches or not ports:
                raise FaultError(f"no link from {a} to {b}: a deadlock cycle must follow cabled switch links")
            eps.append(Endpoint(a, sorted(ports)[0][0]))
        params["cycle"] = cycle
        return self._pause_cycle(params, now, eps, prio)

    def _deadlock_from_failure(self, params: dict[str, Any], now: int, prio: int) -> FaultRecord:
        """Take the `failed` links down (as link_down does) and pause the first cycle that the routes bouncing
        around them close (topology.deadlock: shortest, then by name); links already down count too."""
        names = params["failed"]
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",") if n.strip()]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise FaultError("failed must name links, comma-separated: devA:port--devB:port or devA--devB")
        fabric = self.twin.fabric
        try:
            fails = resolve_failed(fabric, names)
        except InputError as e:
            raise FaultError(f"failed: {e}") from None
        keys = {link_key(ln.a, ln.b) for f in fails for ln in f.links}
        already = [fabric.link_of(a.device, a.port) for a, _ in self.twin.link_down - keys]
        risks = deadlock_risk(fabric, [*fails, *(FailedLink(cable_name(ln), (ln,)) for ln in already if ln)])
        names = [f.name for f in fails]
        if not risks:
            raise FaultError(
                f"taking {', '.join(names)} down leaves no route bouncing into a cycle: no deadlock risk "
                "(a cycle needs bounces both ways, so at least two failures; `fabricd check deadlock-risk` tries)"
            )
        risk = risks[0]
        added = keys - self.twin.link_down
        self.twin.link_down |= added
        params.update(failed=names, cycle=list(risk.devices), queues=list(risk.queues), bounces=list(risk.bounces))
        rec = self._pause_cycle(params, now, [Endpoint(*q.split(":", 1)) for q in risk.queues], prio)
        unpause = rec.undo

        def undo(t: int) -> None:
            if unpause is not None:
                unpause(t)
            self.twin.link_down.difference_update(added)

        rec.undo = undo
        return rec

    def _pause_cycle(self, params: dict[str, Any], now: int, eps: list[Endpoint], prio: int) -> FaultRecord:
        sources = []
        for ep in eps:
            peer = self.twin.peer_of(ep)
            if peer is None:
                raise FaultError(f"'{ep}' has no peer")
            # B pauses A on their link, so A's egress queue toward B is stuck waiting on B.
            sources.append(PauseSource(peer, prio, propagate=False))
        rec = self._pause_fault("pfc_deadlock", params, now, sources)
        rec.ports = [str(e) for e in eps]
        return rec

    def _pause_fault(self, kind: str, params: dict[str, Any], now: int, sources: list[PauseSource]) -> FaultRecord:
        rec = self._record(kind, params, now, [s.sender for s in sources])
        self.twin.pause_sources[rec.id] = sources
        rec.undo = lambda _t: self.twin.pause_sources.pop(rec.id, None)
        return rec

    def _end(self, rec: FaultRecord, now: int) -> None:
        if rec.cleared_ns is None and rec.undo is not None:
            rec.undo(now)
            rec.cleared_ns = now

    def _link_corruption(self, params: dict[str, Any], now: int) -> FaultRecord:
        key, end = self._link(params)
        rate = self._number(params, "rate", 1e-5, 1e-12, 1.0)
        direction = params.get("direction", "rx")
        if direction not in ("rx", "tx", "both"):
            raise FaultError(f"direction must be rx, tx or both (seen from {end}), got {direction!r}")
        other = key[1] if key[0] == end else key[0]
        # rx: frames arriving at the named port are corrupted; tx: frames it sends are.
        receivers = {"rx": [end], "tx": [other], "both": [end, other]}[direction]
        receivers = [r for r in receivers if self.twin.is_switch(r.device)]
        if not receivers:
            raise FaultError(f"'{end}' {direction}: the corrupted side must be a switch port to show in counters")
        params.update(rate=rate, direction=direction)
        for r in receivers:
            self.twin.corruption[(r.device, r.port)] = rate
        rec = self._record("link_corruption", params, now, receivers)

        def undo(_t: int) -> None:
            for r in receivers:
                self.twin.corruption.pop((r.device, r.port), None)

        rec.undo = undo
        return rec

    def _silent_corruption(self, params: dict[str, Any], now: int) -> FaultRecord:
        device = self._switch(params)
        rate = self._number(params, "rate", 1e-3, 1e-9, 1.0)
        params["rate"] = rate
        self.twin.silent[device] = rate
        rec = self._record("silent_corruption", params, now, [])
        rec.devices = [device]
        rec.undo = lambda _t: self.twin.silent.pop(device, None)
        return rec

    def _optics(self, params: dict[str, Any], now: int) -> FaultRecord:
        end = self._endpoint(params.get("port"), "port")
        if not self.twin.is_switch(end.device):
            raise FaultError(f"port '{end}' must be a switch port (its receiver sees the power loss)")
        loss = self._number(params, "loss_db", 4.0, 0.1, 30)
        params["loss_db"] = loss
        self.twin.optics_loss_db[(end.device, end.port)] = loss
        rec = self._record("optics", params, now, [end])
        rec.undo = lambda _t: self.twin.optics_loss_db.pop((end.device, end.port), None)
        return rec

    def _reboot(self, params: dict[str, Any], now: int) -> FaultRecord:
        device = self._switch(params)
        down = self._number(params, "down_s", 5.0, 0.0, 3600)
        params["down_s"] = down
        sw = self.twin.switch(device)
        sw.reset_counters(now)
        self.twin.forget_watchdogs(device)
        sw.boot_ns = now
        sw.rebooting_until = now + int(down * NS)
        sw.stream_epoch += 1
        sw.gnmi_blocked_until = sw.rebooting_until
        if device in self.twin.bgpmon.tables:
            self.twin.bgpmon.start(device, now)  # bgpmon starts again with the switch: its table empty at first
        if self.on_reboot is not None:
            self.on_reboot(device, now)
        self.twin.schedule(sw.rebooting_until, lambda _t: None)  # ports come back up at this time
        rec = self._record("reboot", params, now, [])
        rec.devices = [device]
        return rec

    def _counter_wrap(self, params: dict[str, Any], now: int) -> FaultRecord:
        """Noise, not a fault: a switch whose 64-bit counters are about to wrap, as after years of traffic. Every
        moving counter is set `seconds` short of 2**64 (at its current rate), so it passes 2**64 that much later;
        counters that do not move stay. A subscriber already streaming the switch sees one jump forward first, so
        inject it before subscribing for a clean wrap."""
        device = self._switch(params)
        seconds = self._number(params, "seconds", 10.0, 0.0, 86400)
        params["seconds"] = seconds
        sw = self.twin.switch(device)
        sw.rebase(now)
        ahead = (sw.rate * seconds).astype(np.uint64)
        # uint64 arithmetic is modular: 0 - ahead is 2**64 - ahead
        sw.base = np.where(ahead > 0, np.zeros_like(ahead) - ahead, sw.base)
        rec = self._record("counter_wrap", params, now, [])
        rec.devices = [device]
        return rec

    def _miscable(self, params: dict[str, Any], now: int) -> FaultRecord:
        """Two cables' far ends swapped (a technician put them back the wrong way round): `a` and `b` are the near
        ends ('device:port', params `port` and `other`); a's cable now ends where b's did and the other way round.
        The links stay up; LLDP on all four ends names its new neighbour. The traffic model keeps the blueprint's
        paths."""
        a, b = self._endpoint(params.get("port"), "port"), self._endpoint(params.get("other"), "other")
        pa, pb = self.twin.peers.get((a.device, a.port)), self.twin.peers.get((b.device, b.port))
        if pa is None or pb is None or a == b or pa == b:
            raise FaultError("port and other must be the near ends of two different cables of switches")
        swaps = {(a.device, a.port): pb, (pb.device, pb.port): a, (b.device, b.port): pa, (pa.device, pa.port): b}
        self.twin.lldp_swaps.update(swaps)
        rec = self._record("miscable", params, now, [a, b, pa, pb])

        def undo(_t: int) -> None:
            for key in swaps:
                self.twin.lldp_swaps.pop(key, None)

        rec.undo = undo
        return rec

    def _bgp_port(self, params: dict[str, Any]) -> Endpoint:
        end = self._endpoint(params.get("port") or params.get("link"), "port")
        if self.twin.bgp.state_of(end.device, end.port) is None:
            peer = self.twin.peer_of(end)
            if peer is None or self.twin.bgp.state_of(peer.device, peer.port) is None:
                raise FaultError(f"'{end}' carries no BGP session (a server port, or no switch at either end)")
            end = peer
        return end

    def _bgp_down(self, params: dict[str, Any], now: int) -> FaultRecord:
        """The BGP session of a link goes down while the link stays up (hold timer, policy, control plane): both
        ends show it Active, the link carries no routed traffic, oper status stays up."""
        end = self._bgp_port(params)
        self.twin.bgp.hold(end.device, end.port, +1)
        st = self.twin.bgp.state_of(end.device, end.port)
        assert st is not None
        rec = self._record("bgp_down", params, now, [st.a.local, st.b.local])
        rec.undo = lambda _t: self.twin.bgp.hold(end.device, end.port, -1)
        return rec

    def _bgp_flap(self, params: dict[str, Any], now: int) -> FaultRecord:
        """The session of a link goes down and comes back `count` times, `period_s` apart, down `down_s` each
        time; the link stays up throughout."""
        end = self._bgp_port(params)
        count = int(self._number(params, "count", 5, 1, 1000))
        period = self._number(params, "period_s", 2.0, 0.01, 3600)
        down_for = self._number(params, "down_s", period / 2, 0.001, period)
        params.update(count=count, period_s=period, down_s=down_for)
        held = [False]

        def go(down: bool) -> Callable[[int], None]:
            def fire(_t: int) -> None:
                if held[0] != down and not rec.cleared_ns:
                    self.twin.bgp.hold(end.device, end.port, +1 if down else -1)
                    held[0] = down
                    self.twin.touch()

            return fire

        for i in range(count):
            start = now + int(i * period * NS)
            self.twin.schedule(start, go(True))
            self.twin.schedule(start + int(down_for * NS), go(False))
        st = self.twin.bgp.state_of(end.device, end.port)
        assert st is not None
        rec = self._record("bgp_flap", params, now, [st.a.local, st.b.local])

        def undo(_t: int) -> None:
            if held[0]:
                self.twin.bgp.hold(end.device, end.port, -1)
                held[0] = False

        rec.undo = undo
        return rec

    def _gnmi_drop(self, params: dict[str, Any], now: int) -> FaultRecord:
        device = self._switch(params)
        seconds = self._number(params, "seconds", 30.0, 0.0, 86400)
        params["seconds"] = seconds
        sw = self.twin.switch(device)
        sw.stream_epoch += 1
        sw.gnmi_blocked_until = now + int(seconds * NS)
        rec = self._record("gnmi_drop", params, now, [])
        rec.devices = [device]

        def undo(_t: int) -> None:
            sw.gnmi_blocked_until = 0

        rec.undo = undo
        return rec

    def _dci_imbalance(self, params: dict[str, Any], now: int) -> FaultRecord:
        """A DCI's long-haul ports carry uneven shares of its traffic (total unchanged): `skew` = (max - min) / mean.
        `pattern` polarized: half the members at 1 + skew/2 of the mean, half at 1 - skew/2 (a hash that sees the
        same fields as the tier before it); spread: shares evenly spaced between the two (too few flows)."""
        name = params.get("dci")
        groups = self.twin.dci_ports
        if not isinstance(name, str) or name not in groups:
            known = ", ".join(sorted(groups)) or "none in this fabric"
            raise FaultError(f"dci must name a DCI of this twin ({known}), got {name!r}")
        skew = self._number(params, "skew", 0.2, 0.0, 1.5)
        pattern = params.get("pattern", "polarized")
        if pattern not in ("polarized", "spread"):
            raise FaultError(f"pattern must be polarized or spread, got {pattern!r}")
        params.update(dci=name, skew=skew, pattern=pattern)
        members = groups[name]
        n = len(members)
        if n < 2:
            raise FaultError(f"dci {name} has {n} long-haul port: imbalance needs two or more")
        if pattern == "polarized":
            # alternate members of each DR (they are sorted by switch, then port): the skew lies across ports
            shares = {i: 1 + skew / 2 if i % 2 == 0 else 1 - skew / 2 for i in range(n)}
            if n % 2:  # an odd count: rescale so the total stays the same
                mean = sum(shares.values()) / n
                shares = {i: v / mean for i, v in shares.items()}
        else:
            shares = {i: 1 - skew / 2 + skew * i / (n - 1) for i in range(n)}
        keys = [(members[i].device, members[i].port) for i in range(n)]
        for i, key in enumerate(keys):
            self.twin.egress_scale[key] = shares[i]
        rec = self._record("dci_imbalance", params, now, members)

        def undo(_t: int) -> None:
            for key in keys:
                self.twin.egress_scale.pop(key, None)

        rec.undo = undo
        return rec

    def _dci_drops(self, params: dict[str, Any], now: int) -> FaultRecord:
        """A DR port drops `rate` of its egress packets (buffer overflow): out-discards and queue 3 dropped-pkts."""
        end = self._endpoint(params.get("port"), "port")
        if not self.twin.is_switch(end.device) or self.twin.switch(end.device).role is not Role.DR:
            raise FaultError(f"port '{end}' must be a port of a DR switch (dr-<dci>-<n>)")
        rate = self._number(params, "rate", 1e-4, 1e-9, 0.5)
        params["rate"] = rate
        key = (end.device, end.port)
        self.twin.egress_drops[key] = rate
        rec = self._record("dci_drops", params, now, [end])
        rec.undo = lambda _t: self.twin.egress_drops.pop(key, None)
        return rec

    def _optics_degrade(self, params: dict[str, Any], now: int) -> FaultRecord:
        """An optic failing slowly: the receiver loses `db_per_hour` more every hour (stepped each `step_s`), with
        what `optics` does at that loss (FEC corrections, pre-FEC BER, frame errors past ~6 dB: the failure)."""
        end = self._endpoint(params.get("port"), "port")
        if not self.twin.is_switch(end.device):
            raise FaultError(f"port '{end}' must be a switch port (its receiver sees the power loss)")
        key = (end.device, end.port)
        if key in self.twin.optics_loss_db:
            raise FaultError(f"port '{end}' already loses optical power (a fault is active there: clear it first)")
        rate = self._number(params, "db_per_hour", 0.25, 0.001, 100)
        step = self._number(params, "step_s", 60, 1, 3600)
        cap = self._number(params, "max_db", 20, 0.1, 40)
        heat = self._number(params, "c_per_hour", 0, 0, 50)  # a failing laser or its cooler may also run hotter
        params.update(db_per_hour=rate, step_s=step, max_db=cap, c_per_hour=heat)
        cancelled = False

        def grow(at: int) -> None:
            if cancelled:
                return
            self.twin.optics_loss_db[key] = min(cap, rate * (at - now) / NS / 3600)
            if heat:
                self.twin.optics_heat_c[key] = min(60.0, heat * (at - now) / NS / 3600)
            self.twin.touch()
            self.twin.schedule(at + int(step * NS), grow)

        self.twin.optics_loss_db[key] = 0.0
        self.twin.schedule(now + int(step * NS), grow)
        rec = self._record("optics_degrade", params, now, [end])

        def undo(_t: int) -> None:
            nonlocal cancelled
            cancelled = True
            self.twin.optics_loss_db.pop(key, None)
            self.twin.optics_heat_c.pop(key, None)

        rec.undo = undo
        return rec
