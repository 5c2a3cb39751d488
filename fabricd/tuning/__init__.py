"""Closed-loop tuning of ECN, flowlet and DR-CNP settings: the pure core (issue 51; docs/tuning.md).

Data in, data out, time passed as values: no sockets, no clocks. The service loop and the telemetry/twin adapters
call, in order:

- inputs.py: the named types they fill (PortWindow, GroupWindow, Sample, GroupSample, PortSettings, Physics, ...);
- rules.py: judge_port / judge_group -> Verdicts (one function per rule of congestion-tuning.md §7);
- propose.py: propose_port / propose_group -> Advice (one bounded Proposal, NIC/NCCL Recommendations, notes);
- bounds.py: the physics and policy bounds a proposal never leaves;
- kpis.py + verify.py: port_kpis / group_kpis before and after, verify -> Check, admit(proposal, ledger) -> Admission.
"""
