"""The fabric twin: gNMI, eAPI and SSH endpoints with fault injection (imports `topology` only)."""
