"""`fabricd tune history`: the tuning ledger of the running service (GET /api/v1/tuning/history): each change with
when, the subject, each knob before -> after, the mode, how it stands (observed, awaiting_approval, applying,
verifying, rolling_back, confirmed, rolled_back, refused) and why, and the KPIs before and after."""

from __future__ import annotations

import time
from typing import Any

from rich.table import Table

from fabricd.cli.output import Format, cell, console, emit_json, line

NS = 1_000_000_000


def when(ts: int | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts / NS))


def _kpis(doc: dict[str, float], keys: list[str]) -> str:
    return ", ".join(f"{k}={doc[k]:.4g}" for k in keys if k in doc) or "-"


def print_history(changes: list[dict[str, Any]], fmt: Format) -> None:
    if fmt is Format.json:
        emit_json({"changes": changes})
        return
    con = console()
    if not changes:
        con.print(line("no tuning change recorded"))
        return
    t = Table(header_style="bold")
    for col in ("id", "when (UTC)", "subject", "change", "mode", "outcome", "KPIs before", "KPIs after", "why"):
        t.add_column(col)
    for c in changes:
        diff = "; ".join(f"{x['knob']} {x['before']} -> {x['after']}" for x in c["changes"])
        # the KPI the change is judged by first, then the guards
        keys = [k for k in (c["target"], "pause_us_per_s", "throughput_bytes_per_s", "drops_per_s") if k]
        keys = list(dict.fromkeys(keys))
        row = (c["id"], when(c["created_ts"]), c["subject"], diff, c["mode"], c["status"],
               _kpis(c["kpis_before"], keys), _kpis(c["kpis_after"], keys), c["why"])  # fmt: skip
        t.add_row(*(cell(x) for x in row))
    con.print(t)
