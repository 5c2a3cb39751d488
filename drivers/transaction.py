"""The end of every change fabricd commits to a switch (a config rollout, a port action): it was committed under
the switch's revert timer, and is now either kept or taken back.

One rule, here only: a confirm that fails is an error (the change will revert: the caller must know), a rollback
that fails is not an emergency (the switch's own timer reverts the change when it ends), and says so.
"""

from __future__ import annotations

from .base import DriverError, Session


def settle(session: Session, keep: bool) -> str:
    """Confirm the pending commit (keep) or roll it back now; returns what happened. Raises DriverError only when a
    confirm fails."""
    if keep:
        session.confirm()
        return "confirmed"
    try:
        session.rollback()
    except DriverError as e:
        return f"rollback failed ({e}); the switch reverts when its commit timer ends"
    return "rolled back"
