"""Records against the fabric, every pass: what fabricd believes it holds down against what the switches show.

Level-triggered, like a Kubernetes controller: the decision is a pure function of fabricd's records (the ports it
holds down, the actions under way, the open tickets), what telemetry shows now (each port's admin state, only for
switches whose telemetry is fresh), what the switches' own marks say (drivers/marks.py, from the last scan) and the
remediation mode. It returns steps; remediation/reconciler.py carries them out and records what it did. A lost event, a
lost record, a rebooted or replaced switch or a `no shutdown` typed by hand heals on the next pass:

- a hold whose port is administratively up again (the switch came back without fabricd's change, or someone enabled
  it) is *re-applied* through the guard when its ticket is still open and the mode acts on its own (`auto`), is
  *proposed* again in `approve` mode, and is otherwise *released* (audited, noted on the ticket);
- a port that is down and carries fabricd's mark but has no record (the state was lost, or restored from an old
  backup) is *adopted*: record, finding and ticket are re-created, so nothing stays down unexplained;
- a port that is up and still carries fabricd's mark but no hold (a hold released in `observe` mode, which touches
  no switch, or a mark whose removal failed) is *unmarked* once the mode acts again, so the mark never says fabricd
  holds a port it does not (a later hand shutdown would be adopted as fabricd's);
- a hold whose port is up is *stale*: it never counts against the guard's budgets (`stale_holds`);
- a re-apply the guard refuses is not a release: the hold stays, *to re-apply*, and is tried again every pass
  until the guard allows it, its ticket is resolved (then it is released), or a person releases it
  (`refused_reapply` says what to record; the ticket hears of each change, not of each pass).

What is not known is not judged: a switch whose telemetry is stale or has not reported the admin state of the port
is left for a later pass, and a hold younger than `grace_ns` is left alone (telemetry may not have shown the
shutdown that the action already saw).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from drivers.base import PortMark
from drivers.marks import Mark
from topology.model import Endpoint

from .state import DisabledPort


class Step(StrEnum):
    REAPPLY = "reapply"  # shut the port again (through the guard) under the same ticket
    PROPOSE = "propose"  # approve mode: a new disable awaits approval under the same ticket; the stale hold goes
    RELEASE = "release"  # forget the hold: the port is up and fabricd will not take it down again
    ADOPT = "adopt"  # a marked port down with no record: record it as fabricd's
    UNMARK = "unmark"  # a marked port up with no hold: the mark says what is no longer so; it is removed


@dataclass(frozen=True)
class Hold:
    endpoint: Endpoint
    action_id: int
    ticket_id: int | None
    since_ts: int

    @staticmethod
    def of(row: DisabledPort) -> Hold:
        return Hold(Endpoint(row["device"], row["port"]), row["action_id"], row["ticket_id"], row["since_ts"])


@dataclass(frozen=True)
class Observed:
    """What the fabric shows: admin state by port from telemetry (a port that did not report it is absent), the
    marks of the last scan of the switches (None: not scanned yet), and the switches whose telemetry is stale (what
    they show is not judged)."""

    admin_up: Mapping[Endpoint, bool]
    marks: Mapping[Endpoint, PortMark] | None = None
    stale: frozenset[str] = frozenset()

    def admin(self, ep: Endpoint) -> bool | None:
        """The port's admin state, None when unknown or stale."""
        return None if ep.device in self.stale else self.admin_up.get(ep)


@dataclass(frozen=True)
class Reconcile:
    step: Step
    endpoint: Endpoint
    why: str
    hold: Hold | None = None  # REAPPLY, PROPOSE, RELEASE: the record it is about
    mark: Mark | None = None  # ADOPT, UNMARK: what the switch says


@dataclass(frozen=True)
class Refusal:
    """Why the guard would not let fabricd take a held port down again (its rule and reason)."""

    rule: str
    reason: str


