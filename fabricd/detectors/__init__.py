"""Detectors: pure functions `detect(snapshot, fabric, state, now_ns) -> list[Finding]`, each with its own small
state object, run tick by tick by `runner` (over a recorded trace here, over live telemetry in the service)."""

from .finding import Finding
from .link_flap import LinkFlapConfig, LinkFlapState
from .pfc_storm import PfcStormConfig, PfcStormState
from .runner import Detector, Runner, default_detectors, run_trace

__all__ = [
    "Detector",
    "Finding",
    "LinkFlapConfig",
    "LinkFlapState",
    "PfcStormConfig",
    "PfcStormState",
    "Runner",
    "default_detectors",
    "run_trace",
]
