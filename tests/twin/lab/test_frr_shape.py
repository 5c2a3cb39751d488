"""The twin's SONiC BGP text judged by the real daemon: FRR's bgpd (Debian's `frr`, what SONiC runs) in two network
namespaces joined by a veth pair, with the underlay's addresses and ASNs of one leaf uplink, up and then down; its
`show ip bgp summary` and the twin's, for the same session in the same state, have the same lines in the same shape
(every line equal once numbers, addresses and times are masked) and the same neighbour rows field by field where
FRR's values are the twin's (address, AS, state or prefix count). Needs root and /usr/lib/frr/bgpd (CI installs
frr); skipped elsewhere, with the reason."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.faults import FaultInjector
from lab.model import Twin
from lab.sonic_config import SonicStore
from lab.sonic_shell import SonicHost, SonicShell
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import load_spec
from topology.underlay import Underlay

BGPD = Path("/usr/lib/frr/bgpd")
REQUIRED = os.environ.get("FABRICD_REQUIRE_FRR") == "1"  # CI: FRR is installed, a skip would hide a failure
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not REQUIRED and (not BGPD.exists() or shutil.which("vtysh") is None),
        reason="FRR is not installed (apt-get install frr)",
    ),
    pytest.mark.skipif(not REQUIRED and os.geteuid() != 0, reason="network namespaces need root"),
]
SPEC = load_spec(EXAMPLES / "small-sonic.yaml")
FABRIC = Fabric(generate_blueprint(SPEC))
UNDERLAY = Underlay(FABRIC)
LEAF = "leaf-g0-r0"
S = UNDERLAY.sessions(LEAF)[0]  # the leaf's end of its first uplink


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


class Frr:
    """Two bgpd, one per namespace: the leaf's end and the spine's end of session S."""

    def __init__(self, tmp: Path) -> None:
        tag = uuid.uuid4().hex[:6]
        self.ns = {"leaf": f"fdl{tag}", "spine": f"fds{tag}"}
        self.dirs = {k: tmp / k for k in self.ns}
        self.procs: list[Path] = []
        veth = {"leaf": f"fdvl{tag}", "spine": f"fdvs{tag}"}
        ip("link", "add", veth["leaf"], "type", "veth", "peer", "name", veth["spine"])
        ends = {"leaf": (S.local_address, S.local_asn, S.peer_address, S.peer_asn, LEAF, S.peer.device),
                "spine": (S.peer_address, S.peer_asn, S.local_address, S.local_asn, S.peer.device, LEAF)}  # fmt: skip
        for side, ns in self.ns.items():
            ip("netns", "add", ns)
            ip("link", "set", veth[side], "netns", ns)
            ip("-n", ns, "addr", "add", f"{ends[side][0]}/31", "dev", veth[side])
            ip("-n", ns, "link", "set", veth[side], "up")
            ip("-n", ns, "link", "set", "lo", "up")
            _here, asn, peer, peer_asn, name, peer_name = ends[side]
            sp = UNDERLAY.speakers[name]
            d = self.dirs[side]
            d.mkdir(parents=True)
            d.chmod(0o777)
            nets = "\n".join(f"  network {p}" for p in sp.originated)
            (d / "bgpd.conf").write_text(
                f"hostname {name}\nrouter bgp {asn}\n bgp router-id {sp.router_id}\n no bgp ebgp-requires-policy\n"
                f" timers bgp 3 9\n neighbor {peer} remote-as {peer_asn}\n neighbor {peer} description {peer_name}\n"
                f" address-family ipv4 unicast\n{nets}\n exit-address-family\n"
            )
            subprocess.run(["ip", "netns", "exec", ns, str(BGPD), "-d", "-Z", "-n", "-S", "-f", str(d / "bgpd.conf"),
                            "-i", str(d / "bgpd.pid"), "--vty_socket", str(d), "-u", "root", "-g", "root"],
                           check=True, capture_output=True, timeout=20)  # fmt: skip
            self.procs.append(d / "bgpd.pid")

    def vtysh(self, side: str, *commands: str) -> str:
        args = ["vtysh", "--vty_socket", str(self.dirs[side])]
        for c in commands:
            args += ["-c", c]
        return subprocess.run(args, check=True, capture_output=True, text=True, timeout=20).stdout

    def wait(self, side: str, pattern: str, timeout_s: float = 30.0) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            out = self.vtysh(side, "show ip bgp summary")
            if re.search(pattern, out, re.MULTILINE):
                return out
            if time.monotonic() > deadline:
                raise AssertionError(f"FRR never showed {pattern!r}:\n{out}")
            time.sleep(0.3)

    def close(self) -> None:
        for pid in self.procs:
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid.read_text().strip()), 15)
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


@pytest.fixture
def frr(tmp_path: Path) -> Iterator[Frr]:
    f = Frr(tmp_path)
    try:
        yield f
    finally:
        f.close()


def twin_shell() -> tuple[Twin, SonicShell, FaultInjector]:
    twin = Twin(FABRIC)
    return twin, SonicShell(SonicHost(twin, SonicStore(twin).device(LEAF))), FaultInjector(twin)


def shape(text: str) -> list[str]:
    """Lines with numbers, addresses, times and names masked: what stays is FRR's layout and words. Only session S's
    row is kept (the twin's leaf has more uplinks than the two daemons)."""
    out = []
    for line in text.splitlines():
        if re.match(r"\d+\.\d+\.\d+\.\d+ ", line) and not line.startswith(S.peer_address + " "):
            continue
        line = re.sub(r"\d+\.\d+\.\d+\.\d+", "A", line)
        line = re.sub(r"\d\d:\d\d:\d\d|\d+d\d\dh|\d+w\dd\d\dh", "T", line)
        line = re.sub(r"\b\d+\b", "N", line)
        line = re.sub(r"(leaf|spine|ssp)-[\w-]+", "NAME", line)
        out.append(re.sub(r"\s+", " ", line).strip())
    return out


def fields(text: str, address: str) -> tuple[str, str, str]:
    """(neighbour, AS, State/PfxRcd) of a summary row."""
    (line,) = [ln for ln in text.splitlines() if ln.startswith(address + " ")]
    parts = line.split()
    state = " ".join(parts[9:11]) if parts[10:11] == ["(Admin)"] else parts[9]
    return parts[0], parts[2], state


def test_frr_and_the_twin_print_one_shape_up_and_down(frr: Frr) -> None:
    _twin, shell, faults = twin_shell()
    real = frr.wait("leaf", rf"^{re.escape(S.peer_address)}\s.*\s[1-9]\d*\s+\d+\s+\S+\s*$")
    ours, status, _ = shell.execute("vtysh -c 'show ip bgp summary'")
    assert status == 0
    assert shape(ours) == shape(real), f"twin:\n{ours}\nFRR:\n{real}"
    address, asn, received = fields(real, S.peer_address)
    assert fields(ours, S.peer_address)[:2] == (address, asn) and fields(ours, S.peer_address)[2].isdigit()
    assert received.isdigit()

    # down with the link up: FRR's spine end shuts the session; the leaf end shows Active, as bgp_down does
    frr.vtysh("spine", "configure terminal", f"router bgp {S.peer_asn}", f"neighbor {S.local_address} shutdown")
    real = frr.wait("leaf", rf"^{re.escape(S.peer_address)}\s.*Active")
    faults.inject("bgp_down", {"port": str(S.local)})
    ours, _, _ = shell.execute("vtysh -c 'show ip bgp summary'")
    assert shape(ours) == shape(real), f"twin:\n{ours}\nFRR:\n{real}"
    assert fields(ours, S.peer_address) == fields(real, S.peer_address) == (S.peer_address, str(S.peer_asn), "Active")
    shut = frr.wait("spine", r"Idle \(Admin\)")
    assert fields(shut, S.local_address)[2] == "Idle (Admin)"

    # `show bgp summary json` (what bgpmon reads into STATE_DB): the same keys, the same state word
    real_json = json.loads(frr.vtysh("leaf", "show bgp summary json"))["ipv4Unicast"]
    ours_json = json.loads(shell.execute("vtysh -c 'show bgp summary json'")[0])["ipv4Unicast"]
    assert ours_json.keys() == real_json.keys()
    real_peer, our_peer = real_json["peers"][S.peer_address], ours_json["peers"][S.peer_address]
    assert our_peer.keys() == real_peer.keys()
    assert {k: our_peer[k] for k in ("remoteAs", "localAs", "state", "peerState", "pfxRcd", "desc")} == {
        k: real_peer[k] for k in ("remoteAs", "localAs", "state", "peerState", "pfxRcd", "desc")
    }
    spine = json.loads(frr.vtysh("spine", "show bgp summary json"))["ipv4Unicast"]["peers"][S.local_address]
    assert (spine["state"], spine["peerState"]) == ("Idle (Admin)", "Admin")

    # sonic-utilities' `show ip bgp summary`: FRR's header lines, its own columns
    table, _, _ = shell.execute("show ip bgp summary")
    assert shape(table)[1:6] == [x.replace(" (VRF default)", "") for x in shape(real)[1:6]]
    header = next(ln for ln in table.splitlines() if ln.startswith("Neighbor")).split()
    assert header == ["Neighbor", "V", "AS", "MsgRcvd", "MsgSent", "TblVer", "InQ", "OutQ", "Up/Down",
                      "State/PfxRcd", "NeighborName"]  # fmt: skip
    assert fields(table, S.peer_address) == (S.peer_address, str(S.peer_asn), "Active")
