"""The tuning section: the closed loop of docs/tuning.md (issue 51), off by default."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import _Strict

# SONiC dynamic_th -2 of the twin's 47,218,432-byte lossless pool (fabricd/tuning/observed.py DEFAULT_XOFF_BYTES).
DEFAULT_XOFF_BYTES = 11_804_608


class TuningSettings(_Strict):
    """Every `sample_s` the leader samples each lossless queue from its telemetry; every `window_s` it judges the
    window and proposes. Only `observe` is wired: it records in the audit what it would change and why, and changes
    nothing. `approve` and `auto` (apply through the rollout, verify, roll back) are not wired yet."""

    enabled: bool = False
    mode: Literal["observe"] = "observe"
    window_s: float = Field(300.0, ge=1, le=86400)
    sample_s: float = Field(30.0, gt=0, le=3600)
    xoff_bytes: int = Field(DEFAULT_XOFF_BYTES, gt=0)  # the ingress fill at which a port sends XOFF
