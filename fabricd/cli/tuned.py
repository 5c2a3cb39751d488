"""`fabricd plan`/`apply` and the tuning loop's confirmed values: with `--config` (the service's fabricd.yaml, whose
state holds the ledger) the plan keeps them and says which knobs come from tuning; `--without-tuning` plans the bare
intent and says what it reverts; without `--config` one line says tuned values are not known (docs/tuning.md)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from fabricd.cli.output import console, err_console
from fabricd.cli.tune_history import when
from fabricd.service.tuning.kept import Tuned, tuned_intent
from policies.intent import Intent
from topology.errors import FabricdError
from topology.fabric import Fabric

CONFIG = typer.Option(
    None, "--config", help="fabricd.yaml of the service: keep the values its tuning loop confirmed (state.tuning)."
)
WITHOUT = typer.Option(False, "--without-tuning", help="With --config: plan the bare intent, undoing confirmed tuning.")


def tuned(intent: Intent, fabric: Fabric, config: Path | None, without: bool, fmt: str) -> Intent:
    """The intent to plan, and what tuning contributes said on stdout (text) or stderr (json: stdout is the data)."""
    out = console() if fmt == "text" else err_console()
    if config is None:
        if without:
            raise FabricdError("--without-tuning needs --config (the service's fabricd.yaml, whose ledger says what)")
        out.print("tuning: tuned values are not known (no --config): the plan is the bare intent and undoes any value "
                  "the service's tuning loop confirmed", markup=False, soft_wrap=True)  # fmt: skip
        return intent
    from fabricd.service.config import load_config
    from fabricd.service.state import open_state

    state = open_state(load_config(config, secrets=lambda field: field == "state.password"))
    try:
        result = tuned_intent(intent, fabric, state.tuning.history(limit=100_000, applied_only=True), without)
    finally:
        state.close()
    say(result, without, out)
    return result.intent


def say(result: Tuned, without: bool, out: Console) -> None:
    for k in result.kept:
        where = f"tuning change {k.change_id}, confirmed {when(k.confirmed_ts)} UTC"
        if without:
            text = f"tuning: {k.subject} {k.knob} {k.tuned} -> {k.intent} (intent): reverts {where}"
        else:
            text = f"tuning: {k.subject} {k.knob} {k.tuned} (intent {k.intent}): kept from {where}"
        out.print(text, markup=False, soft_wrap=True)
    if not result.kept:
        out.print("tuning: no confirmed tuned value differs from the intent", markup=False)
    for r in result.in_flight:
        out.print(f"tuning: change {r.id} on {r.subject} is {r.status}: a push now may undo it; wait until it ends "
                  "(fabricd tune history)", markup=False, soft_wrap=True)  # fmt: skip
