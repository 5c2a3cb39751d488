"""Tuning as math over the topology: link classes, PFC headroom, ECN/DCQCN, DLB, DR-generated CNP, watchdogs."""
