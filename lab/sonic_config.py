"""Each twin SONiC switch's CONFIG_DB: running, saved (`/etc/sonic/config_db.json`) and checkpoints, changed the
way SONiC's Generic Config Updater (GCU, sonic-utilities `generic_config_updater`) changes it.

`config apply-patch` simulates the RFC 6902 patch on a copy, refuses a result with an empty table or one the
YANG models reject (`sonic_yang`), and only then swaps the copy in: all or nothing. `config rollback NAME`
replaces the running config with a checkpoint through the same checks. Whenever the running config changes,
every port's `PortConfig` is derived from it again, so `admin_status: down` takes the link down and
`pfc_enable` makes the port honour pause frames.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from topology.model import Endpoint

from .eos_identity import serial_number, system_mac
from .frr_policy import FrrPolicy
from .model import PortConfig, Switch, Twin
from .saved_config import write_private
from .sonic_yang import empty_tables, validate

ConfigDb = dict[str, Any]

# SONiC names a port after its first SerDes lane; the twin models 8-lane (400G/800G) front-panel ports, the
# same numbering fabricd's SONiC driver assumes (Ethernet1/1 -> Ethernet0, Ethernet2/1 -> Ethernet8).
LANES_PER_PORT = 8
HWSKU = "fabricd-twin-8-lane"
PLATFORM = "x86_64-kvm_x86_64-r0"  # the platform string of SONiC's virtual switch


class GcuError(Exception):
    """What the updater prints after `Error: ` when it refuses a change (the config is left as it was)."""


def sonic_port(port: str) -> str:
    """The SONiC name of a twin port (`EthernetN/1`)."""
    front = int(port.removeprefix("Ethernet").split("/")[0])
    return f"Ethernet{(front - 1) * LANES_PER_PORT}"


def lldp_port_id(twin: Twin, end: Endpoint) -> str:
    """The port id `end` advertises in its LLDPDUs: an EOS switch its interface name; a SONiC switch what its
    lldpmgrd configures lldpd with, the port's alias (CONFIG_DB `PORT|EthernetN` `alias`), else its SONiC name
    (reference/maintenance-lldp-bgp-state.md); a server its NIC's name."""
    sw = twin.switches.get(end.device)
    if sw is None or sw.platform != "sonic" or end.port not in sw.index:
        return end.port
    return sw.aliases[sw.index[end.port]] or sonic_port(end.port)


def lldp_port_descr(twin: Twin, end: Endpoint) -> str:
    """The port description `end` advertises: a SONiC switch's lldpd sends the interface's name (its SONiC name)
    where CONFIG_DB sets no description (lldpmgrd passes one only when set); others their port id."""
    sw = twin.switches.get(end.device)
    if sw is None or sw.platform != "sonic" or end.port not in sw.index:
        return lldp_port_id(twin, end)
    return sw.config[sw.index[end.port]].description or sonic_port(end.port)


def system_description(sw: Switch) -> str:
    """What a SONiC switch's lldpd advertises as system description (lldpmgrd sets it from `show version`)."""
    return f"SONiC Software Version: {sw.os_version} - HwSku: {HWSKU} - Distribution: Debian 12.8 - Kernel: 6.1.0"


# --- RFC 6902 (what python-jsonpatch, which the GCU uses, does on objects) --------------------------------


def _tokens(pointer: Any) -> list[str]:
    if not isinstance(pointer, str):
        raise GcuError("Operation does not contain 'path' member")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise GcuError("Location must start with /")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _parent(doc: dict[str, Any], tokens: list[str]) -> dict[str, Any]:
    node: Any = doc
    for i, t in enumerate(tokens[:-1]):
        if not isinstance(node, dict) or t not in node:
            where = "/" + "/".join(tokens[:i])
            raise GcuError(f"member '{t}' not found in {where}")
        node = node[t]
    if not isinstance(node, dict):
        raise GcuError(f"'{'/'.join(tokens[:-1])}' is not an object (the twin models config_db tables only)")
    return node


