"""Real control-plane daemons under the twin (`fabricd lab up --daemons real`): SONiC's own routing and LLDP stack,
Debian's FRR (bgpd, zebra) and lldpd, one Linux network namespace per switch, a veth pair per cable.

- Every switch of the twin gets a namespace (`fd<tag>-<name>`, the tag from the state dir) whose interfaces are its
  ports under their SONiC names (`Ethernet16`), with the underlay's /31 on each fabric port and its router id on
  `lo` (`topology/underlay.py`); zebra and bgpd run the underlay's plan there, lldpd runs on every port. A SONiC
  switch's lldpd advertises each port by its alias, as lldpmgrd configures it; an EOS switch's namespace runs the
  same daemons only so that its SONiC neighbours have a peer, and advertises the EOS interface name (its own
  surfaces stay the model's). A server's end of a cable is a namespace of its own running lldpd as a host does.
- The twin's SONiC surfaces read them (`show lldp table`, `lldpctl -f json`, `vtysh`, `show ip bgp summary`, STATE_DB
  NEIGH_STATE_TABLE through bgpmon, APPL_DB LLDP_ENTRY_TABLE): `Daemons.poll` caches lldpd's and FRR's JSON once a
  second in a thread, so the twin's loop never waits on them.
- The model's faults act on them: `sync` (every twin tick) brings the daemons in line with the model: a port the
  model has down is set down (its veth: both daemons see the carrier go), a `miscable` re-pairs the veths, a BGP
  session held down (`bgp_down`, `bgp_flap`) or shut in a config is FRR's `neighbor X shutdown` at one end (the
  upper tier's: the lower end shows Active, as the model says), a reboot restarts the namespace's daemons.
- Everything is named from the state dir's tag, so a twin killed with -9 leaves nothing `cleanup` cannot find: the
  next `lab up` (and `lab down`) kills every process in those namespaces and deletes them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topology.errors import FabricdError
from topology.model import TIER, Endpoint, Role

from .control_plane import Lldp
from .model import Twin
from .sonic_config import lldp_port_id, sonic_port, system_description

log = logging.getLogger(__name__)
FRR = Path("/usr/lib/frr")
RUN = Path("/run/fabricd-lab")
POLL_S = 1.0  # how often lldpd's and FRR's tables are read for the twin's surfaces
# The lab's choices, not SONiC's defaults: lldpd's LLDPDUs every 5 s (802.1AB's default is 30 s) so that a lab that
# starts every daemon at once converges in seconds; FRR retries a failed connection after 1 s (its default is 120 s).
LLDP_TX_S = 5
CONNECT_RETRY_S = 1
UNPLUGGED_S = 1.0  # a moved cable is out this long (lldpd sees the port go down and forgets its neighbour)
Cmd = list[str]


class DaemonsError(FabricdError):
    """The real daemons cannot run here (not root, FRR or lldpd missing), or failed to start."""


def missing(euid: int | None = None, frr: Path = FRR, path: str | None = None) -> str | None:
    """Why the daemons cannot run on this machine (as user `euid`, FRR's daemons in `frr`, tools on `path`; this
    process's by default), in one line; None when they can."""
    if (os.geteuid() if euid is None else euid) != 0:
        return "--daemons real needs root (network namespaces and veth pairs): run `fabricd lab up` as root"
    gone = [str(frr / d) for d in ("bgpd", "zebra") if not (frr / d).exists()]
    gone += [t for t in ("vtysh", "lldpd", "lldpctl", "ip") if shutil.which(t, path=path) is None]
    if gone:
        return f"--daemons real needs FRR and lldpd: {', '.join(gone)} not found (apt-get install frr lldpd iproute2)"
    return None


def tag_of(state_dir: Path) -> str:
    """A short name for this state dir's namespaces and veths (an interface name holds 15 characters)."""
    return hashlib.sha1(str(state_dir.resolve()).encode()).hexdigest()[:5]


def _run(cmd: Cmd, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def _ip(*args: str) -> None:
    r = _run(["ip", *args])
    if r.returncode != 0:
        raise DaemonsError(f"ip {' '.join(args)}: {r.stderr.strip()}")


def run_dir(state_dir: Path) -> Path:
    """Where the daemons' configs, sockets, pid files and logs go: under /run (FRR runs as Debian's frr user, which
    must reach them; a test's temporary state dir is private to root)."""
    return RUN / tag_of(state_dir)


def cleanup(state_dir: Path) -> list[str]:
    """Kill every process in this state dir's namespaces and delete them (and veths left in the root namespace by
    a start that was cut short); what was removed. Safe to run when nothing is left."""
    tag = tag_of(state_dir)
    gone = []
    listed = _run(["ip", "netns", "list"]).stdout.split("\n")
    for ns in sorted({line.split()[0] for line in listed if line.startswith(f"fd{tag}-")}):
        pids = _run(["ip", "netns", "pids", ns]).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), 9)
        _run(["ip", "netns", "del", ns])
        gone.append(ns)
    for line in _run(["ip", "-o", "link", "show"]).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(f"f{tag}"):
            _run(["ip", "link", "del", name])
            gone.append(name)
    shutil.rmtree(run_dir(state_dir), ignore_errors=True)
    with contextlib.suppress(OSError):
        RUN.rmdir()  # the last lab's
    return gone


