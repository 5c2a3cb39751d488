"""The tuning loop in the service (docs/tuning.md): job.py (sample, judge, propose, record by mode), changes.py
(apply, verify, confirm or roll back), push.py (the change on the switch, as `fabricd apply` pushes), ledger.py
(the state's ledger as the loop decides from it), metrics.py (/metrics)."""

from .job import WHAT, TuningJob
from .metrics import TuningCollector

__all__ = ["WHAT", "TuningCollector", "TuningJob"]
