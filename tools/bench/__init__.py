"""`emgas bench`: the speed figures of this memory, measured on this machine.

Every figure is the median of several repeats, with their min and max:

- extract_turns_per_s: the product's extraction (`processors.extract.ingest`)
  on chat turns, one core; yake_reference_turns_per_s: the `yake` package
  (n=3, top 10) on the same turns in the same run.
- fold_events_per_s: the fold alone (`PartitionState.apply` and its
  commits, as replay calls them) of graph events already decoded in memory
  into a fresh RocksDB state: fold_events events of synthetic LoCoMo-shaped
  conversations (`tools.synthetic`: sessions of turns minutes apart,
  days between sessions), put through `emgas.testing.LocalLog` so the decay
  ticks and consolidations due are among them; fold_extract_turns_per_s:
  extraction of those same turns, so fold and extraction compare on
  identical turns.
- ingest_in_process_turns_per_s_en / _zh: what a worker does with a turn,
  without Kafka (extraction to the event's bytes, `extract.encode_all`;
  the graph's log decoded for the fold; the fold into RocksDB), per second,
  on language_turns synthetic English turns and as many Chinese ones
  (`tools.synthetic.CHINESE`: the same shape in jieba's dictionary words);
  ingest_in_process_zh_vs_en: each repeat's Chinese rate over its English
  one, the two measured one after the other (the `chinese_vs_english`
  limit's ratio: a machine whose speed drifts between the repeats of one
  language and the other's leaves it as it is).
- ingest_turns_per_s(_2_workers): publish -> applied and visible to
  queries, end to end on the broker (Apache Kafka, or the mock with --mock), one worker (two workers).
- passthrough_turns_per_s: the same two Kafka hops as ingest (turns topic ->
  graph-events-sized records on a second topic -> a consumer that counts
  them), by a process that neither extracts nor folds: the most ingest
  can reach on this broker; same turns count and repeats as ingest.
- query_p50_ms / query_p99_ms: in-process spreading activation, scoring and
  top-k (what a worker runs per query) on a synthetic co-occurrence-shaped
  graph (seeded; Zipf-distributed node popularity), 3 seeds drawn by
  degree; ppr_p50_ms: personalised PageRank on the same graph and seeds.
- rr_p50_ms / rr_p99_ms: query round trip through Kafka request/reply on the
  same broker against a graph of LoCoMo size; rr_worker_p50_ms: the
  worker's own time per query in those round trips (the replies'
  `timings.total_ms`); idle_worker_cpu_percent: the worker's CPU use while
  nobody talks to it.
- kafka_hop_p50_ms / kafka_hop_p99_ms: one produce -> consume hop of a small
  record on the same broker, with the worker's fetch settings, one record
  at a time (a round trip is two hops plus the worker's time).
- replay_events_per_s: rebuilding state from `emgas.graph-events`, every
  record from the first (`emgas replay --from-beginning`);
  log_read_events_per_s: reading and decoding the same records with the same
  reader, without folding them (what replay costs without the fold);
  replay_from_checkpoint_s: the default replay, from each partition's latest
  checkpoint (restoring its snapshots, then folding the tail), in seconds.
  (Before issue 35 replay_events_per_s was the default replay's: the
  tail's records over a time that included restoring the snapshots, which
  is why it looked far slower than the fold.)
- resident_bytes_per_edge: resident memory of the query structures of the
  synthetic graph, per undirected edge.
- forget_ms: applying (and committing) a request to forget one turn from
  the middle of a graph of forget_graph_turns simulated turns (decay ticks,
  consolidations, RocksDB state, a snapshot every tenth of its history):
  the graph version is re-folded without the turn from the latest fold
  point before it (`state.fold_points`: the snapshot four tenths in);
  forget_after_snapshot_ms: a turn after the graph's latest snapshot
  (nine tenths in), re-folded from that snapshot's fold point. (Until
  25 November the graph had one snapshot, nine tenths in, and a version
  kept one fold point: a middle turn was re-folded from the beginning.)
  journal_bytes_per_turn: the journal that makes it possible (every event
  applied to the graph, ticks included), per turn.

Scaling out (worker_cpu_ms_per_turn_1/_2/_3, partitions_per_worker_N,
max_unavailable_s_join/_leave): see `tools.scaling_bench`.

Taking over a partition. Both parts use one graph of synthetic turns
(`tools.synthetic`) put through `LocalLog` (its decay ticks and
consolidations included): its history once ("1x"), or that whole history
published 10 times ("10x": the 9 later copies are duplicates, which the
fold skips, so the final state is the same and the bench checks it).
Duplicates are the cheapest history to fold (a lookup each), so the
no-snapshot figures at 10x are a lower bound for a history of real
retrievals and ticks.

- recovery_in_process_s_1x / _10x: recovery alone, without Kafka or a
  process: a fresh RocksDB state restored from the log's checkpoint
  (`PartitionState.restore_checkpoint`: its snapshot parts assembled, the
  graph written, its view built, its digests checked) and the log after
  the snapshot folded; recovery_in_process_s_1x_no_snapshots / _10x_...:
  the whole log before the snapshot request folded instead (as `_fold_s`).
  recovery_in_process_turns turns (more than the live part can hold);
  every state recovered must have the same digests, or the bench fails.
- snapshot_bytes_per_edge: the graph's snapshot (the parts' compressed
  bytes, base64 removed) per edge of the graph (snapshot_graph_edges), at
  recovery_in_process_turns turns; snapshot_serialize_ms: the owner
  serving a snapshot request of that graph on a RocksDB state
  (`SnapshotWriter.serve`: content read, digests, packed, cut into parts).
- takeover_s_history_1x / _10x (and _no_snapshots): live, on a fresh
  broker per history (1 partition) whose log, named by a first worker
  (its `log_started` at offset 0, as every log's), holds the
  takeover_turns-turn graph's history: from just before a worker with no
  state (new name, new data directory, automatic snapshot rounds off)
  is started until an activation query for the graph (asked as it starts,
  waiting the client's query timeout: the worker answers it once it
  serves the partition) gets an activation reply: process start, group
  join, recovery, first answer. Without snapshots the log has no
  checkpoint; with, a worker that folded it wrote a snapshot on request
  (`emgas snapshot`) before the takeovers. Each takeover's worker is
  stopped before the next starts. recovery_s_history_* and
  recovery_records_read_history_*: the worker's own account of that
  catch-up (`/health` `recoveries`): seconds and records read.
  takeover_digests_equal: whether every takeover served the same graph.
  On Apache Kafka (the default) the full run's history is 3,000 turns
  (about 34,000 events at 10x); on the mock (`--mock`) its 5 MiB per
  partition bounds the history, so keep the quick sizes there.
- snapshot_write_s: from appending the snapshot request until its
  checkpoint is in the log (`request_snapshots`, the owner idle and
  caught up), one per history log (the same state), median of the two.

`limits` relates figures that bound each other (medians), each with its
goal: the fold should not be much slower than extraction
(fold / extract >= 0.5), replay not much slower than reading the log
(replay / log read >= 0.5), ingest not much slower than its Kafka hops
alone (ingest / passthrough >= 0.5), a round trip not much more than
two hops and the worker's time (rr / (2 hops + worker) <= 1.3), a
takeover not much slower for ten times the history with snapshots
(10x / 1x <= 1.5), and snapshots making the takeover of the long history
much faster (10x without / 10x with >= 5).
"""


from emgas.tools.bench.run import format_figures, run_bench

__all__ = ["format_figures", "run_bench"]
