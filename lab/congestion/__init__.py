"""The twin's congestion model for the lossless class: DCQCN senders, RED/ECN and PFC queues, flowlet load balancing.

Pure numpy, no sockets, no twin: `dcqcn.simulate` runs queues and flow aggregates for a stretch of simulated time and
returns what a switch would count (marks, pauses, drops, watermarks, CNPs); `fixed_point` is the papers' analysis it
is validated against; `flowlet.simulate_flowlets` runs one ECMP group under DLB. `lab/model.py` builds the inputs
from the twin's traffic and running config (`lab/congestion/twin.py`) and turns the results into counters.
"""

from .dcqcn import PACKET_BYTES, Aggregate, Result, red, simulate
from .fixed_point import FixedPoint, closed_form, exact
from .flowlet import FlowletResult, simulate_flowlets
from .params import CONNECTX, LONG_HAUL, PAPER, NicParams, QueueConfig, paper_switch

__all__ = [
    "CONNECTX",
    "LONG_HAUL",
    "PACKET_BYTES",
    "PAPER",
    "Aggregate",
    "FixedPoint",
    "FlowletResult",
    "NicParams",
    "QueueConfig",
    "Result",
    "closed_form",
    "exact",
    "paper_switch",
    "red",
    "simulate",
    "simulate_flowlets",
]
