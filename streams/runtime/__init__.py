"""The worker runtime: the Faust app and its agents, recovery, serving, membership, checkpoints, metrics."""
