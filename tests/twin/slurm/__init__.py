"""Against a real Slurm (tests/twin/slurm_cluster.py): the topology fabricd exports, its hostlists, the job map."""
