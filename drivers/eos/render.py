"""Intent -> EOS configuration text, through pyavd's structured config (eos_cli_config_gen).

Keys and the lines pyavd renders from them: shared/reference/platforms.md ("Arista EOS CLI").
Raw `eos_cli` lines only where pyavd has no key:
- `link-debounce time MS` per interface (not modelled by pyavd, platforms.md).

DLB: pyavd (Arista's AVD, eos_cli_config_gen key `ip_hardware.fib.load_balance_distribution.dynamic`) renders
`ip hardware fib load-balance distribution dynamic` [+ `... dynamic flow-set-size 1-7`], the EOS dynamic load
balancing of ECMP groups (Arista TOI "Dynamic Load Balancing (DLB) on ECMP groups", EOS 4.30). It is switch-wide
and assigns flow sets (flowlets) to members by load, so a switch gets it when any of its ports' intent is
`flowlet`. Not rendered: `per-packet` and the flowlet inactivity time, for which no EOS syntax was found (they
stay in the intent), and DR-generated CNP (no public EOS syntax; a per-platform policy flag).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, NamedTuple

from policies.intent import DeviceIntent, PortIntent


def _seconds(ms: int) -> str:
    # pyavd takes watchdog timers as seconds in strings with 2-3 decimals (platforms.md).
    return f"{ms / 1000:.3f}"


def _kbytes(n: int) -> int:
    return max(1, round(n / 1000))


class _PortRender(NamedTuple):
    """All of a port's intent that its rendered lines depend on (`_interface` sees nothing else)."""

    port: str
    pfc_enabled: bool
    no_drop: tuple[int, ...]
    ecn_enabled: bool
    ecn_min_bytes: int
    ecn_max_bytes: int
    ecn_max_probability: int


def _port_render(p: PortIntent) -> _PortRender:
    pfc, ecn = p.pfc, p.ecn
    return _PortRender(
        p.port, pfc.enabled, tuple(pfc.no_drop), ecn.enabled, ecn.min_bytes, ecn.max_bytes, ecn.max_probability
    )


def _head(dev: DeviceIntent) -> dict[str, Any]:
    """The global part of the structured config, without the hostname."""
    qos = dev.qos
    config: dict[str, Any] = {
        "qos": {"map": {"dscp": [f"{dscp} to traffic-class {tc}" for dscp, tc in sorted(qos.dscp_to_tc.items())]}},
    }
    if any(p.dlb.mode == "flowlet" for p in dev.ports):
        config["ip_hardware"] = {"fib": {"load_balance_distribution": {"dynamic": {"enabled": True}}}}
    watchdog = next((p.watchdog for p in dev.ports if p.watchdog.enabled), None)
    if watchdog is not None:
        config["priority_flow_control"] = {
            "watchdog": {
                "action": watchdog.action if watchdog.action in ("drop", "no-drop") else "drop",
                "timeout": _seconds(watchdog.timeout_ms),
                "polling_interval": _seconds(watchdog.polling_ms),
                "recovery_time": _seconds(watchdog.recovery_ms),
            }
        }
    return config


def structured_config(dev: DeviceIntent) -> dict[str, Any]:
    """The pyavd structured config for one switch's lossless settings."""
    qos = dev.qos
    lossless, debounce = tuple(qos.lossless_priorities), qos.link_debounce_ms
    return {
        "hostname": dev.device,
        **_head(dev),
        "ethernet_interfaces": [_interface(_port_render(p), lossless, debounce) for p in dev.ports],
    }


def _interface(p: _PortRender, lossless: tuple[int, ...], debounce_ms: int) -> dict[str, Any]:
    # No description: descriptions belong to whoever cables the fabric; fabricd owns only lossless settings.
    intf: dict[str, Any] = {"name": p.port, "qos": {"trust": "dscp"}}
    if p.pfc_enabled:
        intf["priority_flow_control"] = {
            "enabled": True,
            "priorities": [{"priority": prio, "no_drop": True} for prio in p.no_drop],
        }
    else:
        intf["priority_flow_control"] = {"enabled": False}
    if p.ecn_enabled:
        threshold = {
            "units": "kbytes",
            "min": _kbytes(p.ecn_min_bytes),
            "max": _kbytes(p.ecn_max_bytes),
            "max_probability": p.ecn_max_probability,
        }
        intf["tx_queues"] = [{"id": q, "random_detect": {"ecn": {"threshold": threshold}}} for q in lossless]
    if debounce_ms:
        intf["eos_cli"] = f"link-debounce time {debounce_ms}"
    return intf


_COMPACT = (",", ":")


@lru_cache(maxsize=65536)
def _interface_json(p: _PortRender, lossless: tuple[int, ...], debounce_ms: int) -> str:
    return json.dumps(_interface(p, lossless, debounce_ms), separators=_COMPACT)


# Rendered once per signature with this name, then the real hostname goes in its place (never a real name:
# it is not a valid EOS hostname).
_PLACEHOLDER = "fabricd:render:hostname"


def signature(dev: DeviceIntent) -> str:
    """Everything rendering uses except the hostname: switches of a role mostly share one.

    It is the compact JSON of the structured config without the hostname, put together from per-port pieces
    that are computed once per distinct port (80k ports at 16k GPUs, a few hundred distinct)."""
    qos = dev.qos
    lossless, debounce = tuple(qos.lossless_priorities), qos.link_debounce_ms
    ports = ",".join([_interface_json(_port_render(p), lossless, debounce) for p in dev.ports])
    head = json.dumps(_head(dev), separators=_COMPACT)
    return f'{head[:-1]},"ethernet_interfaces":[{ports}]}}'


@lru_cache(maxsize=256)
def render_template(sig: str) -> tuple[str, str] | None:
    """The config of a signature as (text before the hostname, text after it), rendered by pyavd once;
    None when the hostname does not appear exactly once in the output (then render each device itself)."""
    text = _render_config({"hostname": _PLACEHOLDER, **json.loads(sig)})
    before, sep, after = text.partition(_PLACEHOLDER)
    if not sep or _PLACEHOLDER in after:
        return None
    return before, after


def _render_config(config: dict[str, Any]) -> str:
    from pyavd import get_device_config  # heavy import: only when rendering

    text: str = get_device_config(config)
    return text


def render(dev: DeviceIntent) -> str:
    """EOS configuration text for one switch (pyavd renders it, once per signature)."""
    template = render_template(signature(dev))
    if template is None:
        return _render_config(structured_config(dev))
    return template[0] + dev.device + template[1]


def port_admin_lines(port: str, up: bool, description: str | None = None) -> list[str]:
    """The EOS lines that set one port's admin state (the sessions commit them; the page shows them as the diff),
    and its new description when fabricd's mark changes it (drivers/marks.py; "" removes the description)."""
    lines = [f"interface {port}", "no shutdown" if up else "shutdown"]
    if description is not None:
        lines.append(f"description {description}" if description else "no description")
    return lines
