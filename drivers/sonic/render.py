"""Intent -> the SONiC config_db tables fabricd owns, in the flat shape of config_db.json
(`{"TABLE": {"key": {"field": "value"}}}`, every value a string).

Tables and fields: shared/reference/platforms.md ("SONiC config_db"). Not rendered: DLB/flowlet (no
config_db table in platforms.md) and DR-generated CNP (the policy marks SONiC as unable to generate it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from policies.intent import DeviceIntent, PortIntent
from topology.errors import FabricdError

ConfigDb = dict[str, dict[str, dict[str, str]]]

# The name SONiC's QoS templates give their maps; PORT_QOS_MAP fields refer to the map by this name.
MAP_NAME = "AZURE"
PREFIX = "FABRICD_"
LOSSY_PG_PROFILE = f"{PREFIX}PG_LOSSY"

PORT_MTU = "9100"  # SONiC's default port MTU on data ports
# XON = 2 x the policy MTU (PfcPolicy.mtu_bytes default 9216): room to restart without underrunning.
XON_BYTES = 2 * 9216
# SONiC's default for a lossless PG (Mellanox/Broadcom buffer templates): alpha = 2^-2 of the free pool,
# so one congested PG cannot take the shared buffer from the others.
LOSSLESS_DYNAMIC_TH = "-2"
# SONiC's ingress_lossy_profile: no reserved size, generous alpha (2^3); PFC off means this PG may drop.
LOSSY_DYNAMIC_TH = "3"

# PFC_WD ranges in SONiC (platforms.md "SONiC config_db"): detection 100-5000 ms, restoration
# 100-60000 ms, poll interval 100-1000 ms. The policy allows finer timers (EOS takes them), so clamp.
DETECTION_MS = (100, 5000)
RESTORATION_MS = (100, 60000)
POLL_MS = (100, 1000)
# SONiC PFC_WD actions are drop|forward|alert (platforms.md). EOS "no-drop" keeps transmitting the stuck
# queue ignoring pause, which is SONiC "forward"; "notify-only" only reports, which is SONiC "alert".
WATCHDOG_ACTION = {"drop": "drop", "no-drop": "forward", "notify-only": "alert"}

_EOS_PORT = re.compile(r"^Ethernet(\d+)/1$")
_SONIC_PORT = re.compile(r"^Ethernet\d+$")
LANES_PER_PORT = 8


class SonicRenderError(FabricdError):
    """The intent cannot be expressed in SONiC config_db."""


def sonic_port_name(eos_style: str) -> str:
    """`EthernetN/1` (fabricd's topology names) -> SONiC `Ethernet{(N-1)*8}`.

    SONiC names a port after its first SerDes lane; 400G/800G ports on the common 64-port boxes use 8 lanes,
    so front-panel port N starts at lane (N-1)*8. Names already in SONiC form pass through unchanged.
    """
    m = _EOS_PORT.match(eos_style)
    if m and int(m.group(1)) >= 1:
        return f"Ethernet{(int(m.group(1)) - 1) * LANES_PER_PORT}"
    if _SONIC_PORT.match(eos_style):
        return eos_style
    raise SonicRenderError(
        f"port {eos_style!r} has no SONiC name: use EthernetN/1 (no breakouts) or a SONiC name like Ethernet8"
    )


def fabricd_port_name(sonic: str) -> str:
    """SONiC `Ethernet{(N-1)*8}` -> fabricd's `EthernetN/1` (sonic_port_name's inverse); other names as they are."""
    m = re.match(r"^Ethernet(\d+)$", sonic)
    if m and int(m.group(1)) % LANES_PER_PORT == 0:
        return f"Ethernet{int(m.group(1)) // LANES_PER_PORT + 1}/1"
    return sonic


def _clamp(ms: int, bounds: tuple[int, int]) -> str:
    return str(min(max(ms, bounds[0]), bounds[1]))


def _csv(values: Iterable[int]) -> str:
    return ",".join(str(v) for v in sorted(values))


def pg_ranges(priorities: Iterable[int]) -> list[str]:
    """[3, 4, 6] -> ["3-4", "6"]: the BUFFER_PG key suffixes for these priority groups."""
    out: list[str] = []
    run: list[int] = []
    for p in sorted(set(priorities)):
        if run and p != run[-1] + 1:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
        run.append(p)
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return out


def _size(n: int) -> str:
    return f"{n // 1000}K" if n % 1000 == 0 else str(n)


def wred_profile_name(p: PortIntent) -> str:
    e = p.ecn
    return f"{PREFIX}LOSSLESS_{_size(e.min_bytes)}_{_size(e.max_bytes)}_P{e.max_probability}"


def pg_profile_name(headroom_bytes: int) -> str:
    return f"{PREFIX}PG_LOSSLESS_{headroom_bytes}"


def _sorted(db: ConfigDb) -> ConfigDb:
    return {t: {k: dict(sorted(db[t][k].items())) for k in sorted(db[t])} for t in sorted(db) if db[t]}


def _maps(lossless: list[int], dscp_to_tc: dict[int, int]) -> ConfigDb:
    identity = {str(i): str(i) for i in range(8)}
    return {
        # All 64 code points, so traffic with an unmapped DSCP lands in TC 0 (best effort), never by accident
        # in the lossless class.
        "DSCP_TO_TC_MAP": {MAP_NAME: {str(d): str(dscp_to_tc.get(d, 0)) for d in range(64)}},
        "TC_TO_QUEUE_MAP": {MAP_NAME: dict(identity)},
        "MAP_PFC_PRIORITY_TO_QUEUE": {MAP_NAME: dict(identity)},
        # Lossless TCs get their own PG (headroom is reserved per PG); every other TC shares lossy PG 0.
        "TC_TO_PRIORITY_GROUP_MAP": {MAP_NAME: {str(i): str(i if i in lossless else 0) for i in range(8)}},
    }


def render_config_db(dev: DeviceIntent) -> ConfigDb:
    """The config_db tables fabricd owns for one SONiC switch, keys sorted so the output is stable."""
    lossless = dev.qos.lossless_priorities
    db: ConfigDb = {
        "PORT": {},
        "PORT_QOS_MAP": {},
        "WRED_PROFILE": {},
        "QUEUE": {},
        "BUFFER_PROFILE": {},
        "BUFFER_PG": {},
        "PFC_WD": {},
        **_maps(lossless, dev.qos.dscp_to_tc),
    }
    polls: list[int] = []
    for p in dev.ports:
        name = sonic_port_name(p.port)
        db["PORT"][name] = {
            "admin_status": "up",
            "alias": p.port,
            "fec": "rs",
            "mtu": PORT_MTU,
            "speed": str(p.speed_gbps * 1000),
        }
        qos_map = {f: MAP_NAME for f in ("dscp_to_tc_map", "tc_to_queue_map", "tc_to_pg_map", "pfc_to_queue_map")}
        if p.pfc.enabled and p.pfc.no_drop:
            qos_map["pfc_enable"] = _csv(p.pfc.no_drop)
            profile = pg_profile_name(p.pfc.headroom_bytes)
            xoff = max(p.pfc.headroom_bytes - XON_BYTES, 0)
            db["BUFFER_PROFILE"][profile] = {
                "dynamic_th": LOSSLESS_DYNAMIC_TH,
                "pool": "ingress_lossless_pool",
                "size": str(XON_BYTES + xoff),
                "xoff": str(xoff),
                "xon": str(XON_BYTES),
            }
            pgs = p.pfc.no_drop
        else:
            # PFC off (e.g. a 120 km port on a shallow-buffer DR): the RoCE PG runs lossy with no headroom
            # reserved; a shallow buffer could never hold the ~61 MB a 120 km 400G link needs (domain.md).
            profile = LOSSY_PG_PROFILE
            db["BUFFER_PROFILE"][profile] = {"dynamic_th": LOSSY_DYNAMIC_TH, "pool": "ingress_lossy_pool", "size": "0"}
            pgs = lossless
        for pg in pg_ranges(pgs):
            db["BUFFER_PG"][f"{name}|{pg}"] = {"profile": profile}
        if p.ecn.enabled:
            wred = wred_profile_name(p)
            db["WRED_PROFILE"][wred] = {
                "ecn": "ecn_all",
                "green_drop_probability": str(p.ecn.max_probability),
                "green_max_threshold": str(p.ecn.max_bytes),
                "green_min_threshold": str(p.ecn.min_bytes),
                "wred_green_enable": "true",
            }
            for q in lossless:  # TC -> queue is the identity (TC_TO_QUEUE_MAP)
                db["QUEUE"][f"{name}|{q}"] = {"wred_profile": wred}
        wd = p.watchdog
        if wd.enabled and p.pfc.enabled and p.pfc.no_drop:
            qos_map["pfcwd_sw_enable"] = _csv(p.pfc.no_drop)
            db["PFC_WD"][name] = {
                # Unknown actions fall back to SONiC's default, drop (platforms.md).
                "action": WATCHDOG_ACTION.get(wd.action, "drop"),
                "detection_time": _clamp(wd.timeout_ms, DETECTION_MS),
                "restoration_time": _clamp(wd.recovery_ms, RESTORATION_MS),
            }
            polls.append(wd.polling_ms)
        db["PORT_QOS_MAP"][name] = qos_map
    if polls:
        # SONiC polls all ports at one global interval: take the shortest any port asks for.
        db["PFC_WD"]["GLOBAL"] = {"POLL_INTERVAL": _clamp(min(polls), POLL_MS)}
    return _sorted(db)
