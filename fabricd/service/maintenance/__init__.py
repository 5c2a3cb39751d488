"""Planned maintenance: drains as plans of steps (plan.py, pure), carried out by the leader (drains.py) through
remediation's port actions, and watched by telemetry (watch.py) before the traffic returns."""