@dataclass(eq=False)
class Node:
    """One namespace: a switch or a server, its ports by their names in the namespace."""

    name: str
    ns: str
    kind: str  # "sonic", "eos" or "host"
    ifname: dict[str, str] = field(default_factory=dict)  # topology port -> interface name
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def port_of(self) -> dict[str, str]:
        return {v: k for k, v in self.ifname.items()}


class Daemons:
    """The namespaces, veths and daemons of one twin; `start`, `sync` each tick, `stop`."""

    def __init__(self, twin: Twin, state_dir: Path) -> None:
        self.twin = twin
        self.state_dir = state_dir
        self.tag = tag_of(state_dir)
        self.dir = run_dir(state_dir)
        self.underlay = twin.bgp.underlay
        self.nodes: dict[str, Node] = {}
        for name, sw in sorted(twin.switches.items()):
            node = Node(name, f"fd{self.tag}-{name}", sw.platform)
            node.ifname = {p: sonic_port(p) for p in sw.ports}
            self.nodes[name] = node
        for _, peer in sorted(twin.peers.items()):
            far = twin.fabric.get(peer.device)
            if far is not None and far.role is Role.SERVER:
                node = self.nodes.setdefault(peer.device, Node(peer.device, f"fd{self.tag}-{peer.device}", "host"))
                node.ifname[peer.port] = peer.port
        self.cables: dict[Endpoint, Endpoint] = {}  # each end -> the far end its veth reaches now
        self.veth: dict[frozenset[Endpoint], str] = {}  # cable -> the veth pair's root-namespace tag
        self._seq = 0
        self.oper: dict[Endpoint, bool] = {}  # what was last applied
        self.shut: set[tuple[str, str]] = set()  # (switch, neighbour address) FRR has shut
        self.boots: dict[str, int] = {name: sw.boot_ns for name, sw in twin.switches.items()}
        self.jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.frr: dict[str, dict[str, Any]] = {}  # switch -> FRR's `show bgp summary json` ipv4Unicast
        self.lldp: dict[str, dict[str, Lldp]] = {}  # node -> topology port -> its neighbour
        self.lldp_json: dict[str, str] = {}
        self.errors: list[str] = []
        self.recabling = False  # a re-pairing of veths is queued: the model's cabling is not the veths' yet
        self.settled = False  # converged once: the EOS stand-ins' tables are no longer read
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # --- life ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        why = missing()
        if why is not None:
            raise DaemonsError(why)
        cleanup(self.state_dir)  # what a dead twin of this state dir left
        self.dir.mkdir(parents=True, exist_ok=True)
        for d in (RUN, self.dir):
            d.chmod(0o755)
        for node in self.nodes.values():
            _ip("netns", "add", node.ns)
            _ip("-n", node.ns, "link", "set", "lo", "up")
        for (device, port), peer in sorted(self.twin.peers.items()):
            a = Endpoint(device, port)
            if peer.device in self.nodes and a not in self.cables:
                self._cable(a, peer)
        for name, node in self.nodes.items():
            if node.kind != "host":
                sp = self.underlay.speakers[name]
                _ip("-n", node.ns, "addr", "add", f"{sp.router_id}/32", "dev", "lo")
        for node in self.nodes.values():
            self._start_daemons(node)
        self._thread = threading.Thread(target=self._work, name="daemons", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.jobs.put(None)
        if self._thread is not None:
            self._thread.join(timeout=10)
        procs = [p for node in self.nodes.values() for p in node.procs]
        for p in procs:
            with contextlib.suppress(OSError):
                p.terminate()
        deadline = time.monotonic() + 3  # then cleanup kills what is left: `lab down` waits 15 s for the twin
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.01, deadline - time.monotonic()))
        cleanup(self.state_dir)

    def converged(self) -> tuple[bool, str]:
        """Every BGP session of the underlay Established and every cable's LLDP neighbour known at both switch
        ends (from the cached tables); else what is still missing."""
        want_bgp = sum(len(self.underlay.sessions(n)) for n in self.twin.switches)
        up = sum(1 for t in self.frr.values() for p in t.get("peers", {}).values() if p.get("state") == "Established")
        ends = [e for e in self.cables if e.device in self.twin.switches]
        known = sum(1 for e in ends if e.port in self.lldp.get(e.device, {}))
        ok = up == want_bgp and known == len(ends)
        self.settled = self.settled or ok
        return ok, f"{up}/{want_bgp} BGP sessions Established, {known}/{len(ends)} LLDP neighbours known"

    # --- building --------------------------------------------------------------------------------------------
    def _cable(self, a: Endpoint, b: Endpoint) -> None:
        """A veth pair between two ends, each named as its port in its namespace, with its /31 and up."""
        self._seq += 1
        tmp = f"f{self.tag}{self._seq}"
        na, nb = self.nodes[a.device], self.nodes[b.device]
        _ip("link", "add", f"{tmp}a", "netns", na.ns, "type", "veth", "peer", "name", f"{tmp}b", "netns", nb.ns)
        for end, node, side in ((a, na, "a"), (b, nb, "b")):
            _ip("-n", node.ns, "link", "set", f"{tmp}{side}", "name", node.ifname[end.port])
            s = self.underlay.session(end.device, end.port)
            if s is not None and node.kind != "host":
                _ip("-n", node.ns, "addr", "add", f"{s.local_address}/31", "dev", node.ifname[end.port])
            up = self._want_up(end)
            _ip("-n", node.ns, "link", "set", node.ifname[end.port], "up" if up else "down")
            self.oper[end] = up
        self.cables[a], self.cables[b] = b, a
        self.veth[frozenset((a, b))] = tmp

    def _want_up(self, end: Endpoint) -> bool:
        sw = self.twin.switches.get(end.device)
        return sw is None or bool(sw.oper_up[sw.index[end.port]])

    def _frr_conf(self, name: str) -> tuple[str, str]:
        sp = self.underlay.speakers[name]
        lines = [f"hostname {name}", f"router bgp {sp.asn}", f" bgp router-id {sp.router_id}",
                 " no bgp ebgp-requires-policy", " no bgp network import-check", " timers bgp 3 9"]  # fmt: skip
        for s in self.underlay.sessions(name):
            lines += [f" neighbor {s.peer_address} remote-as {s.peer_asn}",
                      f" neighbor {s.peer_address} description {s.peer.device}",
                      f" neighbor {s.peer_address} timers connect {CONNECT_RETRY_S}"]  # fmt: skip
        lines += [" address-family ipv4 unicast", *(f"  network {p}" for p in sp.originated), "  maximum-paths 64",
                  " exit-address-family", ""]  # fmt: skip
        return f"hostname {name}\n", "\n".join(lines)

    def _lldp_conf(self, node: Node) -> str:
        lines = [f"configure system hostname {node.name}", f"configure lldp tx-interval {LLDP_TX_S}"]
        if node.kind == "host":
            # a host that names its NICs in LLDP (lldpd's `portidsubtype ifname`; its default is the MAC)
            return "\n".join([*lines, "configure lldp portidsubtype ifname"]) + "\n"
        sw = self.twin.switch(node.name)
        descr = system_description(sw) if node.kind == "sonic" else f"Arista Networks EOS version {sw.os_version}"
        lines.append(f'configure system description "{descr}"')
        for port, ifname in node.ifname.items():
            pid = lldp_port_id(self.twin, Endpoint(node.name, port))
            # lldpmgrd: the alias as port id, the port's description only where one is set (else lldpd's: the
            # interface's name); an EOS switch sends its interface name as both
            tail = f" description {pid}" if node.kind == "eos" else ""
            lines.append(f"configure ports {ifname} lldp portidsubtype local {pid}{tail}")
        return "\n".join(lines) + "\n"

    def _start_daemons(self, node: Node) -> None:
        d = self.dir / node.name
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(0o777)
        log = (d / "daemons.log").open("ab")
        exec_ns = ["ip", "netns", "exec", node.ns]
        (d / "lldpd.conf").write_text(self._lldp_conf(node))
        pattern = "nic*" if node.kind == "host" else "Ethernet*"
        cmds: list[Cmd] = [[*exec_ns, "lldpd", "-d", "-u", str(d / "lldpd.socket"), "-O", str(d / "lldpd.conf"),
                            "-I", pattern]]  # fmt: skip
        if node.kind != "host":
            zebra, bgpd = self._frr_conf(node.name)
            (d / "zebra.conf").write_text(zebra)
            (d / "bgpd.conf").write_text(bgpd)
            # as Debian's frr user (in the frrvty group its vty sockets need); -P 0: no vty over TCP
            common = ["-z", str(d / "zserv.api"), "--vty_socket", str(d), "-u", "frr", "-g", "frr", "-P", "0"]
            cmds.insert(0, [*exec_ns, str(FRR / "zebra"), "-f", str(d / "zebra.conf"), "-i", str(d / "zebra.pid"),
                            *common])  # fmt: skip
            cmds.insert(1, [*exec_ns, str(FRR / "bgpd"), "-f", str(d / "bgpd.conf"), "-i", str(d / "bgpd.pid"),
                            *common])  # fmt: skip
        for i, cmd in enumerate(cmds):
            node.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                               start_new_session=True))  # fmt: skip
            if i == 0 and node.kind != "host":  # bgpd connects to zebra's socket once: zebra first
                deadline = time.monotonic() + 10
                while not (d / "zserv.api").exists() and node.procs[0].poll() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                if not (d / "zserv.api").exists():
                    lines = (d / "daemons.log").read_text(errors="replace").strip().splitlines()
                    raise DaemonsError(f"{node.name}: zebra did not start: {lines[-1] if lines else 'no output'}")

    def _restart(self, node: Node) -> None:
        """A reboot: the namespace's daemons stop and start again from their startup config."""
        for p in node.procs:
            with contextlib.suppress(OSError):
                p.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=5)
        node.procs.clear()
        for f in ("zserv.api", "bgpd.vty", "zebra.vty", "lldpd.socket"):
            (self.dir / node.name / f).unlink(missing_ok=True)
        self.shut = {(d, a) for d, a in self.shut if d != node.name}
        self._start_daemons(node)

    # --- following the model ---------------------------------------------------------------------------------
    def sync(self) -> None:
        """Bring the daemons in line with the model (called from the twin's loop: only queues the work)."""
        twin = self.twin
        for name, sw in twin.switches.items():
            if sw.boot_ns != self.boots[name]:
                self.boots[name] = sw.boot_ns
                self.jobs.put(functools.partial(self._restart, self.nodes[name]))
        moved = [e for e in list(self.cables) if e.device in twin.switches and self._far(e) != self.cables.get(e)]
        if moved and not self.recabling:
            self.recabling = True
            self.jobs.put(functools.partial(self._recable, moved))
        for end in list(self.cables):
            up = self._want_up(end)
            if self.oper.get(end) != up:
                self.oper[end] = up
                node = self.nodes[end.device]
                cmd = ["ip", "-n", node.ns, "link", "set", node.ifname[end.port], "up" if up else "down"]
                self.jobs.put(functools.partial(_try, cmd))
        want = self._want_shut()
        for device, address in want ^ self.shut:
            on = (device, address) in want
            self.jobs.put(functools.partial(self._neighbor_shutdown, device, address, on))
        self.shut = want

    def _far(self, end: Endpoint) -> Endpoint | None:
        """The far end the model says this switch port's cable reaches (a `miscable` swaps them)."""
        return self.twin.lldp_peer(end.device, end.port)

    def _want_shut(self) -> set[tuple[str, str]]:
        out = {(d, a) for d, addresses in self.twin.bgp.shut.items() for a in addresses}
        sws = self.twin.switches
        for st in self.twin.bgp.sessions.values():
            if (st.a.local.device, st.a.local.port) in self.twin.bgp.faulted:
                # the upper tier's end shuts: the lower one (a leaf, the SONiC switch) shows Active, as the model
                up = max((st.a, st.b), key=lambda s: s.local.device in sws and TIER[sws[s.local.device].role])
                out.add((up.local.device, up.peer_address))
        return out

    def _neighbor_shutdown(self, device: str, address: str, on: bool) -> None:
        asn = self.underlay.speakers[device].asn
        no = "" if on else "no "
        self.vtysh(device, ["configure terminal", f"router bgp {asn}", f"{no}neighbor {address} shutdown"])

    def _recable(self, moved: list[Endpoint]) -> None:
        try:
            self._move(moved)
        finally:
            self.recabling = False

    def _move(self, moved: list[Endpoint]) -> None:
        """Take the moved cables' veths away and pair their ends as the model says they are now cabled."""
        ends = set(moved) | {self.cables[e] for e in moved}
        for e in list(ends):
            far = self._far(e) if e.device in self.twin.switches else None
            if far is not None:
                ends.add(far)
        old = {frozenset((e, self.cables[e])) for e in ends if e in self.cables}
        for e in ends:  # the cables come out first: each lldpd forgets its neighbour there (802.1AB), then moved
            if e in self.cables:
                _try(["ip", "-n", self.nodes[e.device].ns, "link", "set", self.nodes[e.device].ifname[e.port], "down"])
        time.sleep(UNPLUGGED_S)
        for cable in old:
            a, b = tuple(cable)
            node = self.nodes[a.device]
            _try(["ip", "-n", node.ns, "link", "del", node.ifname[a.port]])
            self.cables.pop(a, None)
            self.cables.pop(b, None)
            self.veth.pop(cable, None)
        done: set[Endpoint] = set()
        for e in sorted(ends, key=str):
            far = self._far(e) if e.device in self.twin.switches else None
            if e in done or far is None or far in done or far.device not in self.nodes:
                continue
            try:
                self._cable(e, far)
            except DaemonsError as err:
                self.errors.append(str(err))
            done |= {e, far}
        for node in {self.nodes[e.device] for e in done}:
            if node.kind != "host":  # lldpd forgets a port's settings with its interface
                conf = [c for c in self._lldp_conf(node).splitlines() if " ports " in c]
                self._lldpcli(node, conf)

    # --- reading -----------------------------------------------------------------------------------------------
    def vtysh(self, device: str, commands: list[str]) -> tuple[str, str, int]:
        args = ["vtysh", "--vty_socket", str(self.dir / device)]
        for c in commands:
            args += ["-c", c]
        r = _run(args)
        return r.stdout, r.stderr, r.returncode

    def _lldpcli(self, node: Node, commands: list[str]) -> str:
        sock = str(self.dir / node.name / "lldpd.socket")
        out = ""
        for c in commands:
            out += _run(["lldpcli", "-u", sock, *c.split()]).stdout
        return out

    def lldpctl(self, device: str) -> str:
        """`lldpctl -f json` of a node, as lldpd prints it."""
        node = self.nodes[device]
        return _run(["lldpctl", "-u", str(self.dir / node.name / "lldpd.socket"), "-f", "json"]).stdout

    def frr_states(self, device: str) -> dict[str, str]:
        """What bgpmon reads: each neighbour's state word in FRR's `show bgp summary json` (the last poll's)."""
        return {a: str(p.get("state", "")) for a, p in self.frr.get(device, {}).get("peers", {}).items()}

    def poll(self) -> None:
        """Read every SONiC switch's FRR summary and every switch's LLDP neighbours into the caches."""
        for name, node in self.nodes.items():
            if node.kind == "host" or (node.kind == "eos" and self.settled):
                continue
            out, _, rc = self.vtysh(name, ["show bgp summary json"])
            with contextlib.suppress(ValueError):
                self.frr[name] = json.loads(out).get("ipv4Unicast", {}) if rc == 0 and out.strip() else {}
            text = self.lldpctl(name)
            self.lldp_json[name] = text
            with contextlib.suppress(ValueError):
                self.lldp[name] = parse_lldp(json.loads(text) if text.strip() else {}, node.port_of)

    def _work(self) -> None:
        next_poll = 0.0
        while not self._stop.is_set():
            try:
                job = self.jobs.get(timeout=max(0.0, next_poll - time.monotonic()))
            except queue.Empty:
                job = None
                if self._stop.is_set():
                    return
            if job is not None:
                try:
                    job()
                except Exception as e:  # one failed step must not stop the daemons following the model
                    log.exception("real daemons: a step failed")
                    self.errors.append(str(e))
                continue
            if time.monotonic() >= next_poll:
                try:
                    self.poll()
                except Exception as e:
                    log.exception("real daemons: reading their tables failed")
                    self.errors.append(str(e))
                next_poll = time.monotonic() + POLL_S


def parse_lldp(doc: Any, port_of: dict[str, str]) -> dict[str, Lldp]:
    """lldpd's `-f json` (an interface is one object, several are a list of one-key objects) by topology port."""
    interfaces = doc.get("lldp", {}).get("interface", []) if isinstance(doc, dict) else []
    items = interfaces if isinstance(interfaces, list) else [{k: v} for k, v in interfaces.items()]
    out = {}
    for item in items:
        for ifname, body in item.items():
            chassis = body.get("chassis", {})
            (system, c), *_ = chassis.items() if chassis else [("", {})]
            port = body.get("port", {})
            caps = tuple(x.get("type", "") for x in c.get("capability", []) if x.get("enabled"))
            out[port_of.get(ifname, ifname)] = Lldp(
                system, str(port.get("id", {}).get("value", "")), str(port.get("descr", "")), str(c.get("descr", "")),
                str(c.get("id", {}).get("value", "")), caps,
            )  # fmt: skip
    return out


def _try(cmd: Cmd) -> None:
    _run(cmd)
