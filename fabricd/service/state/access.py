"""Who may use the API and the page: users' API tokens (only their hashes) and the page's sessions. In the state, not
in one process: a restart or a standby taking over keeps people logged in, and revoking the token a session was
opened with ends the session. The session id is kept hashed, like tokens."""

from __future__ import annotations

from . import audit
from .database import Database
from .db import Row
from .records import ApiToken
from .rows import Codec, integer, integer_or_none, new_id, text


def decode(row: Row) -> ApiToken:
    return ApiToken(
        id=integer(row, "id"), user=text(row, "user"), role=text(row, "role"), created_ts=integer(row, "created_ts"),
        created_by=text(row, "created_by"), revoked_ts=integer_or_none(row, "revoked_ts"),
    )  # fmt: skip


_COLUMNS = 'SELECT id, "user", role, created_ts, created_by, revoked_ts FROM tokens'
CODEC = Codec("tokens", "id", decode, _COLUMNS)


class Access:
    def __init__(self, database: Database) -> None:
        self._db = database

    # --- page sessions -------------------------------------------------------------------------------------
    def add_session(
        self, sid_hash: str, actor: str, role: str, csrf: str, expires_ts: int, token_hash: str | None, now: int
    ) -> None:
        with self._db.transaction() as db:
            db.execute("DELETE FROM page_sessions WHERE expires_ts < ?", (now,))
            db.execute(
                "INSERT INTO page_sessions (sid_hash, actor, role, csrf, expires_ts, token_hash)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (sid_hash, actor, role, csrf, expires_ts, token_hash),
            )

    def session(self, sid_hash: str, now: int) -> tuple[str, str, str] | None:
        """(actor, role, csrf) of a live session: not expired, and its token (if it was opened with a user token)
        not revoked."""
        row = self._db.one(
            "SELECT s.actor, s.role, s.csrf FROM page_sessions s LEFT JOIN tokens t ON t.hash = s.token_hash"
            " WHERE s.sid_hash = ? AND s.expires_ts >= ?"
            " AND (s.token_hash IS NULL OR (t.id IS NOT NULL AND t.revoked_ts IS NULL))",
            (sid_hash, now),
        )
        return None if row is None else (str(row["actor"]), str(row["role"]), str(row["csrf"]))

    def drop_session(self, sid_hash: str) -> None:
        with self._db.transaction() as db:
            db.execute("DELETE FROM page_sessions WHERE sid_hash = ?", (sid_hash,))

    # --- API tokens ------------------------------------------------------------------------------------------
    def add_token(self, user: str, role: str, token_hash: str, now: int, created_by: str) -> ApiToken:
        with self._db.transaction() as db:
            tid = new_id(db.execute(
                'INSERT INTO tokens ("user", role, hash, created_ts, created_by) VALUES (?, ?, ?, ?, ?) RETURNING id',
                (user, role, token_hash, now, created_by),
            ))  # fmt: skip
            audit.write(db, now, f"token {tid} created", f"user {user}, role {role}", actor=created_by)
        return ApiToken(tid, user, role, now, created_by, None)

    def token_by_hash(self, token_hash: str) -> ApiToken | None:
        """The live (not revoked) token with this hash."""
        return self._db.record(CODEC, f"{_COLUMNS} WHERE hash = ? AND revoked_ts IS NULL", (token_hash,))

    def tokens(self) -> list[ApiToken]:
        return self._db.records(CODEC, f"{_COLUMNS} ORDER BY id")

    def revoke_token(self, token_id: int, now: int, actor: str) -> bool:
        """True when this call revoked it; False when there is no such live token (revoking twice is a no-op)."""
        with self._db.transaction() as db:
            cur = db.execute("UPDATE tokens SET revoked_ts = ? WHERE id = ? AND revoked_ts IS NULL", (now, token_id))
            if cur.rowcount:
                audit.write(db, now, f"token {token_id} revoked", "revoked", actor=actor)
            return bool(cur.rowcount)
