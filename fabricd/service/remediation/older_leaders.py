"""What a leader does about an older leader's transactions on a switch, for every change it commits there (a port's
admin state, a drain's shift, a tuning push): each of its transactions is named with its token
(`fabricd_t<token>_...`), every transaction of a lower token is ended before its own commit (`end_older`: on SONiC
this also raises the switch's fence, so that from then on no command of an older leader runs there), and a commit
the switch refuses naming an older leader's transaction is retried once after ending it (`blocked_by_older`). A
paused old leader's request already past its fence check goes out when it wakes, at any moment: on EOS a session of
its token committed under its timer blocks every other commit until the timer ends, and on SONiC its timer reverts
the switch to its checkpoint when it ends. So a late request costs at most one retry, and no change of it stays on
the switch beyond the next commit there (docs/ha.md, "Fencing")."""

from __future__ import annotations

import logging
import re
import secrets

from drivers.base import Session

log = logging.getLogger("fabricd.remediation")
# A transaction of a leader, by its name (records.py, `Action.switch_key`): the token is its first number.
LEADER_TRANSACTION = re.compile(r"\bfabricd_t(\d+)_")


def leader_key(token: int, what: str) -> str:
    """A leader's name for a transaction (`what`: letters, digits and `_`), unique: a name once committed is not
    reused (EOS keeps a committed session's name; SONiC's revert timer acts on its name's pid file)."""
    return f"fabricd_t{token}_{what}_{secrets.token_hex(3)}"


def blocked_by_older(refusal: str, token: int) -> bool:
    """The switch refused a commit naming a transaction of an older leader (EOS: "Cannot commit: session
    fabricd_t<old>_... has a pending commit timer"): a paused leader's late request left it there."""
    return any(int(m.group(1)) < token for m in LEADER_TRANSACTION.finditer(refusal))


def end_older(session: Session, device: str, token: int) -> bool:
    """Blocking: every transaction of a lower token on the switch ended (uncommitted ones discarded, ones pending
    under their revert timer rolled back); True if there were any."""
    ended = session.abort_stale(token, ())
    if ended:
        log.warning("%s: ended an older leader's transactions %s", device, ", ".join(ended))
    return bool(ended)
