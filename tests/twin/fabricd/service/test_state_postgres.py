"""The state store's contract (tests/unit/fabricd/service/test_state.py) on a real PostgreSQL: every test there
that takes a `store` runs here again with a fresh database of the session's server."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest

from fabricd.service.state import StateStore
from tests.unit.fabricd.service import test_state as contract

pytestmark = pytest.mark.distributed

globals().update(
    {
        name: fn
        for name, fn in vars(contract).items()
        if name.startswith("test_") and callable(fn) and "store" in inspect.signature(fn).parameters
    }
)


@pytest.fixture
def store(postgres_url: str) -> Iterator[StateStore]:
    s = StateStore(url=postgres_url)
    yield s
    s.close()


def _terminate(url: str, name: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        rows = db.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchall()
    return len(rows)


def test_a_session_the_server_ended_is_opened_again_but_never_inside_a_transaction(postgres_url: str) -> None:
    from fabricd.service.state.db import StateError

    s = StateStore(url=postgres_url, name="fabricd ended")
    try:
        assert _terminate(postgres_url, "fabricd ended") == 1
        s.audit.record(1, "after", "the session was ended between two writes")  # a new session, nothing lost
        with pytest.raises(StateError, match="terminating connection"), s.transaction():
            s.audit.record(2, "first", "in a transaction")
            _terminate(postgres_url, "fabricd ended")
            s.audit.record(3, "second", "never in a new session without the first")
        s.audit.record(4, "later", "the next transaction runs")
        assert [e["what"] for e in s.audit.entries()] == ["later", "after"]
    finally:
        s.close()


def test_a_claim_ends_an_old_leaders_write_stuck_holding_the_leader_row(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An old leader paused inside a fenced write (here: a transaction left open after its fence check) does not
    hold the new leader's claim: its session is ended (logged with its pid and name), nothing of its write is
    kept."""
    import time

    from fabricd.service.state import fenced
    from fabricd.service.state.db import StateError

    old, new = StateStore(url=postgres_url, name="fabricd old"), StateStore(url=postgres_url, name="fabricd new")
    try:
        assert old.leadership.claim("old", 5, 1)
        pid = old.database.one("SELECT pg_backend_pid() AS pid")["pid"]  # type: ignore[index]
        stuck = fenced(5)
        stuck.__enter__()
        tx = old.transaction()
        tx.__enter__()  # the fence check: the leader row is share-locked until the commit
        old.audit.record(2, "stuck", "never committed")
        began = time.monotonic()
        assert new.leadership.claim("new", 6, 3)
        ended = [r.getMessage() for r in caplog.records if "ended PostgreSQL session" in r.getMessage()]
        assert ended == [f"claiming the lead for new: ended PostgreSQL session {pid} (fabricd old), stuck in a write"
                         " holding the leader row"], ended  # fmt: skip
        assert time.monotonic() - began < 2.0  # not the 5 s of the server's idle-in-transaction limit
        assert new.leadership.current() == ("new", 6)
        with pytest.raises(StateError, match="terminating connection"):  # the session is gone: the commit fails
            tx.__exit__(None, None, None)
        stuck.__exit__(None, None, None)
        assert "stuck" not in [e["what"] for e in new.audit.entries()]
    finally:
        old.close()
        new.close()
