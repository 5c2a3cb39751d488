"""Units every layer shares: fabricd keeps time as unix nanoseconds (gNMI's timestamps), so one constant converts."""

NS = 1_000_000_000  # nanoseconds per second
