"""The part of FRR's configuration a drain changes on a SONiC switch, typed into `vtysh` as an operator would:
route maps that tag with RFC 8326's GRACEFUL_SHUTDOWN (65535:0) or prepend the AS path, and a neighbour's outbound
route map under `router bgp` / `address-family ipv4 unicast`. What the model's FRR does with them: the peers of a
neighbour whose outbound map de-prefers stop sending over that link (lab/model.py, `set_depreferred`).

FRR's own rules kept here: `configure terminal` first; `router bgp ASN` with another AS than the running one is
refused ("% BGP is already running; AS is N"); a neighbour FRR does not know is refused; anything else this twin
does not model is "% Unknown command" (with the real daemons, `vtysh` is FRR itself and this only mirrors what FRR
accepted). Not saved: like FRR's running config in SONiC's split mode, it is gone after a reboot."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

DEPREFER_COMMUNITIES = frozenset({"65535:0", "graceful-shutdown"})  # RFC 8326's well-known community, FRR's name


@dataclass
class FrrPolicy:
    asn: int
    neighbours: Collection[str]  # the peer addresses configured under router bgp
    maps: dict[str, bool] = field(default_factory=dict)  # route map (permit entries) -> de-prefers
    out: dict[str, str] = field(default_factory=dict)  # neighbour -> its outbound route map

    def depreferred(self) -> frozenset[str]:
        return frozenset(n for n, m in self.out.items() if self.maps.get(m, False))

    def running_config(self) -> str:
        """What `vtysh -c 'show running-config'` shows of it, in FRR's layout."""
        lines = [f"route-map {name} permit 10" for name in sorted(self.maps)]
        lines += [f"router bgp {self.asn}", " address-family ipv4 unicast"]
        lines += [f"  neighbor {n} route-map {m} out" for n, m in sorted(self.out.items())]
        return "\n".join(lines) + "\n"

    def run(self, commands: list[str]) -> tuple[str, str, int]:
        """One `vtysh -c ... -c ...`: each command in order, stopping at the first error, as vtysh does."""
        ctx: list[str] = []  # the modes entered: config, route-map NAME, bgp, af
        for c in commands:
            words = c.split()
            if not words:
                continue
            error = self._one(words, ctx)
            if error:
                return "", f"{error}\nline {c!r}\n", 1
        return "", "", 0

    def _one(self, w: list[str], ctx: list[str]) -> str:
        if w in (["configure", "terminal"], ["conf", "t"], ["configure"]):
            ctx[:] = ["config"]
            return ""
        if not ctx:
            return "% Unknown command: " + " ".join(w)
        if w == ["end"]:
            ctx.clear()
            return ""
        if w in (["exit"], ["exit-address-family"]):
            ctx.pop()
            return ""
        mode = ctx[-1]
        if mode == "config" and len(w) == 4 and w[0] == "route-map" and w[2] in ("permit", "deny") and w[3].isdigit():
            if w[2] == "permit":
                self.maps.setdefault(w[1], False)
            ctx.append(f"route-map {w[1]} {w[2]}")
            return ""
        if mode == "config" and w[:2] == ["no", "route-map"] and len(w) in (3, 5):
            self.maps.pop(w[2], None)  # FRR: `no route-map NAME [permit|deny N]` deletes it (our maps: one entry)
            return ""
        if mode == "config" and w[:2] == ["router", "bgp"] and len(w) == 3:
            if w[2] != str(self.asn):
                return f"% BGP is already running; AS is {self.asn}"
            ctx.append("bgp")
            return ""
        if mode.startswith("route-map ") and w[0] == "set":
            _, name, action = mode.split()
            tags = w[:3] == ["set", "as-path", "prepend"] or (
                w[:2] == ["set", "community"] and bool(DEPREFER_COMMUNITIES & set(w[2:]))
            )
            if action == "permit" and tags:
                self.maps[name] = True
            return ""
        if mode == "bgp" and w == ["address-family", "ipv4", "unicast"]:
            ctx.append("af")
            return ""
        no = w[0] == "no"
        body = w[1:] if no else w
        if mode in ("bgp", "af") and len(body) == 5 and body[0] == "neighbor" and body[2] == "route-map":
            if body[1] not in self.neighbours:
                return "% Specify remote-as or peer-group commands first"
            if body[4] == "out":
                if no:
                    self.out.pop(body[1], None)
                else:
                    self.out[body[1]] = body[3]
            return ""
        return "% Unknown command: " + " ".join(w)
