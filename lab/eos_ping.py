"""`ping` and `traceroute` on a twin switch, over the routed underlay (lab/bgp.py): the path a probe takes is the
routes' (ECMP: the first next hop), its round trip the path's cables (5 ns per metre each way, so 1.2 ms across a
120 km DCI) plus each hop's switching and queueing both ways and the target's control plane answering; a probe is
lost where a link on the path corrupts or drops frames; an address no route leads to is unreachable. The text is
what EOS prints (Linux iputils `ping`, `traceroute`), which napalm's `ping`/`traceroute` and ANTA's
VerifyReachability parse.
"""

from __future__ import annotations

import ipaddress
import math
import zlib
from dataclasses import dataclass

from topology.model import Endpoint

from .counters import COL
from .eos_grammar import CliError
from .model import Twin

PROPAGATION_NS_PER_M = 5.0  # light in fibre: ~2e8 m/s (reference/domain.md: 5 us per km)
HOP_NS = 2_000  # one switch's forwarding latency, each way (cut-through ASICs are below 1 us; store-and-forward 2)
CONTROL_PLANE_NS = 80_000  # the target's CPU answering an ICMP echo
MAX_HOPS = 32


@dataclass(frozen=True)
class Hop:
    device: str
    address: str  # the address it answers from: the ingress interface's, or the target itself
    one_way_ns: float  # cumulative one-way latency to it
    survive: float  # probability a probe gets there and back


def owner(twin: Twin, address: str) -> str | None:
    """The switch (this campus or far) whose interface or loopback has `address`."""
    u = twin.bgp.underlay
    for sp in u.speakers.values():
        if sp.router_id == address:
            return sp.device
    for link in u.links:
        for ep in (link.a, link.b):
            s = u.session(ep.device, ep.port)
            if s is not None and s.local_address == address:
                return ep.device
    return None


def path(twin: Twin, source: str, address: str) -> list[Hop] | None:
    """The hops a probe from `source` to `address` crosses (the target last); None when no route leads there."""
    target = owner(twin, address)
    if target == source:
        return [Hop(source, address, 0.0, 1.0)]
    hops: list[Hop] = []
    here, one_way, survive = source, 0.0, 1.0
    dest = ipaddress.ip_address(address)
    for _ in range(MAX_HOPS):
        nxt = _next_hop(twin, here, dest)
        if nxt is None:
            return hops or None
        s_local, s_peer, peer_addr = nxt
        link = twin.fabric.link_of(s_local.device, s_local.port)
        length = float(link.length_m or 0.0) if link is not None else 0.0
        one_way += length * PROPAGATION_NS_PER_M + HOP_NS + _queue_ns(twin, s_local)
        survive *= _pass(twin, s_local) * _pass(twin, s_peer)
        here = s_peer.device
        if here == target:
            hops.append(Hop(here, address, one_way, survive))
            return hops
        hops.append(Hop(here, peer_addr, one_way, survive))
        if target is None and here not in twin.switches:
            return hops
    return hops


def _next_hop(twin: Twin, here: str, dest: ipaddress.IPv4Address | ipaddress.IPv6Address) -> (
    tuple[Endpoint, Endpoint, str] | None
):  # fmt: skip
    """The first ECMP next hop `here` forwards `dest` to: a connected /31, else the longest matching BGP route."""
    bgp = twin.bgp
    for s, st in bgp.sessions_of(here):
        if st.up and dest in ipaddress.ip_network(f"{s.local_address}/31", strict=False):
            return s.local, s.peer, s.peer_address
    best: tuple[int, list[Endpoint]] | None = None
    for prefix, hops in bgp.rib(here).items():
        net = ipaddress.ip_network(prefix)
        if hops and dest in net and (best is None or net.prefixlen > best[0]):
            best = (net.prefixlen, [h.local for h in hops])
    if best is None:
        return None
    local = best[1][0]
    got = bgp.view(local.device, local.port)
    if got is None:
        return None
    return got[0].local, got[0].peer, got[0].peer_address


def _queue_ns(twin: Twin, ep: Endpoint) -> float:
    """Mean egress queueing at this port's load (the twin's queue model: 64 KiB x rho / (1 - rho))."""
    sw = twin.switches.get(ep.device)
    if sw is None:
        return 0.0
    row = sw.index[ep.port]
    line = float(sw.speeds[row]) * 1e9 / 8 or 1.0
    rho = min(0.95, float(sw.rate[row, COL["if.out-octets"]]) / line)
    return 65536 * rho / (1 - rho) / line * 1e9


def _pass(twin: Twin, ep: Endpoint) -> float:
    sw = twin.switches.get(ep.device)
    if sw is None:
        return 1.0
    row = sw.index[ep.port]
    fer = twin._frame_error_rate(sw, row)
    drop = twin.egress_drops.get((ep.device, ep.port), 0.0)
    return (1.0 - fer) * (1.0 - drop)


