"""Detector accuracy bench, part 1: the seeded plan of episodes and scenarios (what is injected where and when),
and the parameters every part shares. See bench_detector_accuracy.py for the whole method."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topology.deadlock import deadlock_risk, resolve_failed
from topology.errors import InputError
from topology.fabric import Fabric
from topology.model import Link, Role

REPO = Path(__file__).resolve().parent.parent
KINDS = ("link_flap", "pfc_storm", "pfc_deadlock", "link_corruption", "silent_corruption", "bgp_session", "miscabled")
PRIO = 3
INTERVAL_S = 1.0  # gNMI sample interval, and `fabricd detect --tick`
LATE_S = 20.0  # a finding this long after its fault was cleared is no longer about it
FLAP_RULE = (5, 10.0)  # EOS errdisable default: 5 flaps in 10 s (reference/domain.md)
# Delay targets (issue #6), seconds after onset; silent corruption has none
# bgp_session: a session down this long with its link up (detectors/bgp_session.py, 3 s) + two intervals;
# miscabled: LLDP streams each second, settles 1 s, + two intervals
TARGETS = {"link_flap": INTERVAL_S + 1, "pfc_storm": INTERVAL_S + 1, "pfc_deadlock": 2 * INTERVAL_S,
           "bgp_session": 3.0 + 2 * INTERVAL_S, "miscabled": 1.0 + 2 * INTERVAL_S}  # fmt: skip
CORRUPTION_TARGET = (1e-6, 60.0)
# Primary scenario per rail, cycled: any prefix of 12 holds every fault kind and the main noise kinds
ORDER = (
    "pfc_storm", "pfc_deadlock", "silent_corruption", "link_flap", "link_corruption", "reboot",
    "gnmi_drop", "bgp_down", "miscable", "bgp_flap", "few_flaps", "microburst",
    "pfc_storm", "pfc_deadlock", "silent_corruption", "bgp_down", "miscable", "bgp_flap",
    "pfc_storm", "silent_corruption", "pfc_deadlock", "link_flap", "link_corruption", "reboot",
    "gnmi_drop", "link_down", "pfc_storm", "silent_corruption", "pfc_deadlock", "optics",
)  # fmt: skip
SECONDARY = (("link_flap", 0.35), ("link_corruption", 0.35), ("few_flaps", 0.1), ("optics", 0.1), ("none", 0.1))


# --- plan --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One fault injected `at_s` seconds into the recording (negative: before subscribing), cleared `clear_s` later."""

    at_s: float
    kind: str  # twin fault kind (lab/faults.py)
    params: dict[str, Any]
    clear_s: float | None = None


@dataclass
class Scenario:
    name: str  # e03.r1.pfc_storm
    kind: str  # a detector kind (fault) or a noise kind
    truth: bool  # a fault the detectors must find; noise must produce nothing
    rail: int | None
    where: str
    steps: list[Step]
    records: list[dict[str, Any]] = field(default_factory=list)  # the twin's fault records, after the run


@dataclass
class Episode:
    index: int
    duration_s: float
    scenarios: list[Scenario]


