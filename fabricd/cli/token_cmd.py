"""`fabricd token create|list|revoke`: per-user API tokens, written straight into the service's state file (who can
write that file is already an administrator of fabricd: this is how the first admin token is made). A running
service sees a new or revoked token at its next request. Over the API, an admin does the same with
POST/GET/DELETE /api/v1/tokens."""

from __future__ import annotations

import getpass
import time
from pathlib import Path

import typer
from rich.table import Table

from fabricd.cli.output import Format, cell, console, emit_json
from fabricd.service.config import load_config
from fabricd.service.state import StateStore, open_state
from fabricd.service.surface.access import Role, new_token, token_hash, valid_user
from topology.errors import FabricdError

app = typer.Typer(help="Per-user API tokens (viewer, operator, admin): docs/access.md.", no_args_is_help=True)
_CONFIG = typer.Option(Path("fabricd.yaml"), "--config", "-c", help="fabricd.yaml of the service.")


def _state(config: Path) -> StateStore:
    # Only the state's own password is needed: the API token, ticket and bus secrets belong to the service.
    return open_state(load_config(config, secrets=lambda field: field == "state.password"))


def _actor() -> str:
    return f"cli:{getpass.getuser()}"


@app.command("create")
def create_command(
    user: str = typer.Option(..., "--user", help="Who the token is for (login or e-mail): the audit log's actor."),
    role: str = typer.Option(..., "--role", help="viewer (reads), operator (approves, resolves), admin (tokens)."),
    config: Path = _CONFIG,
    fmt: Format = typer.Option(Format.table, "--format", "-f"),
) -> None:
    """Create a token and print it once: it is not stored, only its hash."""
    try:
        r = Role.parse(role)
    except ValueError as e:
        raise FabricdError(f"--role: {e}") from None
    if not valid_user(user):
        raise FabricdError("--user: letters, digits and . _ @ - only (a login or an e-mail), at most 64")
    token = new_token()
    state = _state(config)
    try:
        row = state.access.add_token(user, r.name, token_hash(token), time.time_ns(), _actor())
    finally:
        state.close()
    if fmt == Format.json:
        emit_json({**row.to_dict(), "token": token})
        return
    console().print(f"token {row.id} for {user} ({r.name}); shown once, keep it in a secret store:")
    print(token)


@app.command("list")
def list_command(config: Path = _CONFIG, fmt: Format = typer.Option(Format.table, "--format", "-f")) -> None:
    """Every token: id, user, role, created, revoked (never the token)."""
    state = _state(config)
    try:
        rows = state.access.tokens()
    finally:
        state.close()
    if fmt == Format.json:
        emit_json({"tokens": [t.to_dict() for t in rows]})
        return
    table = Table("id", "user", "role", "created", "by", "revoked")
    for t in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(t.created_ts / 1e9))
        gone = "" if t.revoked_ts is None else time.strftime("%Y-%m-%d %H:%M", time.gmtime(t.revoked_ts / 1e9))
        table.add_row(str(t.id), cell(t.user), t.role, when, cell(t.created_by), gone)  # names people typed: data
    console().print(table)


@app.command("revoke")
def revoke_command(token_id: int = typer.Argument(..., help="The token's id (fabricd token list)."),
                   config: Path = _CONFIG) -> None:  # fmt: skip
    """Revoke a token: the service refuses it from its next request on."""
    state = _state(config)
    try:
        done = state.access.revoke_token(token_id, time.time_ns(), _actor())
    finally:
        state.close()
    if not done:
        raise FabricdError(f"no live token {token_id}; see fabricd token list")
    console().print(f"token {token_id} revoked")
