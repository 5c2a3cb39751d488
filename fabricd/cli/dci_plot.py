"""The what-if sweep as a picture: PP and DP compute loss against distance or bandwidth (matplotlib, no display)."""

from __future__ import annotations

from pathlib import Path

from policies.dci_loss import DciPath, Workload
from topology.sourcefile import write_atomic_bytes


def plot_sweep(rows: list[dict[str, object]], sweep: str, work: Workload, path: DciPath, out: Path) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x_key = "distance_km" if sweep == "distance" else "dci_tbps"
    xs = [float(str(r[x_key])) for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for split, style in (("pp", "o-"), ("dp", "s--")):
        ys = [float(str(r[f"{split}_loss"])) * 100 for r in rows]
        ax.plot(xs, ys, style, label=f"{split.upper()} split")
    target = rows[0].get("target_loss")
    if isinstance(target, float):
        ax.axhline(target * 100, color="grey", linestyle=":", label=f"target {target * 100:g} %")
    ax.set_xscale("log")
    ax.set_xlabel("DCI distance (km)" if sweep == "distance" else "DCI bandwidth (Tb/s)")
    ax.set_ylabel("compute loss (%)")
    fixed = f"{path.dci_tbps:g} Tb/s" if sweep == "distance" else f"{path.distance_km:g} km"
    ax.set_title(f"{work.params:.3g} params on {work.gpus} GPUs across the DCI ({fixed})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=out.suffix.lower().lstrip("."))
    plt.close(fig)
    write_atomic_bytes(out, buf.getvalue())


def plot_ports(groups: list[dict[str, object]], out: Path) -> None:
    """One panel per group of DR ports: each port's share of the group's mean load; dropping ports in red."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(groups), 1, figsize=(8, 2.6 * len(groups)), dpi=120, squeeze=False)
    for ax, g in zip(axes[:, 0], groups, strict=True):
        ports = g["ports"]
        assert isinstance(ports, list)
        names = [str(x["port"]) for x in ports]
        shares = [float(x["share"]) for x in ports]
        colours = ["tab:red" if x["drops"] else ("tab:grey" if not x["up"] else "tab:blue") for x in ports]
        ax.bar(range(len(names)), shares, color=colours)
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("share of mean load")
        ax.set_title(
            f"{g['group']}: alpha_LB {g['alpha_lb']}, skew {float(str(g['skew'])) * 100:.0f} %, "
            f"drop rate {g['drop_rate']} (red: dropping)",
            fontsize=9,
        )
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=out.suffix.lower().lstrip("."))
    plt.close(fig)
    write_atomic_bytes(out, buf.getvalue())
