"""The SONiC CLI of the twin (sonic-utilities' `show` and `config`), as text the way a switch prints it.

`config` follows sonic-utilities `config/main.py`: apply-patch [-d] [-f CONFIGDB] [-v] FILE, checkpoint NAME,
rollback [-d] NAME, delete-checkpoint NAME, list-checkpoints, save -y, interface shutdown|startup PORT. A refused
command prints click's usage lines and `Error: ...` and exits 2, after the updater's own log lines.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from topology.units import NS

from . import sonic_bgp
from .eos_identity import system_mac
from .model import Twin
from .sonic_config import (
    HWSKU,
    PLATFORM,
    GcuError,
    SonicDevice,
    lldp_port_descr,
    lldp_port_id,
    sonic_port,
    system_description,
)

Output = tuple[str, str, int]  # stdout, stderr, exit status
ReadFile = Callable[[str], "str | None"]

_USAGE = {
    "apply-patch": "config apply-patch [OPTIONS] PATCH_FILE_PATH",
    "checkpoint": "config checkpoint [OPTIONS] CHECKPOINT_NAME",
    "rollback": "config rollback [OPTIONS] CHECKPOINT_NAME",
    "delete-checkpoint": "config delete-checkpoint [OPTIONS] CHECKPOINT_NAME",
    "save": "config save [OPTIONS] [FILENAME]",
    "interface": "config interface [OPTIONS] COMMAND [ARGS]...",
}


_TOP_USAGE = 'Usage: {tool} [OPTIONS] COMMAND [ARGS]...\nTry "{tool} -h" for help.\n'


def _fail(command: str, summary: str, error: str, log: list[str] | None = None) -> Output:
    """click's `ctx.fail`: usage, a hint and the error on stderr, exit 2 (after what was already logged)."""
    usage = _USAGE.get(command, f"config {command} [OPTIONS]")
    text = f'{summary}\nUsage: {usage}\nTry "config {command} -h" for help.\n\nError: {error}\n'
    return "\n".join(log or []) + ("\n" if log else ""), text, 2


def config_command(dev: SonicDevice, args: list[str], read: ReadFile) -> Output:
    if not args:
        return "Usage: config [OPTIONS] COMMAND [ARGS]...\n", "", 0
    command, rest = args[0], args[1:]
    flags = {a for a in rest if a.startswith("-")}
    words = [a for a in rest if not a.startswith("-") and a not in ("CONFIGDB", "SONICYANG")]
    dry = bool(flags & {"-d", "--dry-run"})
    banner = ["** DRY RUN EXECUTION **"] if dry else []
    if command == "apply-patch":
        if len(words) != 1:
            return _fail(command, "", "Missing argument 'PATCH_FILE_PATH'.")
        text = read(words[0])
        if text is None:
            return _fail(command, "Failed to apply patch", f"[Errno 2] No such file or directory: '{words[0]}'")
        try:
            log = dev.apply_patch(text, dry_run=dry)
        except GcuError as e:
            return _fail(command, "Failed to apply patch", str(e), banner)
        return "\n".join([*banner, *log, "Patch applied successfully."]) + "\n", "", 0
    if command in ("checkpoint", "rollback", "delete-checkpoint"):
        if len(words) != 1:
            return _fail(command, "", "Missing argument 'CHECKPOINT_NAME'.")
        name = words[0]
        try:
            if command == "checkpoint":
                dev.checkpoint(name)
                done = "Checkpoint created successfully."
            elif command == "rollback":
                dev.rollback(name, dry_run=dry)
                done = "Config rolled back successfully."
            else:
                dev.delete_checkpoint(name)
                done = "Checkpoint deleted successfully."
        except GcuError as e:
            what = {"rollback": "rollback config", "delete-checkpoint": "delete config checkpoint"}[command]
            return _fail(command, f"Failed to {what}", str(e), banner)
        return "\n".join([*banner, f"Config Rollbacker: Checkpoint name: {name}.", done]) + "\n", "", 0
    if command == "list-checkpoints":
        return json.dumps(sorted(dev.checkpoints), indent=4) + "\n", "", 0
    if command == "save":
        if not flags & {"-y", "--yes"}:
            # Without -y it asks; nothing answers an automation client, so it aborts as click does on EOF.
            return "Existing files will be overwritten, continue? [y/N]: \n", "Aborted!\n", 1
        dev.save()
        return "Running command: /usr/local/bin/sonic-cfggen -d --print-data > /etc/sonic/config_db.json\n", "", 0
    if command == "interface" and len(words) == 2 and words[0] in ("shutdown", "startup"):
        try:
            dev.set_admin(words[1], words[0] == "startup")
        except GcuError as e:
            return _fail(command, "", str(e))
        return "", "", 0
    return "", f"{_TOP_USAGE.format(tool='config')}\nError: No such command '{command}'.\n", 2


# --- show ----------------------------------------------------------------------------------------------------


