"""What `fabricd plan`/`apply` keep of the tuning loop's work (pure): the values the ledger says were confirmed, laid
over the intent with the loop's own `overlay` (push.py: "intent + ledger values"), each with the change that set it,
so a plan can say which lines come from tuning and `--without-tuning` can say what it reverts. Without this, `apply`
pushes the bare intent and silently undoes every confirmed change (issue 51)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fabricd.tuning.propose import Knob
from policies.intent import Intent, PortIntent
from topology.fabric import Fabric

from ..state.tuning import OPEN_TUNE, TuneRecord
from .ledger import values_of
from .push import overlay, subject_ports


@dataclass(frozen=True)
class Kept:
    """One knob of one subject at a value a confirmed tuning change set, where the intent says otherwise."""

    subject: str
    knob: Knob
    intent: int  # what `fabricd intent` derives
    tuned: int  # what the loop confirmed
    change_id: int
    confirmed_ts: int | None  # ns; the change's end


@dataclass(frozen=True)
class Tuned:
    intent: Intent  # the intent to plan: with the kept values, or bare (`without`)
    kept: list[Kept]  # the confirmed values that differ from the intent
    in_flight: list[TuneRecord]  # changes not ended yet: a push now may undo what they are verifying


def knob_of(port: PortIntent, knob: Knob) -> int | None:
    """The intent's value of a knob (from_intent.patch_intent's inverse); None: the intent has no field for it."""
    if knob is Knob.KMIN:
        return port.ecn.min_bytes
    if knob is Knob.KMAX:
        return port.ecn.max_bytes
    if knob is Knob.PMAX:
        return port.ecn.max_probability
    if knob is Knob.FLOWLET:
        return port.dlb.inactivity_us
    if knob is Knob.DR_CNP:
        return int(port.cnp.source == "dr")
    return None


def tuned_intent(intent: Intent, fabric: Fabric, records: Sequence[TuneRecord], without: bool = False) -> Tuned:
    """`records`: the ledger (any statuses). Only confirmed changes are kept: a rolled-back one put its `before` back,
    which a later confirmed one or the intent already holds; an open one is the loop's to finish or undo."""
    confirmed = [r for r in records if r.status == "confirmed"]
    last: dict[tuple[str, Knob], TuneRecord] = {}
    for r in sorted(confirmed, key=lambda r: r.id):
        for c in r.changes:
            last[(r.subject, Knob(str(c["knob"])))] = r
    values = values_of(confirmed)
    kept: list[Kept] = []
    keep: dict[str, dict[Knob, int]] = {}
    for subject, knobs in values.items():
        dev = intent.device(subject.split(":", 1)[0])
        ports = subject_ports(dev, fabric, subject) if dev is not None else []
        for knob, value in sorted(knobs.items()):
            was = knob_of(ports[0], knob) if ports else None
            if was is None or was == value:
                continue  # not in this intent (another device, a removed port), or the intent caught up
            rec = last[(subject, knob)]
            kept.append(Kept(subject, knob, was, value, rec.id, rec.ended_ts))
            keep.setdefault(subject, {})[knob] = value
    devices = {d.device for d in intent.devices}
    in_flight = [r for r in records if r.status in OPEN_TUNE and r.device in devices]
    return Tuned(intent if without or not keep else overlay(intent, fabric, keep), kept, in_flight)