def apply_json_patch(doc: ConfigDb, patch: Any) -> ConfigDb:
    """A new document with the patch applied; raises GcuError with jsonpatch's wording."""
    if not isinstance(patch, list):
        raise GcuError("Document is not valid JSON Patch: it must be a list of operations")
    out = copy.deepcopy(doc)
    for op in patch:
        if not isinstance(op, dict) or "op" not in op:
            raise GcuError("Operation does not contain 'op' member")
        kind, tokens = op["op"], _tokens(op.get("path"))
        if not tokens:
            raise GcuError(f"{kind} of the whole config is not supported; use config replace")
        parent, last = _parent(out, tokens), tokens[-1]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise GcuError("The operation does not contain a 'value' member")
        if kind == "add":
            parent[last] = copy.deepcopy(op["value"])
        elif kind in ("remove", "replace"):
            if last not in parent:
                raise GcuError(f"can't {kind} a non-existent object '{last}'")
            if kind == "remove":
                del parent[last]
            else:
                parent[last] = copy.deepcopy(op["value"])
        elif kind == "test":
            if parent.get(last) != op["value"]:
                raise GcuError(f"{parent.get(last)!r} is not equal to tested value {op['value']!r}")
        elif kind in ("move", "copy"):
            source = _tokens(op.get("from"))
            holder = _parent(out, source)
            if not source or source[-1] not in holder:
                raise GcuError(f"member '{source[-1] if source else ''}' not found in {op.get('from')}")
            if kind == "move" and tokens[: len(source)] == source:
                raise GcuError("Cannot move values into their own children")
            value = holder.pop(source[-1]) if kind == "move" else copy.deepcopy(holder[source[-1]])
            _parent(out, tokens)[last] = value
        else:
            raise GcuError(f"Unknown operation {kind!r}")
    return out


# --- one switch --------------------------------------------------------------------------------------------


