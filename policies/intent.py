"""Fabric + policy -> vendor-neutral per-port intent (docs/formats.md "Intent" contract), with a reason per number."""

from __future__ import annotations

import gc
import re
from collections import defaultdict
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel

from policies.linkclass import LinkClass, link_class
from policies.policy import Policy, Settings
from policies.tuning import ecn_thresholds, ecn_thresholds_dci, flowlet_inactivity, pfc_headroom, rtt_s
from topology.fabric import Fabric
from topology.layout import Layout
from topology.model import TIER, Device, Link, Role
from topology.spec import FabricSpec

_DEFAULT_LENGTH = {LinkClass.SERVER: "server", LinkClass.FABRIC: "leaf_spine"}


class PfcIntent(BaseModel):
    enabled: bool
    no_drop: list[int]
    headroom_bytes: int


class EcnIntent(BaseModel):
    enabled: bool
    min_bytes: int
    max_bytes: int
    max_probability: int


class CnpIntent(BaseModel):
    source: Literal["dr", "endpoint"]


class WatchdogIntent(BaseModel):
    enabled: bool
    action: str
    timeout_ms: int
    polling_ms: int
    recovery_ms: int


class DlbIntent(BaseModel):
    mode: Literal["off", "flowlet", "per-packet"]
    inactivity_us: int


class PortIntent(BaseModel):
    port: str
    peer: str
    link_class: LinkClass
    length_m: float
    speed_gbps: int
    pfc: PfcIntent
    ecn: EcnIntent
    cnp: CnpIntent
    watchdog: WatchdogIntent
    dlb: DlbIntent
    reasons: dict[str, str]


class QosIntent(BaseModel):
    trust: Literal["dscp"] = "dscp"
    dscp_to_tc: dict[int, int]
    lossless_priorities: list[int]
    cnp_priority: int
    link_debounce_ms: int


class DeviceIntent(BaseModel):
    device: str
    role: Role
    platform: str | None
    qos: QosIntent
    ports: list[PortIntent]


class Intent(BaseModel):
    devices: list[DeviceIntent]

    def device(self, name: str) -> DeviceIntent | None:
        return next((d for d in self.devices if d.device == name), None)


def _port_key(port: str) -> tuple[Any, ...]:
    """Natural order: Ethernet2/1 before Ethernet10/1."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", port))


class _SettingsFor:
    """Effective settings per (role, link class, device): policy defaults, then overrides by specificity."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self.by_device = {o.match.device for o in policy.overrides if o.match.device}
        self.ordered = sorted(policy.overrides, key=lambda o: o.specificity)
        self.cache: dict[tuple[str, str, str | None], Settings] = {}

    def __call__(self, role: Role, cls: LinkClass, device: str) -> Settings:
        key = (role.value, cls.value, device if device in self.by_device else None)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        merged: dict[str, Any] = self.policy.settings.model_dump()
        for o in self.ordered:
            m = o.match
            if (m.role in (None, role.value)) and (m.link_class in (None, cls.value)) and (m.device in (None, device)):
                for section, values in o.set.items():
                    merged[section] = {**merged[section], **values}
        result = Settings.model_validate(merged)
        self.cache[key] = result
        return result


def derive_intent(fabric: Fabric, spec: FabricSpec, policy: Policy, only: set[str] | None = None) -> Intent:
    """Per-port intent for every local switch (or only the named ones)."""
    policy.check_devices({d.name for d in fabric.switches()})
    settings_for = _SettingsFor(policy)
    layout = Layout(spec)
    qos = QosIntent(
        dscp_to_tc=dict(policy.dscp_to_tc),
        lossless_priorities=list(policy.lossless_priorities),
        cnp_priority=policy.cnp_priority,
        link_debounce_ms=policy.link_debounce_ms,
    )
    templates: dict[tuple[Any, ...], dict[str, Any]] = {}
    devices = []
    # ~80k ports x 7 models at 16k GPUs, none cyclic: the cyclic GC would rescan the growing heap again and
    # again (two thirds of the time), so it waits until the end.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        for dev in fabric.switches():
            if only is not None and dev.name not in only:
                continue
            ports = _device_ports(fabric, spec, layout, policy, settings_for, templates, dev)
            # One validation per device from plain dicts: pydantic builds fresh sub-models per port in Rust,
            # several times cheaper than constructing ~7 models per port in Python.
            devices.append(
                DeviceIntent.model_validate(
                    {"device": dev.name, "role": dev.role, "platform": dev.platform, "qos": qos, "ports": ports}
                )
            )
    finally:
        if gc_was_on:
            gc.enable()
    return Intent.model_construct(devices=devices)  # the devices are validated already


