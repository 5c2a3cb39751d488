"""The chaos report: a table per invariant and per fault kind (Markdown, also printed), every violation with its
time and the seed, and the run's timeline as a PNG (faults, process faults, operator and repair events, ports
fabricd held)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .detection import FindingScore, KindScore
from .facts import FabricFacts
from .history import Run
from .violation import INVARIANTS, Violation


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def markdown(
    run: Run, violations: list[Violation], scores: list[KindScore], precision: list[FindingScore], fabric: str
) -> str:
    n = Counter(v.invariant for v in violations)
    lines = [
        f"# chaos run: {fabric}, seed {run.seed}",
        "",
        f"{(run.schedule_end_s - run.start_s) / 60:.1f} min schedule, {len(run.samples)} samples, "
        f"{len(run.faults)} twin faults, {sum(e.what == 'process' for e in run.events)} process events, "
        f"{sum(e.what == 'operator' for e in run.events)} operator actions, "
        f"{sum(e.what == 'repair' for e in run.events)} repairs; {len(run.actions)} fabricd actions, "
        f"{len(run.findings)} findings",
        "",
        "| invariant | violations |",
        "|---|---|",
        *[f"| {i} | {n.get(i, 0)} |" for i in INVARIANTS],
        "",
        "| fault kind | injected | judged | found | recall |",
        "|---|---|---|---|---|",
        *[f"| {s.kind} | {s.injected} | {s.judged} | {s.found} | {_pct(s.recall)} |" for s in scores],
        "",
        "| finding kind | findings | explained by a fault | precision |",
        "|---|---|---|---|",
        *[f"| {p.kind} | {p.findings} | {p.explained} | {_pct(p.precision)} |" for p in precision],
        "",
    ]
    if violations:
        lines += ["## violations", ""] + [f"- {v.line(run.start_s, run.seed)}" for v in violations] + [""]
    return "\n".join(lines)


def timeline(run: Run, facts: FabricFacts, path: Path) -> None:
    """One row per place that anything happened to, time across; faults as bars, fabricd's holds as bars, events
    and violations as marks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = run.start_s
    rows: dict[str, int] = {}

    def row(name: str) -> int:
        return rows.setdefault(name, len(rows))

    fig, ax = plt.subplots(figsize=(14, 8))
    end = (run.samples[-1].t if run.samples else run.schedule_end_s) - t0
    colors = plt.get_cmap("tab20")
    kinds = sorted({f.kind for f in run.faults})
    for f in run.faults:
        y = row(f.ports[0] if f.ports else f.devices[0] if f.devices else f.kind)
        stop = (f.cleared_s or run.settled_s or run.schedule_end_s) - t0
        ax.barh(
            y,
            max(stop - (f.start_s - t0), 0.3),
            left=f.start_s - t0,
            height=0.6,
            color=colors(kinds.index(f.kind) % 20),
            label=f.kind,
        )
    held_since: dict[str, float] = {}
    for s in run.samples:
        for p, o in s.ports.items():
            shut = o.marked and not o.admin_up
            if shut and p not in held_since:
                held_since[p] = s.t
            elif not shut and p in held_since:
                ax.barh(
                    row(p),
                    s.t - held_since[p],
                    left=held_since[p] - t0,
                    height=0.25,
                    color="black",
                    label="held by fabricd",
                )
                del held_since[p]
    for p, since in held_since.items():
        ax.barh(row(p), end - (since - t0), left=since - t0, height=0.25, color="black", label="held by fabricd")
    for e in run.events:
        y = row(e.where if e.where and ":" in e.where else e.what)
        ax.plot(
            e.t - t0,
            y,
            marker={"process": "X", "operator": "^", "repair": "o"}.get(e.what, "."),
            color="tab:red" if e.what == "process" else "tab:blue",
            linestyle="none",
        )
    ax.axvline(run.schedule_end_s - t0, color="grey", linestyle="--")
    ax.axvline(run.settled_s - t0, color="grey", linestyle=":")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), loc="upper left", fontsize=7, ncol=4)
    ax.set_yticks(range(len(rows)), list(rows), fontsize=6)
    ax.set_xlabel("seconds from the start (dashed: schedule end; dotted: settled)")
    ax.set_title(f"chaos on {facts.name}, seed {run.seed}")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
