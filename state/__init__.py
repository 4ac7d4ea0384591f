"""A partition's state: its store (RocksDB or memory), the records over it,
the in-memory views of its graph versions, and the fold that applies the
log's events to them (`projector`, with each graph event's rule in `rules`).
Nothing here reads a file, a clock or the environment but the store.
"""
