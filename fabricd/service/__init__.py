"""The fabricd service: configuration, state store, safety guard, remediation, tickets, API and the daemon."""