def _jitter_ns(device: str, address: str, seq: int) -> float:
    return (zlib.crc32(f"{device}>{address}#{seq}".encode()) % 10_000) - 5_000.0  # +-5 us


def ping(twin: Twin, device: str, args: list[str]) -> str:
    """`ping [vrf V] DEST [source S] [interface I] [size N] [repeat N] [timeout N] [df-bit]`."""
    opts = _options(args, {"vrf", "source", "interface", "size", "repeat", "timeout"}, {"df-bit"})
    dest = opts.get("dest", "")
    size = int(opts.get("size", "100"))
    repeat = int(opts.get("repeat", "5"))
    try:
        ipaddress.ip_address(dest)
    except ValueError:
        return f"ping: {dest}: Name or service not known\n"
    if opts.get("vrf", "default") != "default":
        return f"% VRF {opts['vrf']} does not exist\n"
    hops = path(twin, device, dest)
    if hops is None:
        return "connect: Network is unreachable\n"
    last = hops[-1]
    answers = owner(twin, dest) == last.device
    out = [f"PING {dest} ({dest}) {size - 28}({size}) bytes of data."]
    rtts = []
    lost_every = _lost_every(last.survive if answers else 0.0, repeat)
    for seq in range(1, repeat + 1):
        if not answers or (lost_every and seq % lost_every == 0):
            continue
        rtt = (2 * last.one_way_ns + CONTROL_PLANE_NS + _jitter_ns(device, dest, seq)) / 1e6
        rtts.append(rtt)
        out.append(f"{size - 20} bytes from {dest}: icmp_seq={seq} ttl={64 - len(hops) + 1} time={rtt:.3f} ms")
    loss = round(100 * (repeat - len(rtts)) / repeat) if repeat else 0
    took = max(0, repeat - 1) * 10
    out += ["", f"--- {dest} ping statistics ---",
            f"{repeat} packets transmitted, {len(rtts)} received, {loss}% packet loss, time {took}ms"]  # fmt: skip
    if rtts:
        mean = sum(rtts) / len(rtts)
        mdev = math.sqrt(sum((r - mean) ** 2 for r in rtts) / len(rtts))
        out.append(f"rtt min/avg/max/mdev = {min(rtts):.3f}/{mean:.3f}/{max(rtts):.3f}/{mdev:.3f} ms, "
                   f"ipg/ewma 10.000/{mean:.3f} ms")  # fmt: skip
    return "\n".join(out) + "\n"


def _lost_every(survive: float, repeat: int) -> int:
    """Every k-th probe is lost, k from the path's loss probability (0: none is); deterministic, so a run shows the
    loss a path with that error rate shows on average."""
    loss = 1.0 - survive * survive
    if loss <= 0 or repeat <= 0:
        return 0
    if loss >= 1.0:
        return 1
    lost = round(loss * repeat)
    return 0 if lost == 0 else max(1, repeat // lost)


def traceroute(twin: Twin, device: str, args: list[str]) -> str:
    """`traceroute DEST [-s S] [-m TTL] [-w T]` (what napalm runs through bash)."""
    opts = _options(args, {"-s", "-m", "-w", "vrf", "source"}, set())
    dest = opts.get("dest", "")
    max_ttl = int(opts.get("-m", "30"))
    try:
        ipaddress.ip_address(dest)
    except ValueError:
        return f'{dest}: Name or service not known\nCannot handle "host" cmdline arg `{dest}\' on position 1 (argc 1)\n'
    head = f"traceroute to {dest} ({dest}), {max_ttl} hops max, 60 byte packets"
    hops = path(twin, device, dest)
    if hops is None:
        return head + "\nconnect: Network is unreachable\n"
    lines = [head]
    for i, h in enumerate(hops[:max_ttl], start=1):
        if h.survive <= 0:
            lines.append(f"{i:>2}  * * *")
            continue
        probes = "  ".join(f"{(2 * h.one_way_ns + CONTROL_PLANE_NS + _jitter_ns(device, h.address, k)) / 1e6:.3f} ms"
                           for k in range(3))  # fmt: skip
        lines.append(f"{i:>2}  {h.address} ({h.address})  {probes}")
    return "\n".join(lines) + "\n"


def _options(args: list[str], valued: set[str], flags: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a in valued and i + 1 < len(args):
            out[a] = args[i + 1]
            i += 2
        elif a in flags:
            out[a] = "1"
            i += 1
        elif "dest" not in out:
            out["dest"] = a
            i += 1
        else:
            raise CliError(f"% Invalid input (at token {i + 1}: '{a}')")
    for key in ("size", "repeat", "timeout", "-m", "-w"):
        if key in out and not out[key].isdigit():
            raise CliError(f"% Invalid input (at token 0: '{out[key]}')")
    return out
