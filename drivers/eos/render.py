"""Intent -> EOS configuration text, through pyavd's structured config (eos_cli_config_gen).

Keys and the lines pyavd renders from them: shared/reference/platforms.md ("Arista EOS CLI").
Raw `eos_cli` lines only where pyavd has no key:
- `link-debounce time MS` per interface (not modelled by pyavd, platforms.md).
Not rendered yet, because their EOS syntax is UNVERIFIED (platforms.md): DLB/flowlet settings and
DR-generated CNP. They stay in the intent (and in `fabricd intent`) until the syntax is confirmed.
"""

from __future__ import annotations

from typing import Any

from policies.intent import DeviceIntent, PortIntent


def _seconds(ms: int) -> str:
    # pyavd takes watchdog timers as seconds in strings with 2-3 decimals (platforms.md).
    return f"{ms / 1000:.3f}"


def _kbytes(n: int) -> int:
    return max(1, round(n / 1000))


def structured_config(dev: DeviceIntent) -> dict[str, Any]:
    """The pyavd structured config for one switch's lossless settings."""
    qos = dev.qos
    config: dict[str, Any] = {
        "hostname": dev.device,
        "qos": {"map": {"dscp": [f"{dscp} to traffic-class {tc}" for dscp, tc in sorted(qos.dscp_to_tc.items())]}},
    }
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
    config["ethernet_interfaces"] = [_interface(p, qos.lossless_priorities, qos.link_debounce_ms) for p in dev.ports]
    return config


def _interface(p: PortIntent, lossless: list[int], debounce_ms: int) -> dict[str, Any]:
    # No description: descriptions belong to whoever cables the fabric; fabricd owns only lossless settings.
    intf: dict[str, Any] = {"name": p.port, "qos": {"trust": "dscp"}}
    if p.pfc.enabled:
        intf["priority_flow_control"] = {
            "enabled": True,
            "priorities": [{"priority": prio, "no_drop": True} for prio in p.pfc.no_drop],
        }
    else:
        intf["priority_flow_control"] = {"enabled": False}
    if p.ecn.enabled:
        threshold = {
            "units": "kbytes",
            "min": _kbytes(p.ecn.min_bytes),
            "max": _kbytes(p.ecn.max_bytes),
            "max_probability": p.ecn.max_probability,
        }
        intf["tx_queues"] = [{"id": q, "random_detect": {"ecn": {"threshold": threshold}}} for q in lossless]
    if debounce_ms:
        intf["eos_cli"] = f"link-debounce time {debounce_ms}"
    return intf


def render(dev: DeviceIntent) -> str:
    """EOS configuration text for one switch (pyavd renders it)."""
    from pyavd import get_device_config  # heavy import: only when rendering

    text: str = get_device_config(structured_config(dev))
    return text
