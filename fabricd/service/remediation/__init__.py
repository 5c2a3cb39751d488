"""Remediation: from findings to guarded port actions and tickets, the records kept true against the switches, and
what people ask of it. wiring.py builds the parts; docs/architecture.md draws the flow."""
