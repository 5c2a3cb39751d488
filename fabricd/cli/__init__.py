"""The `fabricd` command line: one line and exit 2 on any error we can name; --debug shows the traceback."""

from __future__ import annotations

import sys
import traceback

import typer

from fabricd import __version__
from fabricd.cli.apply_cmd import apply_command
from fabricd.cli.bus_cmd import app as bus_app
from fabricd.cli.check_cmd import app as check_app
from fabricd.cli.collector_cmd import collector_command
from fabricd.cli.dci_cmd import app as dci_app
from fabricd.cli.detect_cmd import detect_command
from fabricd.cli.intent_cmd import intent_command
from fabricd.cli.jobs_cmd import jobs_command
from fabricd.cli.lab_cmd import app as lab_app
from fabricd.cli.maintenance_cmd import drain_command, maintenance_command, undrain_command
from fabricd.cli.output import EXIT_TROUBLE, err_console
from fabricd.cli.place_cmd import place_command
from fabricd.cli.plan_cmd import plan_command
from fabricd.cli.service_cmd import (
    actions_command,
    approve_command,
    findings_command,
    mode_command,
    reject_command,
    release_command,
    resolve_command,
    run_command,
    status_command,
    tickets_command,
)
from fabricd.cli.shard_cmd import shard_command
from fabricd.cli.token_cmd import app as token_app
from fabricd.cli.topology_cmd import app as topology_app
from fabricd.cli.tune_cmd import tune_command
from fabricd.cli.validate_cmd import validate_command
from topology.errors import FabricdError

app = typer.Typer(
    name="fabricd",
    help="Fabric controller for rail-optimized RoCE GPU fabrics and long-haul DCI links.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"fabricd {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """fabricd: exit 0 clean, 1 findings/violations/changes, 2 could not do the job."""


app.command("validate")(validate_command)
app.command("intent")(intent_command)
app.command("plan")(plan_command)
app.command("apply")(apply_command)
app.command("detect")(detect_command)
app.command("run")(run_command)
app.command("collector")(collector_command)
app.command("shard")(shard_command)
app.command("status")(status_command)
app.command("findings")(findings_command)
app.command("tickets")(tickets_command)
app.command("actions")(actions_command)
app.command("approve")(approve_command)
app.command("resolve")(resolve_command)
app.command("release")(release_command)
app.command("reject")(reject_command)
app.command("mode")(mode_command)
app.command("jobs")(jobs_command)
app.command("drain")(drain_command)
app.command("undrain")(undrain_command)
app.command("maintenance")(maintenance_command)
app.command("place")(place_command)
app.command("tune")(tune_command)
app.add_typer(topology_app, name="topology")
app.add_typer(lab_app, name="lab")
app.add_typer(check_app, name="check")
app.add_typer(dci_app, name="dci")
app.add_typer(token_app, name="token")
app.add_typer(bus_app, name="bus")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    try:
        rv = app(args=args, standalone_mode=False, prog_name="fabricd")
    except FabricdError as exc:
        if debug:
            traceback.print_exc()
        err_console().print(f"fabricd: error: {exc}", markup=False, highlight=False)
        return _exit(exc.exit_code, argv)
    except typer.Exit as exc:
        return _exit(exc.exit_code, argv)
    except typer.Abort:
        err_console().print("fabricd: aborted", markup=False)
        return _exit(EXIT_TROUBLE, argv)
    except typer.TyperException as exc:
        # Usage errors (unknown option, missing option): typer's own message and usage line, exit 2.
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            err_console().print(f"fabricd: error: {exc}", markup=False)
        return _exit(EXIT_TROUBLE, argv)
    return _exit(rv if isinstance(rv, int) else 0, argv)


def _exit(code: int, argv: list[str] | None) -> int:
    if argv is None:
        sys.exit(code)
    return code