@lru_cache(maxsize=65536)
def _port_key_cached(port: str) -> tuple[Any, ...]:
    return _port_key(port)


def _device_ports(
    fabric: Fabric,
    spec: FabricSpec,
    layout: Layout,
    policy: Policy,
    settings_for: _SettingsFor,
    templates: dict[tuple[Any, ...], dict[str, Any]],
    dev: Device,
) -> list[dict[str, Any]]:
    """The ports of one switch as PortIntent fields (plain dicts, validated by the caller)."""
    rows: list[tuple[str, Link, Device, LinkClass, float, int]] = []
    peers: dict[int, str] = {}  # id(link) -> the far end, as PortIntent.peer names it
    name = dev.name
    for link in fabric.links_of(name):
        near, far = (link.a, link.b) if link.a.device == name else (link.b, link.a)
        peer = fabric.get(far.device)
        if peer is None:
            continue
        cls = link_class(link, dev, peer)
        length = link.length_m if link.length_m is not None else _default_length(spec, cls, dev, peer)
        speed = link.speed_gbps or _default_speed(spec, layout, cls, dev, peer)
        rows.append((near.port, link, peer, cls, length, speed))
        peers[id(link)] = str(far)

    groups = _ecmp_groups(dev, rows)
    dci_budget = _dci_pfc_budget(spec, layout, policy, settings_for, dev, rows)
    by_class: dict[LinkClass, Settings] = {}
    out = []
    for port, link, _peer, cls, length, speed in sorted(rows, key=lambda r: _port_key_cached(r[0])):
        s = by_class.get(cls)
        if s is None:
            s = by_class[cls] = settings_for(dev.role, cls, name)
        group = groups.get(port, [])
        if cls is LinkClass.DCI:  # few ports, and their reasons name the device: no memo
            fields = _port_fields(policy, s, dev, cls, length, speed, group, dci_budget)
        else:
            # Campus ports depend only on these; the flowlet timer only on the spread of the group's lengths.
            spread = (min(group), max(group)) if len(group) >= 2 else None
            key = (id(s), cls, length, speed, spread)
            hit = templates.get(key)
            if hit is None:
                hit = templates[key] = _port_fields(policy, s, dev, cls, length, speed, group, dci_budget)
            fields = hit
        out.append({"port": port, "peer": peers[id(link)], **fields})
    return out


def _port_fields(
    policy: Policy,
    s: Settings,
    dev: Device,
    cls: LinkClass,
    length: float,
    speed: int,
    group: list[float],
    dci_budget: tuple[bool, str],
) -> dict[str, Any]:
    """Every PortIntent field but port and peer, as plain values (shared between ports: never mutated)."""
    reasons: dict[str, str] = {}
    headroom, reasons["pfc.headroom_bytes"] = pfc_headroom(length, speed, s.pfc)
    pfc_on = s.pfc.enabled
    if not pfc_on:
        reasons["pfc.enabled"] = "PFC off by policy"
    if cls is LinkClass.DCI:
        fits, why = dci_budget
        pfc_on = pfc_on and fits
        reasons["pfc.enabled"] = why
        lo, hi, reasons["ecn"] = ecn_thresholds_dci(length, speed, s.ecn)
        caps = policy.caps(dev.platform)
        rtt_ms = rtt_s(length) * 1e3
        if dev.role is Role.DR and caps.dr_generated_cnp:
            cnp: Literal["dr", "endpoint"] = "dr"
            reasons["cnp.source"] = (
                f"end-to-end CNP over {length / 1000:g} km comes back after {rtt_ms:.2f} ms RTT, too late"
                " to prevent loss; the DR generates CNP and reaches senders within about 50 us"
            )
        else:
            cnp = "endpoint"
            reasons["cnp.source"] = (
                f"WARNING: {dev.name} cannot generate CNP (platform {dev.platform}); end-to-end CNP over "
                f"{length / 1000:g} km arrives after {rtt_ms:.2f} ms RTT: terminate DCI on a DR that can"
            )
    else:
        lo, hi, reasons["ecn"] = ecn_thresholds(speed, s.ecn)
        cnp = "endpoint"
        reasons["cnp.source"] = "campus link: the receiving NIC returns CNP within microseconds"
    if s.dlb.mode == "off" or len(group) < 2:
        dlb = {"mode": "off", "inactivity_us": 0}
        reasons["dlb"] = "DLB off by policy" if s.dlb.mode == "off" else "not a member of an ECMP group"
    else:
        inactivity, reasons["dlb"] = flowlet_inactivity(group, s.dlb)
        dlb = {"mode": s.dlb.mode, "inactivity_us": inactivity}
    wd = s.watchdog
    return {
        "link_class": cls,
        "length_m": length,
        "speed_gbps": speed,
        "pfc": {
            "enabled": pfc_on,
            "no_drop": list(policy.lossless_priorities) if pfc_on else [],
            "headroom_bytes": headroom if pfc_on else 0,
        },
        "ecn": {"enabled": s.ecn.enabled, "min_bytes": lo, "max_bytes": hi, "max_probability": s.ecn.max_probability},
        "cnp": {"source": cnp},
        "watchdog": {
            "enabled": wd.enabled and pfc_on,
            "action": wd.action,
            "timeout_ms": wd.timeout_ms,
            "polling_ms": wd.polling_ms,
            "recovery_ms": wd.recovery_ms,
        },
        "dlb": dlb,
        "reasons": reasons,
    }


