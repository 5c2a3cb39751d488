"""`fabricd lab chaos`: a seeded schedule of overlapping faults, repairs, operator actions and process faults
against a running twin and fabricd, and a checker of fabricd's promises that trusts only the switches (eAPI, SSH),
the twin's fault log and fabricd's documented REST API (docs/lab.md, "Chaos"). Imports topology only, never fabricd."""