def _table(headers: list[str], rows: list[list[str]]) -> str:
    """tabulate's "simple" format with stralign='right', as intfutil prints its tables: a column is as wide as its
    widest cell and at least its header plus tabulate's MIN_PADDING (2), so `Oper` heads a column of six dashes; a
    row ends where its last visible character does (tabulate strips each line's right end)."""
    widths = [max([len(h) + 2, *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines) + "\n"


def _interfaces_status(twin: Twin, dev: SonicDevice) -> str:
    sw = twin.switch(dev.device)
    ports = dev.running.get("PORT", {})
    rows = []
    for row, port in enumerate(sw.ports):
        name = sonic_port(port)
        entry = ports.get(name, {})
        speed = int(entry.get("speed", "0")) // 1000
        rows.append([
            name, entry.get("lanes", "N/A"), f"{speed}G", entry.get("mtu", "9100"), entry.get("fec", "N/A"),
            entry.get("alias", "N/A"), "routed", "up" if sw.oper_up[row] else "down",
            entry.get("admin_status", "down"), "QSFP-DD", "N/A",
        ])  # fmt: skip
    headers = ["Interface", "Lanes", "Speed", "MTU", "FEC", "Alias", "Vlan", "Oper", "Admin", "Type", "Asym PFC"]
    return _table(headers, rows)


def _interfaces_description(twin: Twin, dev: SonicDevice, only: str | None = None) -> str:
    """`show interfaces description [PORT]` (intfutil's description view): Interface, Oper, Admin, Alias, Description
    from APPL_DB's PORT_TABLE, where a field the port does not have reads "N/A" (a port without a description in
    CONFIG_DB shows N/A, not an empty cell); ports in natural order, as natsorted prints them. A name that is no
    port leaves the table empty (headers only), as intfutil finds no key for it."""
    sw = twin.switch(dev.device)
    ports = dev.running.get("PORT", {})
    rows = []
    for row, port in sorted(enumerate(sw.ports), key=lambda x: int(sonic_port(x[1]).removeprefix("Ethernet"))):
        name = sonic_port(port)
        if only is not None and name != only:
            continue
        entry = ports.get(name, {})
        oper = "up" if sw.oper_up[row] else "down"
        rows.append([name, oper, entry.get("admin_status", "down"), entry.get("alias", "N/A"),
                     entry.get("description", "N/A")])  # fmt: skip
    return _table(["Interface", "Oper", "Admin", "Alias", "Description"], rows)


def _lldp_table(twin: Twin, dev: SonicDevice) -> str:
    """`show lldp table` as sonic-utilities' lldpshow prints it: a legend, tabulate's simple format (left-aligned),
    a rule and the count. LLDP runs only over a live link."""
    sw = twin.switch(dev.device)
    rows = []
    for row, port in enumerate(sw.ports):
        if twin.daemons is not None:  # lldpd's own table
            got = twin.daemons.lldp.get(sw.name, {}).get(port)
            if got is not None:
                cap = "".join(c[0] for c in got.capabilities if c in ("Bridge", "Router")) or "O"
                rows.append([sonic_port(port), got.system, got.port_id, cap, got.port_descr])
            continue
        peer = twin.lldp_heard(sw, row)
        if peer is None:
            continue
        cap = "BR" if twin.is_switch(peer.device) else "O"
        rows.append([sonic_port(port), peer.device, lldp_port_id(twin, peer), cap, lldp_port_descr(twin, peer)])
    headers = ["LocalPort", "RemoteDevice", "RemotePortID", "Capability", "RemotePortDescr"]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    lines = ["Capability codes: (R) Router, (B) Bridge, (O) Other"]
    lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines += ["-" * 50, f"Total entries displayed:  {len(rows)}"]
    return "\n".join(lines) + "\n"


def lldpctl_command(twin: Twin, dev: SonicDevice, args: list[str]) -> Output:
    """`lldpctl -f json` / `lldpcli show neighbors -f json` (SONiC's lldp container): lldpd's own JSON with real
    daemons, else the model's neighbours in lldpd's shape (one interface an object, several a list of them)."""
    words = [a for a in args if a not in ("-f", "json")]
    if "json" not in args or words not in ([], ["show", "neighbors"], ["show", "neighbours"]):
        return "", "the twin's lldpctl answers `lldpctl -f json` and `lldpcli show neighbors -f json`\n", 1
    if twin.daemons is not None:
        return twin.daemons.lldpctl(dev.device), "", 0
    sw = twin.switch(dev.device)
    items = []
    for row, port in enumerate(sw.ports):
        peer = twin.lldp_heard(sw, row)
        if peer is None:
            continue
        far = twin.switches.get(peer.device)
        caps = [{"type": t, "enabled": far is not None and t in ("Bridge", "Router")} for t in ("Bridge", "Router")]
        descr = system_description(far) if far is not None and far.platform == "sonic" else ""
        chassis = {"id": {"type": "mac", "value": system_mac(peer.device)}, "descr": descr, "capability": caps}
        pid_type = "local" if far is not None else "ifname"
        items.append({sonic_port(port): {
            "via": "LLDP", "rid": str(row + 1), "chassis": {peer.device: chassis},
            "port": {"id": {"type": pid_type, "value": lldp_port_id(twin, peer)}, "descr": lldp_port_descr(twin, peer),
                     "ttl": "120"},
        }})  # fmt: skip
    interface: object = items[0] if len(items) == 1 else items
    return json.dumps({"lldp": {"interface": interface} if items else {}}, indent=2) + "\n", "", 0


def _version(twin: Twin, dev: SonicDevice) -> str:
    sw = twin.switch(dev.device)
    up_s = max(0, (twin.clock() - sw.boot_ns) // NS)
    return (
        f"\nSONiC Software Version: {sw.os_version}\nSONiC OS Version: 12\nDistribution: Debian 12.8\n"
        "Kernel: 6.1.0-22-2-amd64\nBuild commit: 0000000\nBuilt by: fabricd-twin\n\n"
        f"Platform: {PLATFORM}\nHwSKU: {HWSKU}\nASIC: vs\nASIC Count: 1\nSerial Number: {dev.serial()}\n"
        f"Model Number: fabricd-twin\nHardware Revision: N/A\nUptime: {time.strftime('%H:%M:%S')} up "
        f"{up_s // 60} min,  1 user,  load average: 0.00, 0.00, 0.00\n"
    )


def vtysh_command(twin: Twin, dev: SonicDevice, args: list[str]) -> Output:
    """FRR's shell, `vtysh -c CMD [-c CMD ...]`: the BGP summaries (sonic_bgp.py); other commands as FRR refuses
    what it does not know."""
    commands = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-c"]
    if not commands:
        return "", "vtysh: the twin's FRR takes commands with -c only\n", 1
    if any(c.split()[:1] in (["configure"], ["conf"]) for c in commands):
        return _vtysh_configure(twin, dev, commands)
    if twin.daemons is not None:
        return twin.daemons.vtysh(dev.device, commands)  # the switch's own bgpd and zebra
    out = ""
    for c in commands:
        words = c.split()
        if words in (["show", "ip", "bgp", "summary"], ["show", "bgp", "summary"], ["show", "bgp", "ipv4", "summary"]):
            out += sonic_bgp.frr_summary(twin, dev.device)
        elif words in (["show", "bgp", "summary", "json"], ["show", "ip", "bgp", "summary", "json"]):
            out += sonic_bgp.frr_summary_json(twin, dev.device)
        elif words == ["show", "running-config"]:
            out += dev.frr_policy().running_config()
        else:
            return out, f"% Unknown command: {c}\n", 1
    return out, "", 0


def _vtysh_configure(twin: Twin, dev: SonicDevice, commands: list[str]) -> Output:
    """FRR configured through vtysh (a drain's route maps, lab/frr_policy.py). With the real daemons FRR itself takes
    the commands and the model follows only what FRR accepted; the traffic model de-prefers the neighbours whose
    outbound map says so."""
    policy = dev.frr_policy()
    if twin.daemons is not None:
        out, err, rc = twin.daemons.vtysh(dev.device, commands)
        if rc != 0:
            return out, err, rc
        policy.run(commands)
    else:
        out, err, rc = policy.run(commands)
        if rc != 0:
            return out, err, rc
    twin.set_depreferred(dev.device, policy.depreferred())
    return out, err, rc


def show_command(twin: Twin, dev: SonicDevice, args: list[str]) -> Output:
    words = [a for a in args if a != "--verbose"]
    if words[:2] in (["runningconfiguration", "all"], ["runningconfig", "all"]):
        # sonic-cfggen -d --print-data, plus FRR's config as "bgpraw" (show/main.py, single-ASIC).
        shown = {**dev.running, "bgpraw": f"frr version 10.0\nhostname {dev.hostname}\n"}
        return json.dumps(shown, indent=4, sort_keys=True) + "\n", "", 0
    if words[:2] in (["interfaces", "status"], ["interface", "status"]):
        return _interfaces_status(twin, dev), "", 0
    if words[:2] in (["interfaces", "description"], ["interface", "description"]) and len(words) <= 3:
        return _interfaces_description(twin, dev, words[2] if len(words) == 3 else None), "", 0
    if words == ["lldp", "table"]:
        return _lldp_table(twin, dev), "", 0
    if words in (["ip", "bgp", "summary"], ["ip", "bgp", "sum"]):
        if twin.daemons is not None:
            return sonic_bgp.show_summary_of(twin.daemons.frr.get(dev.device, {})), "", 0
        return sonic_bgp.show_summary(twin, dev.device), "", 0
    if words == ["version"]:
        return _version(twin, dev), "", 0
    return "", f'{_TOP_USAGE.format(tool="show")}\nError: No such command "{" ".join(words)}".\n', 2
