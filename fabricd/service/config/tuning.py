"""The tuning section: the closed loop of docs/tuning.md (issue 51), off by default."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import _Strict

# SONiC dynamic_th -2 of the twin's 47,218,432-byte lossless pool (fabricd/tuning/observed.py DEFAULT_XOFF_BYTES).
DEFAULT_XOFF_BYTES = 11_804_608


class TuningSettings(_Strict):
    """Every `sample_s` the leader samples each lossless queue from its telemetry; every `window_s` it judges the
    window and proposes. `observe` records in the audit what it would change and why, and changes nothing; `approve`
    records the change as an action awaiting `fabricd approve`; `auto` applies it at once. An applied change is
    pushed like `fabricd apply` (commit under a `revert_in_s` timer, verify, confirm), then judged over `verify_s`
    of samples after it: confirmed, or rolled back to the values before it (service/tuning/)."""

    enabled: bool = False
    mode: Literal["observe", "approve", "auto"] = "observe"
    window_s: float = Field(300.0, ge=1, le=86400)
    sample_s: float = Field(30.0, gt=0, le=3600)
    verify_s: float | None = Field(None, ge=1, le=86400)  # the verify window after a change; default window_s
    # Samples this long after a push are not in its verify window: counters streamed then may still be from before
    # it, and a switch busy with a commit streams late (the twin showed one interval empty, the next doubled).
    settle_s: float | None = Field(None, ge=0, le=3600)  # default 2 x sample_s
    revert_in_s: int = Field(300, ge=30, le=3600)  # as `fabricd apply --revert-in`
    xoff_bytes: int = Field(DEFAULT_XOFF_BYTES, gt=0)  # the ingress fill at which a port sends XOFF

    @property
    def verify_window_s(self) -> float:
        return self.window_s if self.verify_s is None else self.verify_s

    @property
    def settle_window_s(self) -> float:
        return 2 * self.sample_s if self.settle_s is None else self.settle_s
