"""Rebuilding graphs from the log: reading `emgas.graph-events`
and folding it with the same projector the live worker uses
(`state.projector.PartitionState`)."""