def _default_length(spec: FabricSpec, cls: LinkClass, dev: Device, peer: Device) -> float:
    if cls is LinkClass.SERVER:
        return spec.cable_m.server
    if Role.DR in (dev.role, peer.role):
        return spec.cable_m.dr
    if Role.SUPERSPINE in (dev.role, peer.role):
        return spec.cable_m.spine_superspine
    return spec.cable_m.leaf_spine


def _default_speed(spec: FabricSpec, layout: Layout, cls: LinkClass, dev: Device, peer: Device) -> int:
    if cls is LinkClass.SERVER:
        return spec.server_link_gbps
    if cls is LinkClass.DCI:
        dci = layout.dci_of(dev.name if not dev.is_remote else peer.name)
        return dci.link_gbps if dci else spec.fabric_link_gbps
    return spec.fabric_link_gbps


def _ecmp_groups(dev: Device, rows: list[tuple[str, Link, Device, LinkClass, float, int]]) -> dict[str, list[float]]:
    """Port -> cable lengths of its ECMP group: all uplinks (or all long-haul links), else parallel links."""
    up: list[tuple[str, float]] = []
    dci: list[tuple[str, float]] = []
    by_peer: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for port, _, peer, cls, length, _ in rows:
        if cls is LinkClass.DCI:
            dci.append((port, length))
        elif TIER[peer.role] > TIER[dev.role] and dev.role is not Role.DR:
            up.append((port, length))
        else:
            by_peer[peer.name].append((port, length))
    groups: dict[str, list[float]] = {}
    for members in [up, dci, *by_peer.values()]:
        lengths = [length for _, length in members]
        for port, _ in members:
            groups[port] = lengths
    return groups


def _dci_pfc_budget(
    spec: FabricSpec,
    layout: Layout,
    policy: Policy,
    settings_for: _SettingsFor,
    dev: Device,
    rows: list[tuple[str, Link, Device, LinkClass, float, int]],
) -> tuple[bool, str]:
    """Can this switch hold PFC headroom for all its long-haul ports? If not, they run lossy."""
    dci_rows = [r for r in rows if r[3] is LinkClass.DCI]
    if not dci_rows:
        return True, ""
    caps = policy.caps(dev.platform)
    dci = layout.dci_of(dev.name)
    buffer_mb = dci.dr_buffer_mb if dci is not None else caps.buffer_mb
    budget = buffer_mb * 1e6 * caps.headroom_share
    need = 0
    for _, _, _, cls, length, speed in dci_rows:
        need += pfc_headroom(length, speed, settings_for(dev.role, cls, dev.name).pfc)[0]
    need *= len(policy.lossless_priorities)
    detail = (
        f"{len(dci_rows)} long-haul port(s) x {len(policy.lossless_priorities)} lossless priority need "
        f"{need / 1e6:.1f} MB of headroom; {caps.headroom_share:.0%} of the {buffer_mb:g} MB buffer is "
        f"{budget / 1e6:.1f} MB"
    )
    if need <= budget:
        return True, f"PFC on: {detail}"
    return False, f"PFC off (lossy, CNP from the DR): {detail}"