class Places:
    """Where faults can go, rail by rail."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.rails = sorted({d.rail for d in fabric.switches() if d.rail is not None})

    def leaves(self, rail: int) -> list[str]:
        return sorted(d.name for d in self.fabric.devices(Role.LEAF, rail=rail))

    def spines(self, rail: int) -> list[str]:
        return sorted(d.name for d in self.fabric.devices(Role.SPINE, rail=rail))

    def server_links(self, rail: int) -> list[Link]:
        return [ln for leaf in self.leaves(rail) for ln in self.fabric.links_of(leaf) if self.is_server(ln)]

    def fabric_links(self, rail: int) -> list[Link]:
        """Leaf-spine and spine-superspine cables of the rail."""
        return [ln for sp in self.spines(rail) for ln in self.fabric.links_of(sp)]

    def _server(self, device: str) -> bool:
        d = self.fabric.get(device)
        return d is not None and d.role is Role.SERVER

    def is_server(self, ln: Link) -> bool:
        return self._server(ln.a.device) or self._server(ln.b.device)

    def switch_end(self, ln: Link) -> str:
        return str(ln.b if self._server(ln.a.device) else ln.a)

    def nic(self, ln: Link) -> str:
        return str(ln.a if self._server(ln.a.device) else ln.b)


def _r(x: float, nd: int = 2) -> float:
    return round(x, nd)


class Planner:
    """Builds scenarios with a seeded RNG; every choice of place, time and size comes from it."""

    def __init__(self, fabric: Fabric, seed: int, duration_s: float) -> None:
        self.p = Places(fabric)
        self.rng = random.Random(seed)
        self.duration = duration_s

    def start(self) -> float:
        return _r(self.rng.uniform(5.0, 11.0), 1)

    # --- link-level scenarios ------------------------------------------------------------------------------------
    def flap(self, name: str, rail: int, ln: Link, few: bool = False) -> Scenario:
        rng = self.rng
        count = rng.randint(2, 4) if few else rng.randint(5, 7)
        period = _r(rng.uniform(0.5, 2.0) if few else rng.uniform(0.8, 1.8))
        end = str(rng.choice((ln.a, ln.b)))
        params = {"port": end, "count": count, "period_s": period, "down_s": _r(period * rng.uniform(0.3, 0.6))}
        truth = flap_rule_onset([i * period for i in range(count)]) is not None
        kind = "link_flap" if truth else "few_flaps"
        return Scenario(name, kind, truth, rail, f"{ln.a} <-> {ln.b}", [Step(self.start(), "link_flap", params)])

    def corruption(self, name: str, rail: int, ln: Link) -> Scenario:
        rng = self.rng
        rate = rng.choice((1e-6, 1e-6, 1e-5, 1e-4))
        params: dict[str, Any]
        if self.p.is_server(ln):  # the corrupted side must be a switch port to show in counters
            params = {"port": self.p.switch_end(ln), "direction": "rx"}
        else:
            params = {"port": str(rng.choice((ln.a, ln.b))), "direction": rng.choice(("rx", "tx", "both"))}
        params["rate"] = rate
        step = Step(self.start(), "link_corruption", params, clear_s=15.0)
        return Scenario(name, "link_corruption", True, rail, f"{ln.a} <-> {ln.b} at {rate:.0e}", [step])

    def optics(self, name: str, rail: int, ln: Link) -> Scenario:
        loss = _r(self.rng.uniform(2.0, 5.0), 1)  # FEC corrects; frames fail only past ~6 dB
        step = Step(self.start(), "optics", {"port": self.p.switch_end(ln), "loss_db": loss}, clear_s=15.0)
        return Scenario(name, "optics", False, rail, f"{self.p.switch_end(ln)} -{loss} dB", [step])

    def link_down(self, name: str, rail: int, ln: Link) -> Scenario:
        step = Step(self.start(), "link_down", {"port": str(ln.a)}, clear_s=_r(self.rng.uniform(6.0, 10.0), 1))
        return Scenario(name, "link_down", False, rail, f"{ln.a} <-> {ln.b} down, back up", [step])

    # --- the underlay and the cabling -------------------------------------------------------------------------------
    def bgp_down(self, name: str, rail: int, ln: Link) -> Scenario:
        """A leaf-spine session down with its link up, then back."""
        step = Step(self.start(), "bgp_down", {"port": str(self.rng.choice((ln.a, ln.b)))}, _r(self.rng.uniform(8, 12)))
        return Scenario(name, "bgp_session", True, rail, f"session {ln.a} <-> {ln.b} down", [step])

    def bgp_flap(self, name: str, rail: int, ln: Link) -> Scenario:
        """A session that drops 3 to 5 times, 1.5 to 3 s apart (the detector's rule: 3 drops in 120 s)."""
        rng = self.rng
        period = _r(rng.uniform(1.5, 3.0))
        params = {"port": str(rng.choice((ln.a, ln.b))), "count": rng.randint(3, 5), "period_s": period,
                  "down_s": _r(period * rng.uniform(0.2, 0.4))}  # fmt: skip
        return Scenario(name, "bgp_session", True, rail, f"session {ln.a} <-> {ln.b} flaps", [Step(self.start(),
                        "bgp_flap", params)])  # fmt: skip

    def miscable(self, name: str, rail: int, a: Link, b: Link) -> Scenario:
        """Two server cables of the rail swapped at their switch ends (the links stay up; LLDP shows it)."""
        ea, eb = self.p.switch_end(a), self.p.switch_end(b)
        step = Step(self.start(), "miscable", {"port": ea, "other": eb}, _r(self.rng.uniform(8, 12)))
        return Scenario(name, "miscabled", True, rail, f"cables on {ea} and {eb} swapped", [step])

    # --- PFC -----------------------------------------------------------------------------------------------------
    def storm(self, name: str, rail: int, nic: str) -> Scenario:
        step = Step(self.start(), "pfc_storm", {"nic": nic, "priority": PRIO}, _r(self.rng.uniform(8.0, 12.0), 1))
        return Scenario(name, "pfc_storm", True, rail, f"from {nic}", [step])

    def deadlock(self, name: str, rail: int) -> Scenario:
        (l0, l1), spines = self.p.leaves(rail), self.p.spines(rail)
        s0, s1 = self.rng.sample(spines, 2)
        cycle = [l0, s0, l1, s1]
        k = self.rng.randrange(4)
        cycle = cycle[k:] + cycle[:k]
        params = {"cycle": ",".join(cycle), "priority": PRIO}
        step = Step(self.start(), "pfc_deadlock", params, _r(self.rng.uniform(8.0, 12.0), 1))
        return Scenario(name, "pfc_deadlock", True, rail, " -> ".join(cycle), [step])

    def microbursts(self, name: str, rail: int, nic: str) -> Scenario:
        steps = [
            Step(_r(self.rng.uniform(3.0, self.duration - 6.0), 1), "microburst", {"nic": nic, "duration_ms": ms})
            for ms in (self.rng.randint(20, 200) for _ in range(3))
        ]
        return Scenario(name, "microburst", False, rail, f"3 bursts from {nic}", sorted(steps, key=lambda s: s.at_s))

    def failed_deadlock(self, name: str) -> Scenario:
        """Two rails each cut off from a different superspine: their traffic bounces through the other rails'
        spines, closing a cycle there (docs/lab.md); which rails and which superspine are random."""
        fabric = self.p.fabric
        ssps = sorted(d.name for d in fabric.devices(Role.SUPERSPINE))
        for _ in range(50):
            a, b = self.rng.sample(self.p.rails, 2)
            x, y = self.rng.sample(ssps, 2)
            failed = [f"{sp}--{x}" for sp in self.p.spines(a)] + [f"{sp}--{y}" for sp in self.p.spines(b)]
            if deadlock_risk(fabric, resolve_failed(fabric, failed)):
                step = Step(self.start(), "pfc_deadlock", {"failed": ",".join(failed), "priority": PRIO}, 10.0)
                return Scenario(name, "pfc_deadlock", True, None, f"failed {', '.join(failed)}", [step])
        raise InputError("plan", "no failure set of two rails closes a deadlock cycle in this fabric")

    # --- switch-level noise and silent corruption -----------------------------------------------------------------
    def silent(self, name: str, rail: int, switch: str) -> Scenario:
        rate = float(f"{10 ** self.rng.uniform(-3.0, -2.0):.1e}")
        step = Step(self.start(), "silent_corruption", {"device": switch, "rate": rate}, clear_s=15.0)
        return Scenario(name, "silent_corruption", True, rail, f"{switch} at {rate:.1e}", [step])

    def reboot(self, name: str, rail: int, switch: str) -> Scenario:
        down = self.rng.choice((0.0, 2.0, 3.0, 5.0))  # 0: counters cleared and streams dropped, ports stay up
        step = Step(self.start(), "reboot", {"device": switch, "down_s": down})
        return Scenario(name, "reboot", False, rail, f"{switch}, down {down:g} s", [step])

    def gnmi_drop(self, name: str, rail: int, switch: str) -> Scenario:
        secs = _r(self.rng.uniform(3.0, 6.0), 1)
        step = Step(self.start(), "gnmi_drop", {"device": switch, "seconds": secs})
        return Scenario(name, "gnmi_drop", False, rail, f"{switch}, {secs:g} s", [step])

    def wrap(self, name: str, rail: int | None, switch: str) -> Scenario:
        secs = _r(self.rng.uniform(4.0, self.duration - 8.0), 1)
        step = Step(-1.0, "counter_wrap", {"device": switch, "seconds": secs})
        return Scenario(name, "counter_wrap", False, rail, f"{switch} wraps {secs:g} s after it was set", [step])

    # --- episodes ------------------------------------------------------------------------------------------------
    def rail(self, ep: int, rail: int, primary: str) -> list[Scenario]:
        """The scenarios of one rail: a primary, a second one on a server link it does not touch, maybe a wrap."""
        rng, p = self.rng, self.p
        tag = f"e{ep:02d}.r{rail}"
        switches = p.leaves(rail) + p.spines(rail)
        servers = p.server_links(rail)
        rng.shuffle(servers)
        out: list[Scenario] = []
        free_servers = list(servers)
        if primary in ("pfc_storm", "microburst"):
            nic = p.nic(free_servers.pop())
            if primary == "pfc_storm":
                out.append(self.storm(f"{tag}.pfc_storm", rail, nic))
            else:
                out.append(self.microbursts(f"{tag}.microburst", rail, nic))
        elif primary == "pfc_deadlock":
            out.append(self.deadlock(f"{tag}.pfc_deadlock", rail))
        elif primary == "silent_corruption":
            out.append(self.silent(f"{tag}.silent_corruption", rail, rng.choice(switches)))
        elif primary in ("link_flap", "few_flaps", "link_corruption", "link_down"):
            ln = rng.choice(servers + p.fabric_links(rail))
            if ln in free_servers:
                free_servers.remove(ln)
            if primary == "link_corruption":
                out.append(self.corruption(f"{tag}.link_corruption", rail, ln))
            elif primary == "link_down":
                out.append(self.link_down(f"{tag}.link_down", rail, ln))
            else:
                out.append(self.flap(f"{tag}.{primary}", rail, ln, few=primary == "few_flaps"))
        elif primary in ("bgp_down", "bgp_flap"):
            uplinks = [ln for ln in p.fabric_links(rail) if any(e.device in p.leaves(rail) for e in (ln.a, ln.b))]
            pick = self.bgp_down if primary == "bgp_down" else self.bgp_flap
            out.append(pick(f"{tag}.{primary}", rail, rng.choice(uplinks)))
        elif primary == "miscable":
            # two leaves of the rail, one cable each: the servers end up on the other group's leaf
            by_leaf = {
                leaf: [ln for ln in free_servers if leaf in (ln.a.device, ln.b.device)] for leaf in p.leaves(rail)
            }
            la, lb = rng.sample([leaf for leaf, lns in by_leaf.items() if lns], 2)
            a, b = rng.choice(by_leaf[la]), rng.choice(by_leaf[lb])
            free_servers = [ln for ln in free_servers if ln not in (a, b)]
            out.append(self.miscable(f"{tag}.miscable", rail, a, b))
        elif primary == "optics":
            out.append(self.optics(f"{tag}.optics", rail, rng.choice(servers + p.fabric_links(rail))))
        elif primary == "reboot":
            out.append(self.reboot(f"{tag}.reboot", rail, rng.choice(switches)))
        elif primary == "gnmi_drop":
            out.append(self.gnmi_drop(f"{tag}.gnmi_drop", rail, rng.choice(switches)))
        elif primary != "none":
            raise ValueError(f"unknown primary {primary!r}")
        if primary in ("pfc_storm", "pfc_deadlock", "silent_corruption", "microburst", "none", "bgp_down",
                       "bgp_flap") and free_servers:  # fmt: skip
            second = rng.choices([k for k, _ in SECONDARY], [w for _, w in SECONDARY])[0]
            ln = free_servers.pop()
            if second in ("link_flap", "few_flaps"):
                out.append(self.flap(f"{tag}.s.{second}", rail, ln, few=second == "few_flaps"))
            elif second == "link_corruption":
                out.append(self.corruption(f"{tag}.s.link_corruption", rail, ln))
            elif second == "optics":
                out.append(self.optics(f"{tag}.s.optics", rail, ln))
        quiet_pfc = primary in ("silent_corruption", "link_flap", "link_corruption", "link_down", "optics")
        if quiet_pfc and free_servers and rng.random() < 0.4:
            out.append(self.microbursts(f"{tag}.microburst", rail, p.nic(free_servers.pop())))
        if primary not in ("reboot", "gnmi_drop") and rng.random() < 0.3:
            out.append(self.wrap(f"{tag}.wrap", rail, rng.choice(switches)))
        return out

    def plan(self, episodes: int, failed_every: int = 0) -> list[Episode]:
        """`episodes` recordings; with `failed_every` = k, every k-th one holds a deadlock from failed links."""
        specials = {i for i in range(episodes) if failed_every and i % failed_every == failed_every - 1}
        n_regular = (episodes - len(specials)) * len(self.p.rails)
        primaries = [ORDER[i % len(ORDER)] for i in range(n_regular)]
        self.rng.shuffle(primaries)
        out = []
        for e in range(episodes):
            scenarios: list[Scenario] = []
            if e in specials:
                scenarios.append(self.failed_deadlock(f"e{e:02d}.fabric.pfc_deadlock_failed"))
                for rail in self.p.rails:  # server links only: the failed links and the cycle are fabric links
                    scenarios += [s for s in self.rail(e, rail, "none") if s.kind != "counter_wrap"]
            else:
                for rail in self.p.rails:
                    scenarios += self.rail(e, rail, primaries.pop())
            ssps = [d.name for d in self.p.fabric.devices(Role.SUPERSPINE)]
            if ssps and self.rng.random() < 0.5:
                scenarios.append(self.wrap(f"e{e:02d}.ssp.wrap", None, self.rng.choice(ssps)))
            out.append(Episode(e, self.duration, scenarios))
        return out


def flap_rule_onset(downs: list[float]) -> float | None:
    """When a series of link-down times first holds 5 within 10 s (the EOS errdisable rule); None if never."""
    n, window = FLAP_RULE
    for i in range(n - 1, len(downs)):
        if downs[i] - downs[i - n + 1] <= window:
            return downs[i]
    return None
