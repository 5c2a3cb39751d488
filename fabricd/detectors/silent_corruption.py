"""silent_corruption: the switch (or link) that corrupts packets while no port counter shows it, from probes.

A switch chip that corrupts a packet and recomputes its FCS leaves every counter clean; only end-to-end checks see
it, and the culprit is where the corrupted probes' paths meet (path tomography: NetBouncer, 007, Pingmesh-style
voting; reference/domain.md). Each probe crosses elements: its switches, and the links between them (the NIC access
links included). Greedy, one culprit at a time, over the probes not yet explained:

- for every element e on a corrupted probe, the hypothesis "only e corrupts, at r_e = corrupted / sent over the
  probes through e; elsewhere packets corrupt at the background rate eps" gains N_e * KL(r_e || eps) in binomial
  log-likelihood over "nothing corrupts" (N_e packets through e). The gain grows with the corrupted packets e
  explains and with how pure its rate is: an element whose other paths are clean (a leaf that also reaches clean
  spines) is diluted and explained away by the element those corrupted paths share;
- the best element is a culprit; every probe through it is explained and removed; repeat while corrupted probes
  remain. Its confidence is its posterior among the candidates and "no fault" (tempered, see the config). A switch
  is a priori twice as likely as a link (silent corruption is a chip fault; link corruption shows in counters),
  which also settles the tie of a spine and its links in a rail of two leaves, where they carry the same probes.

An element whose errors port counters show is link corruption, not silent: with a telemetry trace, a link is
dropped if an error counter (FCS, CRC, in-errors, FEC uncorrected) moved at either end during the probes, and a
switch if every corrupted probe through it also crossed such a link of its own. Dropped elements still explain
their probes. Without a trace, counters are not checked (the evidence says so).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise

import numpy as np

from fabricd.telemetry import Snapshot
from topology.fabric import Fabric
from topology.units import NS

from .finding import Finding
from .link_corruption import ERROR_LEAVES
from .probes import Probe

Port = tuple[str, str]


@dataclass(frozen=True)
class SilentCorruptionConfig:
    background_rate: float = 1e-7  # eps: what clean paths may still corrupt (NIC, host memory)
    # Less than this is too little to name anyone: a single flipped packet, one unlucky probe.
    min_corrupted_packets: int = 3
    min_corrupted_probes: int = 2
    link_prior: float = 0.5  # relative to a switch
    max_culprits: int = 8
    # The binomial model is ideal: never claim certainty, and few corrupted probes meet in few places (a handful can
    # share a link by chance), so the posterior is also scaled by n / (n + 1) for n corrupted probes.
    max_confidence: float = 0.99
    counter_margin_s: float = 60.0  # counters moving this close to the probes' time count (10 s EOS samples)


@dataclass(frozen=True, order=True)
class Element:
    kind: str  # "switch" | "link"
    ends: tuple[str, ...]  # switch: (name,); link: its two ends, "device:port" where the cabling says, else "device"

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(sorted({e.split(":", 1)[0] for e in self.ends}))

    @property
    def label(self) -> str:
        return self.ends[0] if self.kind == "switch" else " <-> ".join(self.ends)


@dataclass
class CounterErrors:
    """What `watch_counters` saw over a trace: port -> (first, last) time an error counter moved."""

    moved: dict[Port, tuple[int, int]] = field(default_factory=dict)


def watch_counters(snapshot: Snapshot, fabric: Fabric, state: CounterErrors, now_ns: int) -> list[Finding]:
    """A detector that reports nothing: it records which ports' error counters moved, for `localize`."""
    for leaf in ERROR_LEAVES:
        rows = snapshot.select(leaf=leaf)
        if not len(rows):
            continue
        for i in rows[np.nan_to_num(snapshot.delta(rows), nan=0.0) > 0].tolist():
            device, port, _, _ = snapshot.key(i)
            start, end = int(snapshot.prev_ts[i]), int(snapshot.ts[i])
            old = state.moved.get((device, port))
            state.moved[(device, port)] = (start, end) if old is None else (min(old[0], start), max(old[1], end))
    return []


