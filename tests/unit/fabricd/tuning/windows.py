"""Compact counter histories for the tuning tests: columns of cumulative values (or gauges) per sample."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from fabricd.tuning.inputs import (
    DrCnp,
    GroupSample,
    GroupWindow,
    NicCounters,
    Physics,
    PortClass,
    PortSettings,
    PortWindow,
    Sample,
)

LINE = 50_000_000_000  # bytes per second at 400G
KMIN, KMAX, XOFF = 600_000, 6_000_000, 12_000_000  # 12-120 us at 400G (the policy's default ECN), an XOFF above
NIC_FIELDS = {f"nic_{n}" for n in NicCounters.__dataclass_fields__}


def cum(steps: Sequence[float | None], start: float = 0) -> list[int | None]:
    """Cumulative values from per-interval increments (a None step: that sample lacks the counter)."""
    out: list[int | None] = [int(start)]
    total = start
    for s in steps:
        if s is None:
            out.append(None)
            continue
        total += s
        out.append(int(total))
    return out


def lin(n: int, per_interval: float) -> list[int | None]:
    return cum([per_interval] * n)


def hist(dt: float = 1.0, **cols: Sequence[int | None]) -> tuple[Sample, ...]:
    """Samples at 0, dt, 2dt, ...; keyword = a Sample field (or nic_<NicCounters field>) -> one value per sample."""
    n = max(len(v) for v in cols.values())
    out = []
    for i in range(n):
        plain: dict[str, Any] = {k: v[i] for k, v in cols.items() if k not in NIC_FIELDS and i < len(v)}
        nic = {k[4:]: v[i] for k, v in cols.items() if k in NIC_FIELDS and i < len(v)}
        out.append(Sample(t_s=i * dt, nic=NicCounters(**nic) if nic else None, **plain))
    return tuple(out)


def port(
    samples: tuple[Sample, ...] = (),
    cls: PortClass = PortClass.SERVER,
    kmin: int = KMIN,
    kmax: int = KMAX,
    pmax: int = 5,
    pfc: bool = True,
    xoff: int = XOFF,
    headroom: int = 100_000,
    speed: int = 400,
    length: float = 3.0,
    dr: DrCnp | None = None,
    buffer: int | None = None,
) -> PortWindow:
    return PortWindow(
        "leaf-1",
        "Ethernet1/1",
        cls,
        samples,
        PortSettings(kmin, kmax, pmax, pfc, xoff, headroom, dr),
        Physics(speed, length, buffer),
    )


def dci(samples: tuple[Sample, ...] = (), **kw: Any) -> PortWindow:
    """A DR's 120 km, 400G long-haul port, lossy (PFC off: its 60.7 MB headroom does not fit), end-to-end CNP."""
    kw.setdefault("pfc", False)
    kw.setdefault("kmin", 12_000_000)  # 0.2 x BDP (the policy's DCI default)
    kw.setdefault("kmax", 60_000_000)  # 1 x BDP
    kw.setdefault("length", 120_000.0)
    return port(samples, cls=PortClass.DCI, **kw)


def group(
    *,
    members: dict[str, Sequence[int | None]] | None = None,
    oos: Sequence[int | None] | None = None,
    drops: Sequence[int | None] | None = None,
    moves: Sequence[int | None] | None = None,
    mode: Literal["off", "flowlet", "per-packet"] = "flowlet",
    flowlet_us: int = 256,
    paths: tuple[float, ...] = (100.0, 100.0),
    n: int = 5,
) -> GroupWindow:
    members = members or {}
    samples = []
    for i in range(n):
        samples.append(
            GroupSample(
                t_s=float(i),
                member_tx_bytes={m: x for m, v in members.items() if (x := v[i]) is not None},
                reassignments=moves[i] if moves else None,
                drops=drops[i] if drops else None,
                out_of_sequence=oos[i] if oos else None,
            )
        )
    names = tuple(members) or ("Ethernet5/1", "Ethernet6/1")
    return GroupWindow("leaf-1", "uplinks", PortClass.LEAF_SPINE, names, tuple(samples), mode, flowlet_us, paths, 400)
