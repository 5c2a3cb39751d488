"""The remediation and safety sections: how fabricd may act on a port, within which limits, and how planned
maintenance drains."""

from __future__ import annotations

import shlex
from typing import Literal

from pydantic import Field, field_validator

from .base import _Strict


class SafetyLimits(_Strict):
    # CorrOpt (SIGCOMM'17) disables a corrupting link only while the switch keeps its capacity target;
    # 75% of uplink capacity is its default and ours (../shared/reference/domain.md).
    min_uplink_fraction: float = Field(0.75, gt=0, le=1)
    max_down_per_switch: int = Field(2, ge=0)
    max_down_per_rail: int = Field(4, ge=0)
    max_down_fabric: int = Field(8, ge=0)
    max_actions_per_hour: int = Field(10, ge=0)


class MaintenanceSettings(_Strict):
    """Planned maintenance (drain, undrain; docs/operations.md "Planned maintenance")."""

    # a drained port sending less than this is quiet: LLDP and BGP keepalives remain after a shift (b/s)
    quiet_bps: float = Field(1e6, ge=0)
    shift_timeout_s: float = Field(60.0, gt=0, le=3600)  # the drained ports must fall quiet within this, else stop
    lldp_wait_s: float = Field(5.0, gt=0, le=300)  # an undrain waits this long for a port's LLDP neighbour
    # before traffic returns, the drained ports' error counters are watched this long and must not rise
    undrain_watch_s: float = Field(10.0, ge=0, le=3600)


class RemediationSettings(_Strict):
    mode: Literal["observe", "approve", "auto"] = "observe"
    kinds: list[Literal["link_flap", "link_corruption"]] = ["link_flap", "link_corruption"]  # noqa: RUF012 (a pydantic field)
    revert_in_s: int = Field(120, ge=30, le=3600)  # the switch undoes our shutdown unless we confirm in time
    verify_timeout_s: float = Field(10.0, gt=0, le=300)
    probation_s: float = Field(3600.0, ge=0)  # after re-enable, a new flap disables again and reopens the ticket
    # Run for server-facing ports before they go down, e.g.
    # scontrol update nodename={node} state=drain reason="{reason}"
    drain_hook: str | None = None
    drain_timeout_s: float = Field(30.0, gt=0)
    # In auto mode, a port that carries a job with one of these priority labels (jobs.*) waits for approval
    # instead: a flap on a rank of the flagship run is a call for a person, not for fabricd.
    approve_for_priority: list[str] = []  # noqa: RUF012 (a pydantic field)
    # How often every switch's marks are read again (drivers/marks.py; at start and on takeover too): a port down
    # with fabricd's mark and no record is adopted (fabricd/service/reconcile.py). Each pass also reconciles the
    # records with telemetry's admin states, which needs no scan.
    mark_scan_s: float = Field(300.0, ge=10)
    # fabricd's own holds never keep a switch under safety.min_uplink_fraction (issue 49, CorrOpt's re-decision:
    # shared/reference/congestion-tuning.md §6.1, §7 rule 11): held ports whose fault is over come back, the
    # fewest and least harmful first (docs/operations.md, "Capacity floor").
    keep_floor: bool = True
    return_quiet_s: float = Field(60.0, ge=0, le=86400)  # a flap train quiet this long is over
    # a corrupting link losing more than this is still faulty and is not returned: CorrOpt's lowest loss class
    # reaches 9e-6 (congestion-tuning.md §6.1), so 1e-5 keeps the mildest corruption returnable
    max_return_loss: float = Field(1e-5, ge=0, le=1)
    # a returned port stays up at least this long before fabricd takes it down again (no flapping between the two)
    min_up_s: float = Field(300.0, ge=0, le=86400)
    maintenance: MaintenanceSettings = MaintenanceSettings()

    @field_validator("drain_hook")
    @classmethod
    def _hook_template(cls, hook: str | None) -> str | None:
        """Refuse at start what would otherwise fail at the first drain (and leave that action half done)."""
        if hook:
            hint = "placeholders are {node}, {reason}, {device} and {port}; write literal braces as {{ }}"
            try:
                for arg in shlex.split(hook):
                    arg.format(node="", reason="", device="", port="")
            except KeyError as e:
                raise ValueError(f"unknown placeholder {{{e.args[0]}}}; " + hint) from None
            except (IndexError, AttributeError, ValueError) as e:
                raise ValueError(f"not a valid command template ({e}); " + hint) from None
        return hook
