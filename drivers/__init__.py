"""Everything that talks to a switch: the Driver protocol and per-platform drivers (eos, sonic)."""
