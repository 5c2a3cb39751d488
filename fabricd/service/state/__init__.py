"""The state: one database and a repository per aggregate over it (store.py opens it; database.py is the unit of
work). Everything other modules use is importable from here."""

from .database import Database, WriteHealth
from .db import ConflictError, FencedError, LockTimeoutError, StateError
from .fence import FENCE, fenced
from .records import (
    OPEN_ACTION,
    PORT_OPS,
    Action,
    ActionStatus,
    ApiToken,
    AuditEntry,
    DisabledPort,
    DrainKind,
    DrainRecord,
    JobRefDoc,
    RefusedReapply,
    StoredFinding,
    Ticket,
)
from .rows import Quarantined
from .sqlite import set_aside
from .store import SCHEMA_VERSION, StateStore, open_state

__all__ = [
    "FENCE",
    "OPEN_ACTION",
    "PORT_OPS",
    "SCHEMA_VERSION",
    "Action",
    "ActionStatus",
    "ApiToken",
    "AuditEntry",
    "ConflictError",
    "Database",
    "DisabledPort",
    "DrainKind",
    "DrainRecord",
    "FencedError",
    "JobRefDoc",
    "LockTimeoutError",
    "Quarantined",
    "RefusedReapply",
    "StateError",
    "StateStore",
    "StoredFinding",
    "Ticket",
    "WriteHealth",
    "fenced",
    "open_state",
    "set_aside",
]
