"""Jobs in the service and the CLI: which jobs a finding hits (`annotate`), how each job's ports look now
(`report`), and the job map the service keeps fresh (`source`). The model itself is `topology.jobs`."""