def refused_reapply(hold: Hold, refusal: Refusal, before: Refusal | None) -> tuple[str, bool]:
    """A re-apply the guard refused: the line to log and note, and whether it is news (a first refusal or another
    reason than the last: audited and noted on the ticket; the same refusal pass after pass is not). The hold stays
    either way: a port shut for a fault is never given back without a repair or a person."""
    ep, ticket = hold.endpoint, hold.ticket_id
    why = (
        f"{ep} is up again and its ticket {ticket} is open, but the guard refuses taking it down again "
        f"({refusal.rule}): {refusal.reason}; the hold stays, to re-apply as soon as the guard allows it "
        f"(or resolve ticket {ticket}, or release the hold: fabricd release {ep} --reason ...)"
    )
    return why, refusal != before


def stale_holds(holds: Iterable[Hold], admin_up: Mapping[Endpoint, bool], *, now: int, grace_ns: int) -> set[Endpoint]:
    """Held ports that telemetry shows administratively up: not down, so not counted against any budget. A hold
    younger than `grace_ns` always counts (telemetry may not have shown its shutdown yet)."""
    return {h.endpoint for h in holds if admin_up.get(h.endpoint) is True and now - h.since_ts >= grace_ns}


def reconcile(
    holds: Iterable[Hold],
    observed: Observed,
    *,
    open_tickets: Collection[int],
    in_flight: Collection[Endpoint],
    mode: str,
    now: int,
    grace_ns: int,
) -> list[Reconcile]:
    """The steps that bring fabricd's records and the fabric back in line (empty when they agree)."""
    out: list[Reconcile] = []
    held = set()
    for h in sorted(holds, key=lambda h: (h.since_ts, str(h.endpoint))):
        held.add(h.endpoint)
        if h.endpoint in in_flight or now - h.since_ts < grace_ns or observed.admin(h.endpoint) is not True:
            continue
        ep = h.endpoint
        ticket_open = h.ticket_id is not None and h.ticket_id in open_tickets
        if not ticket_open:
            closed = "it has no ticket" if h.ticket_id is None else f"its ticket {h.ticket_id} is closed"
            why = f"{ep} is up again and {closed}: the hold is released"
            out.append(Reconcile(Step.RELEASE, ep, why, hold=h))
        elif mode == "auto":
            why = f"{ep} is up again although its ticket {h.ticket_id} is open (a reboot, a replaced switch or a hand"
            out.append(Reconcile(Step.REAPPLY, ep, why + "-typed `no shutdown`): taking it down again", hold=h))
        elif mode == "approve":
            why = f"{ep} is up again although its ticket {h.ticket_id} is open: taking it down again awaits approval"
            out.append(Reconcile(Step.PROPOSE, ep, why, hold=h))
        else:
            why = f"{ep} is up again although its ticket {h.ticket_id} is open; mode {mode}: fabricd leaves it up"
            out.append(Reconcile(Step.RELEASE, ep, why, hold=h))
    for ep, pm in sorted((observed.marks or {}).items(), key=lambda kv: str(kv[0])):
        if ep in held or ep in in_flight or ep.device in observed.stale:
            continue
        m = pm.mark
        # Down by the scan, and not up by telemetry since (an operator may have enabled it after the scan).
        if pm.admin_up or observed.admin(ep) is True:
            if mode != "observe":
                why = (f"{ep} is up with fabricd's mark (action {m.action_id}, ticket {m.ticket_id or '-'}, {m.kind}) "
                       "but fabricd holds it no longer: the mark is removed")  # fmt: skip
                out.append(Reconcile(Step.UNMARK, ep, why, mark=m))
            continue
        why = (
            f"{ep} is down with fabricd's mark (action {m.action_id}, ticket {m.ticket_id or '-'}, {m.kind}) but "
            "fabricd has no record of it (state lost or restored from an older copy): adopted"
        )
        out.append(Reconcile(Step.ADOPT, ep, why, mark=m))
    return out
