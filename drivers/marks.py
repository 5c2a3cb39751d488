"""What fabricd did to a port, written on the switch itself: a suffix of the interface description.

fabricd's records can be lost (an emptied state file, a restore from an old backup); the switch cannot forget what
it carries in its configuration. So every port fabricd shuts carries a mark naming the action, its ticket and the
fault, written in the same commit as the `shutdown` and removed in the same commit as the `no shutdown`. The mark
is a suffix: the operator's own description stays in front of it, untouched (`[fabricd ...]` is the only part
fabricd writes or removes). A description is a field every platform has (EOS `description`, SONiC `PORT|x`
`description`), shows in `show interfaces description`, LLDP's port description and gNMI's
`/interfaces/interface/state/description`, so whoever looks at the port sees why it is down.

    leaf uplink to spine-r3-1 [fabricd: down a12 t7 link_flap]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MARK = re.compile(r"\s*\[fabricd: down a(\d+) t(\d+|-) ([a-z_]+)\]\s*$")
# EOS accepts up to 240 characters of description; SONiC's YANG model has no smaller limit that we know of.
MAX_DESCRIPTION = 240


@dataclass(frozen=True)
class Mark:
    """fabricd's mark on a port it holds down: the action that shut it, the ticket that tracks the repair, the fault."""

    action_id: int
    ticket_id: int | None
    kind: str

    def text(self) -> str:
        ticket = "-" if self.ticket_id is None else str(self.ticket_id)
        return f"[fabricd: down a{self.action_id} t{ticket} {self.kind}]"


def parse_mark(description: str) -> Mark | None:
    """The mark at the end of a description, or None."""
    m = _MARK.search(description)
    if m is None:
        return None
    ticket = None if m.group(2) == "-" else int(m.group(2))
    return Mark(int(m.group(1)), ticket, m.group(3))


def without_mark(description: str) -> str:
    """The operator's part of a description (fabricd's mark removed)."""
    return _MARK.sub("", description).rstrip()


def with_mark(description: str, mark: Mark) -> str:
    """The description with fabricd's mark at its end (replacing an older mark); the operator's part is cut short
    only when the two would not fit the switch's limit."""
    own = without_mark(description)
    tag = mark.text()
    room = MAX_DESCRIPTION - len(tag) - 1
    own = own[:room].rstrip()
    return f"{own} {tag}" if own else tag