class _Elements:
    """Elements of a probe's path, with the cabling's ports where it names exactly one link."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.pairs: dict[tuple[str, str], Element] = {}

    def between(self, u: str, v: str) -> Element:
        key = (u, v) if u <= v else (v, u)
        found = self.pairs.get(key)
        if found is None:
            links = [ln for ln in self.fabric.links_of(u) if ln.other(u).device == v and u != v]
            # parallel cables (or none known): probes cannot tell them apart, so the device pair is the element
            ends = tuple(sorted((str(links[0].a), str(links[0].b)))) if len(links) == 1 else key
            found = self.pairs[key] = Element("link", ends)
        return found

    def access(self, nic: str, leaf: str) -> Element:
        device, _, port = nic.partition(":")
        link = self.fabric.link_of(device, port)
        if link is not None and link.other(device, port).device == leaf:
            return Element("link", tuple(sorted((str(link.a), str(link.b)))))
        return Element("link", tuple(sorted((nic, leaf))))

    def of(self, p: Probe) -> frozenset[Element]:
        if not p.hops:
            return frozenset()
        out = {Element("switch", (h,)) for h in p.hops}
        out |= {self.between(u, v) for u, v in pairwise(p.hops)}
        out |= {self.access(p.src, p.hops[0]), self.access(p.dst, p.hops[-1])}
        return frozenset(out)


@dataclass
class _Stats:
    sent: int = 0
    corrupted: int = 0
    probes: int = 0
    corrupted_probes: int = 0

    @property
    def rate(self) -> float:
        return self.corrupted / self.sent if self.sent else 0.0


def _gain(s: _Stats, eps: float) -> float:
    """Log-likelihood gain of "this element corrupts at its observed rate" over the background: N * KL(r || eps)."""
    r = s.rate
    g = s.corrupted * math.log(r / eps) if s.corrupted else 0.0
    if s.sent > s.corrupted:
        g += (s.sent - s.corrupted) * math.log((1.0 - r) / (1.0 - eps))
    return g


def localize(
    probes: Sequence[Probe],
    fabric: Fabric,
    *,
    counter_errors: CounterErrors | Mapping[Port, tuple[int, int]] | None = None,
    config: SilentCorruptionConfig | None = None,
) -> list[Finding]:
    """Silent corruption culprits of a set of probe results (with counters from a trace when one was recorded)."""
    cfg = config or SilentCorruptionConfig()
    moved = counter_errors.moved if isinstance(counter_errors, CounterErrors) else counter_errors
    if not probes:
        return []
    paths = _Elements(fabric)
    elems = [paths.of(p) for p in probes]
    now = max(p.ts for p in probes)
    remaining = set(range(len(probes)))
    out: list[Finding] = []
    for _ in range(cfg.max_culprits):
        bad = [i for i in remaining if probes[i].corrupted > 0]
        total_bad = sum(probes[i].corrupted for i in bad)
        if total_bad < cfg.min_corrupted_packets or len(bad) < cfg.min_corrupted_probes:
            break
        candidates = {e for i in bad for e in elems[i]}
        stats = {e: _Stats() for e in candidates}
        for i in remaining:
            p = probes[i]
            for e in elems[i] & candidates:
                s = stats[e]
                s.sent, s.corrupted, s.probes = s.sent + p.sent, s.corrupted + p.corrupted, s.probes + 1
                s.corrupted_probes += p.corrupted > 0
        prior = {e: 0.0 if e.kind == "switch" else math.log(cfg.link_prior) for e in candidates}
        score = {e: _gain(stats[e], cfg.background_rate) + prior[e] for e in candidates}
        ranked = sorted(candidates, key=lambda e: (-score[e], e))
        best = ranked[0]
        bs = stats[best]
        if bs.corrupted < cfg.min_corrupted_packets or bs.corrupted_probes < cfg.min_corrupted_probes:
            break
        top = max(score[best], 0.0)
        norm = math.exp(-top) + sum(math.exp(score[e] - top) for e in candidates)  # "no fault" scores 0
        posterior = {e: math.exp(score[e] - top) / norm for e in ranked[:4]}
        explained = {i for i in remaining if best in elems[i]}
        visible = None if moved is None else _counter_visible(best, explained, probes, elems, moved, paths, cfg)
        if not visible:
            found = _finding(best, bs, total_bad, explained, probes, posterior, ranked, stats, visible, cfg, now)
            out.append(_at_switch_end(found, fabric))
        remaining -= explained
    return out


def _moved_during(moved: Mapping[Port, tuple[int, int]], port: Port, lo: int, hi: int) -> bool:
    span = moved.get(port)
    return span is not None and span[0] <= hi and span[1] >= lo


def _link_ports(e: Element, fabric: Fabric) -> list[Port]:
    if all(":" in end for end in e.ends):
        return [(end.split(":", 1)[0], end.split(":", 1)[1]) for end in e.ends]
    u, v = e.ends[0], e.ends[-1]
    return [(ep.device, ep.port) for ln in fabric.links_of(u) if ln.other(u).device == v for ep in (ln.a, ln.b)]


def _counter_visible(
    e: Element,
    explained: set[int],
    probes: Sequence[Probe],
    elems: list[frozenset[Element]],
    moved: Mapping[Port, tuple[int, int]],
    paths: _Elements,
    cfg: SilentCorruptionConfig,
) -> bool:
    margin = int(cfg.counter_margin_s * NS)
    lo = min(probes[i].ts for i in explained) - margin
    hi = max(probes[i].ts for i in explained) + margin

    def link_visible(link: Element) -> bool:
        return any(_moved_during(moved, port, lo, hi) for port in _link_ports(link, paths.fabric))

    if e.kind == "link":
        return link_visible(e)
    name = e.ends[0]
    bad = [i for i in explained if probes[i].corrupted > 0]
    return all(any(x.kind == "link" and name in x.devices and link_visible(x) for x in elems[i]) for i in bad)


def _at_switch_end(f: Finding, fabric: Fabric) -> Finding:
    """A link culprit starts at its switch end (the one fabricd can act on), the smaller name first."""
    if not f.ports:
        return f

    def on_switch(end: str) -> bool:
        dev = fabric.get(end.split(":", 1)[0])
        return dev is not None and dev.is_switch

    device, port = min(f.ports, key=lambda x: (not on_switch(x), x)).split(":", 1)
    return replace(f, device=device, port=port)


def _finding(
    e: Element,
    s: _Stats,
    total_bad: int,
    explained: set[int],
    probes: Sequence[Probe],
    posterior: dict[Element, float],
    ranked: list[Element],
    stats: dict[Element, _Stats],
    visible: bool | None,
    cfg: SilentCorruptionConfig,
    now: int,
) -> Finding:
    bad_ts = [probes[i].ts for i in explained if probes[i].corrupted > 0]
    all_ts = [probes[i].ts for i in explained]
    device, _, rest = e.ends[0].partition(":")
    port = rest or None
    ports = tuple(end for end in e.ends if ":" in end)
    counters = "not checked (no telemetry trace)" if visible is None else "clean"
    what = "switch" if e.kind == "switch" else "link"
    return Finding(
        kind="silent_corruption",
        device=device,
        port=port,
        devices=e.devices,
        ports=ports,
        start_ts=min(bad_ts),
        detected_ts=now,
        severity="critical",
        confidence=min(cfg.max_confidence, posterior[e]) * s.corrupted_probes / (s.corrupted_probes + 1),
        summary=f"silent corruption in {what} {e.label}: {s.corrupted} of {s.sent} probe packets through it "
        f"corrupted ({s.rate:.1e}) on {s.corrupted_probes} of {s.probes} probes, explaining "
        f"{s.corrupted / total_bad:.0%} of the corrupted packets; port counters {counters}",
        evidence={
            "element": e.kind,
            "culprit": e.label,
            "probes": s.probes,
            "corrupted_probes": s.corrupted_probes,
            "clean_probes": s.probes - s.corrupted_probes,
            "sent": s.sent,
            "corrupted": s.corrupted,
            "corruption_rate": float(f"{s.rate:.3g}"),
            "explained_share": round(s.corrupted / total_bad, 3),
            "posterior": round(posterior[e], 4),
            "alternatives": [
                {
                    "element": x.label,
                    "kind": x.kind,
                    "posterior": round(posterior[x], 4),
                    "corruption_rate": float(f"{stats[x].rate:.3g}"),
                }
                for x in ranked[1:4]
            ],
            "counters": counters,
            "window": [min(all_ts), max(all_ts)],
        },
    )