def _default_config(twin: Twin, device: str) -> ConfigDb:
    """What a freshly installed switch has: metadata, ports, SONiC's lossy buffer templates and schedulers."""
    sw = twin.switch(device)
    ports: dict[str, Any] = {}
    queues: dict[str, Any] = {}
    pgs: dict[str, Any] = {}
    for port, speed in zip(sw.ports, sw.speeds, strict=True):
        name = sonic_port(port)
        first = int(name.removeprefix("Ethernet"))
        ports[name] = {
            "admin_status": "up",
            "alias": f"etp{first // LANES_PER_PORT + 1}",
            "index": str(first // LANES_PER_PORT),
            "lanes": ",".join(str(first + i) for i in range(LANES_PER_PORT)),
            "mtu": "9100",
            "speed": str(int(speed) * 1000),
        }
        # SONiC's QoS template: lossless queues 3-4 on their own scheduler, the rest on the default one.
        for q in ("0-2", "3", "4", "5-6"):
            queues[f"{name}|{q}"] = {"scheduler": "scheduler.1" if q in ("3", "4") else "scheduler.0"}
        pgs[f"{name}|0"] = {"profile": "ingress_lossy_profile"}
    role = str(sw.role)
    return {
        "DEVICE_METADATA": {
            "localhost": {
                "hostname": device,
                "hwsku": HWSKU,
                "mac": system_mac(device),
                "platform": PLATFORM,
                "type": {"leaf": "ToRRouter", "spine": "LeafRouter"}.get(role, "SpineRouter"),
            }
        },
        "PORT": ports,
        "BUFFER_POOL": {
            "ingress_lossless_pool": {"mode": "dynamic", "size": "47218432", "type": "ingress"},
            "ingress_lossy_pool": {"mode": "dynamic", "size": "47218432", "type": "ingress"},
            "egress_lossless_pool": {"mode": "dynamic", "size": "60817392", "type": "egress"},
            "egress_lossy_pool": {"mode": "dynamic", "size": "47218432", "type": "egress"},
        },
        "BUFFER_PROFILE": {
            "ingress_lossy_profile": {"dynamic_th": "3", "pool": "ingress_lossy_pool", "size": "0"},
            "egress_lossless_profile": {"dynamic_th": "7", "pool": "egress_lossless_pool", "size": "0"},
            "egress_lossy_profile": {"dynamic_th": "7", "pool": "egress_lossy_pool", "size": "9216"},
        },
        "BUFFER_PG": pgs,
        "SCHEDULER": {"scheduler.0": {"type": "DWRR", "weight": "14"}, "scheduler.1": {"type": "DWRR", "weight": "15"}},
        "QUEUE": queues,
        "PFC_WD": {"GLOBAL": {"BIG_RED_SWITCH": "disable", "POLL_INTERVAL": "200"}},
    }


def _indices(spec: str) -> list[int]:
    lo, _, hi = spec.partition("-")
    return list(range(int(lo), int(hi or lo) + 1)) if lo.isdigit() and (hi or lo).isdigit() else []


def derive_port_config(db: Mapping[str, Any], name: str) -> PortConfig:
    """The twin's view of one port from CONFIG_DB (what orchagent would program)."""
    port = db.get("PORT", {}).get(name, {})
    qos = db.get("PORT_QOS_MAP", {}).get(name, {})
    no_drop = frozenset(int(p) for p in str(qos.get("pfc_enable", "")).split(",") if p.isdigit())
    ecn: dict[int, tuple[int, int, int]] = {}
    profiles = db.get("WRED_PROFILE", {})
    for key, entry in db.get("QUEUE", {}).items():
        owner, _, queues = key.partition("|")
        wred = profiles.get(entry.get("wred_profile", ""))
        if owner != name or wred is None or wred.get("ecn", "ecn_none") == "ecn_none":
            continue
        thresholds = (
            int(wred.get("green_min_threshold", 0)),
            int(wred.get("green_max_threshold", 0)),
            int(wred.get("green_drop_probability", 100)),
        )
        ecn.update({q: thresholds for q in _indices(queues)})
    headroom, dynamic_th = _lossless_pg(db, name, no_drop)
    return PortConfig(
        # SONiC's default admin status is down: a port is up only when the config says so.
        admin_up=port.get("admin_status", "down") == "up",
        pfc_enabled=bool(no_drop),
        no_drop=no_drop,
        ecn=ecn,
        watchdog=bool(no_drop) and name in db.get("PFC_WD", {}),
        # what `show interfaces description`, APPL_DB PORT_TABLE and lldpd show: fabricd's mark lives here
        description=str(port.get("description", "")),
        pg_headroom_bytes=headroom,
        pg_dynamic_th=dynamic_th,
    )


def _lossless_pg(db: Mapping[str, Any], name: str, no_drop: frozenset[int]) -> tuple[int, int | None]:
    """(headroom bytes, dynamic_th) of the port's lossless PGs: BUFFER_PG `<port>|<pgs>` -> BUFFER_PROFILE `xoff`
    and `dynamic_th` (what fabricd renders, drivers/sonic/render.py); (0, None) when none is bound."""
    profiles = db.get("BUFFER_PROFILE", {})
    for key, entry in db.get("BUFFER_PG", {}).items():
        owner, _, pgs = key.partition("|")
        profile = profiles.get(str(entry.get("profile", "")).strip("[]").split("|")[-1], {})
        if owner != name or not no_drop.intersection(_indices(pgs)) or "xoff" not in profile:
            continue
        try:
            dynamic = int(profile["dynamic_th"]) if "dynamic_th" in profile else None
            return int(profile["xoff"]), dynamic
        except ValueError:
            return 0, None
    return 0, None


class SonicDevice:
    def __init__(self, twin: Twin, device: str, saved_dir: Path | None = None):
        """`saved_dir`: where /etc/sonic/config_db.json is kept across restarts of the twin (a power cycle: the
        switch boots from what `config save` wrote); None: in memory only."""
        self.twin = twin
        self.device = device
        self.saved_file = saved_dir / f"{device}.config_db.json" if saved_dir is not None else None
        self.running: ConfigDb = _default_config(twin, device)
        if self.saved_file is not None and self.saved_file.exists():
            self.running = json.loads(self.saved_file.read_text())
        self.saved: ConfigDb = copy.deepcopy(self.running)
        self.checkpoints: dict[str, ConfigDb] = {}  # /etc/sonic/checkpoints/NAME.cp.json (survive a reboot)
        self.boot_ns = twin.switch(device).boot_ns
        self.on_reboot: list[Callable[[], None]] = []  # run when a reboot is noticed (/tmp, jobs go)
        self.frr: FrrPolicy | None = None  # what vtysh configured in FRR since boot (lab/frr_policy.py)
        self.sync()

    def frr_policy(self) -> FrrPolicy:
        if self.frr is None:
            underlay = self.twin.bgp.underlay
            speaker = underlay.speakers[self.device]
            self.frr = FrrPolicy(speaker.asn, {s.peer_address for s in underlay.sessions(self.device)})
        return self.frr

    @property
    def hostname(self) -> str:
        meta = self.running.get("DEVICE_METADATA", {}).get("localhost", {})
        return str(meta.get("hostname", self.device))

    def check_reboot(self) -> None:
        """A reboot (fault) loads the saved config; the shell's /tmp and background jobs are gone too."""
        boot = self.twin.switch(self.device).boot_ns
        if boot != self.boot_ns:
            self.boot_ns = boot
            self.set_running(copy.deepcopy(self.saved))
            if self.frr is not None:  # FRR's running config, never saved, is gone with the reboot
                self.frr = None
                self.twin.set_depreferred(self.device, frozenset())
            for hook in self.on_reboot:
                hook()

    def set_running(self, db: ConfigDb) -> None:
        self.running = db
        self.sync()

    def sync(self) -> None:
        sw = self.twin.switch(self.device)
        table = self.running.get("PORT", {})
        for row, port in enumerate(sw.ports):
            alias = table.get(sonic_port(port), {}).get("alias")
            if isinstance(alias, str) and alias:
                sw.aliases[row] = alias
        for port, current in zip(sw.ports, sw.config, strict=True):
            wanted = derive_port_config(self.running, sonic_port(port))
            if wanted != current:
                self.twin.set_port_config(self.device, port, wanted)

    def serial(self) -> str:
        return serial_number(self.device)

    # -- the updater --
    def _check(self, target: ConfigDb) -> None:
        empty = empty_tables(target)
        if empty:
            raise GcuError(
                "localhost: given patch is not valid because it will result in empty tables which is not allowed "
                f"in ConfigDb. Table{'s' if len(empty) != 1 else ''}: {', '.join(empty)}"
            )
        error = validate(target)
        if error:
            raise GcuError(f"Given patch will produce invalid config. Error: Data Loading Failed\n{error}")

    def apply_patch(self, text: str, dry_run: bool) -> list[str]:
        """`config apply-patch`: the updater's log lines; raises GcuError and leaves the config as it was."""
        log = ["Patch Applier: localhost: Patch application starting."]
        try:
            patch = json.loads(text)
        except json.JSONDecodeError as e:
            raise GcuError(f"Expecting value: line {e.lineno} column {e.colno} (char {e.pos})") from None
        log.append(f"Patch Applier: localhost: Patch: {json.dumps(patch)}")
        log.append("Patch Applier: localhost getting current config db.")
        log.append("Patch Applier: localhost: simulating the target full config after applying the patch.")
        target = apply_json_patch(self.running, patch)
        log.append("Patch Applier: localhost: validating target config does not have empty tables,")
        log.append("                            since they do not show up in ConfigDb.")
        log.append("Patch Applier: localhost: sorting patch updates.")
        self._check(target)
        n = len(patch)
        log.append(f"Patch Applier: The localhost patch was converted into {n} change{'s' if n != 1 else ''}:")
        log.append(f"Patch Applier: localhost: applying {n} change{'s' if n != 1 else ''} in order:")
        log += [f"Patch Applier:   * [{json.dumps(op)}]" for op in patch]
        if not dry_run:
            self.set_running(target)
        log.append("Patch Applier: localhost: verifying patch updates are reflected on ConfigDB.")
        log.append("Patch Applier: localhost patch application completed.")
        return log

    def checkpoint(self, name: str) -> None:
        self.checkpoints[name] = copy.deepcopy(self.running)

    def rollback(self, name: str, dry_run: bool = False) -> None:
        """`config rollback NAME`: replace the running config with the checkpoint (validated like a patch)."""
        target = self.checkpoints.get(name)
        if target is None:
            raise GcuError(f"Checkpoint '{name}' does not exist")
        self._check(target)
        if not dry_run:
            self.set_running(copy.deepcopy(target))

    def delete_checkpoint(self, name: str) -> None:
        if self.checkpoints.pop(name, None) is None:
            raise GcuError(f"Checkpoint '{name}' does not exist")

    def save(self) -> None:
        self.saved = copy.deepcopy(self.running)
        if self.saved_file is not None:
            write_private(self.saved_file, json.dumps(self.saved, indent=1, sort_keys=True) + "\n")

    def set_admin(self, name: str, up: bool) -> None:
        """`config interface startup|shutdown PORT`."""
        port = self.running.get("PORT", {}).get(name)
        if port is None:
            raise GcuError(f"Interface name is invalid. Please enter a valid interface name!! ({name})")
        target = copy.deepcopy(self.running)
        target["PORT"][name]["admin_status"] = "up" if up else "down"
        self.set_running(target)


class SonicStore:
    """The CONFIG_DB of every SONiC switch of a twin."""

    def __init__(self, twin: Twin, saved_dir: Path | None = None):
        self.devices = {
            name: SonicDevice(twin, name, saved_dir) for name, sw in twin.switches.items() if sw.platform == "sonic"
        }

    def device(self, name: str) -> SonicDevice:
        try:
            return self.devices[name]
        except KeyError:
            raise KeyError(f"no SONiC switch {name!r} in this twin") from None
