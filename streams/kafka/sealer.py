"""A worker's sealing: data keys made, written, used and erased (`processors.sealing`).

- A turn's `turn_ingested` event is sealed under a key of its own, a
  snapshot's parts under one key per writing. The keys of a batch's turns
  of one graph are written as one key set to the key topic, in the
  graph's partition, and acknowledged before the records they seal are
  sent, so whoever reads those records can find their keys.
- The records the apply agent takes are opened with the worker's ring
  (`replay.keyring`), which holds the keys it wrote and those it read,
  and the bytes of the turns it sealed until it reads them back.
- Applying a forget erases the forgotten turns' keys at once (each key
  set holding one is written again without it, or a tombstone when none
  is left), and the keys of the graph's snapshots written before the
  forget once a checkpoint lists a snapshot written after it: recovery
  starts from the latest checkpoint, so it never needs a snapshot whose
  key is gone. A caught-up partition erases what a stopped worker did not
  (`reconcile`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import defaultdict
from typing import Any, Awaitable, Callable

from emgas.processors.events import Checkpoint, Forget, Snapshot
from emgas.processors.sealing import (
    KEY_BYTES, NONCE_BYTES, Envelope, KeyEncryptionKey, key_record_key, key_set_of, seal, snapshot_key_id,
    snapshot_of_key_id, turn_key_id, turn_of_key_id,
)
from emgas.replay.keyring import KeyRing
from emgas.replay.reader import partition_of

log = logging.getLogger(__name__)
ROLL_KEY = b"\x00roll"  # no graph's: graph ids hold no control character
ROLL_MARGIN_S = 1.0
# (topic, key, value or None for a tombstone, partition) -> the future of its acknowledgement
Produce = Callable[[str, bytes, bytes | None, int], Awaitable[Any]]


class Sealer:
    """Seals what a worker writes and erases what a forget names; `kek`
    None: it seals nothing (`EMGAS_SEAL=false`) but still opens and erases."""

    def __init__(self, kek: KeyEncryptionKey | None, keys: KeyRing, topic: str, partitions: int,
                 produce: Produce, roll_after_s: float = 3600.0, reads_back: bool = True) -> None:
        self.kek, self.keys, self.topic, self.partitions = kek, keys, topic, partitions
        self.reads_back = reads_back  # it folds what it seals (a worker): its ring keeps the bytes sealed
        self._produce = produce
        self.roll_after_s = roll_after_s  # the key topic's segment.ms, in s: see `_rewrite`
        self._rolls: dict[int, asyncio.TimerHandle] = {}  # partition -> its roll, pending
        # (graph, as_of) -> key id and data key of the snapshot whose parts are being sent
        self._snapshot_keys: dict[tuple[str, int], tuple[str, bytes]] = {}
        self._forgetful: dict[int, set[str]] = {}  # partition -> graphs forgotten from (their old snapshots go)

    async def seal_turns(self, turns: list[tuple[str, str, str, bytes]]) -> list[bytes]:
        """(graph id, turn id, event time, turn_ingested bytes) -> the sealed
        events; each graph's keys written as one key set and acknowledged first."""
        if self.kek is None:
            return [event for *_, event in turns]
        batch = os.urandom(6).hex()
        made = []
        sets: dict[tuple[str, bytes], dict[str, bytes]] = {}
        for n, (graph_id, turn_id, timestamp, event) in enumerate(turns):
            envelope = Envelope(graph_id, turn_key_id(turn_id, batch, n), "turn_ingested", timestamp)
            data_key = os.urandom(KEY_BYTES)
            sets.setdefault((graph_id, envelope.key), {})[envelope.key_id] = data_key
            made.append((envelope, event, data_key))
        await self._write_sets(sets)
        if self.reads_back:
            for envelope, event, _ in made:
                self.keys.remember(envelope.key_id, event)
        return [seal(event, envelope, data_key, os.urandom(NONCE_BYTES)) for envelope, event, data_key in made]

    async def seal_snapshot_part(self, part: Snapshot, value: bytes) -> bytes:
        """A snapshot part sealed under its snapshot's key (made and written
        with its first part sent)."""
        if self.kek is None:
            return value
        at = (part.graph_id, part.as_of)
        if at not in self._snapshot_keys:
            key_id = snapshot_key_id(part.as_of, os.urandom(6).hex())
            self._snapshot_keys[at] = (key_id, os.urandom(KEY_BYTES))
            record_key = key_record_key(part.graph_id, key_set_of(key_id))
            await self._write_sets({(part.graph_id, record_key): {key_id: self._snapshot_keys[at][1]}})
        key_id, data_key = self._snapshot_keys[at]
        if part.part == part.parts - 1:
            del self._snapshot_keys[at]
        envelope = Envelope(part.graph_id, key_id, "snapshot", part.timestamp.isoformat())
        return seal(value, envelope, data_key, os.urandom(NONCE_BYTES))

    async def _write_sets(self, sets: dict[tuple[str, bytes], dict[str, bytes]]) -> None:
        """Key sets ((graph, record key) -> key id -> data key), written and acknowledged."""
        assert self.kek is not None
        acks = []
        for (graph_id, key), keys in sets.items():
            partition = self._partition(graph_id)
            value = self.kek.seal_keys(key, keys, os.urandom(NONCE_BYTES))
            self.keys.add(partition, key, value)
            acks.append(await self._produce(self.topic, key, value, partition))
        await asyncio.gather(*acks)

    def _partition(self, graph_id: str) -> int:
        return partition_of(graph_id.encode(), self.partitions)

    async def forgotten(self, forget: Forget) -> None:
        """A forget applied: its turns' keys erased now, its graph's older
        snapshots' keys once a checkpoint lists a newer one (`checkpointed`)."""
        partition = self._partition(forget.graph_id)
        erased = await self.erase_turns(forget.graph_id, None if forget.whole_graph else set(forget.turn_ids))
        self._forgetful.setdefault(partition, set()).add(forget.graph_id)
        log.info("forget of graph %r: %d turn keys erased", forget.graph_id, erased)

    async def erase_turns(self, graph_id: str, turn_ids: set[str] | None) -> int:
        """Erase the keys of every sealing of `turn_ids` of the graph (None:
        of all its turns), read to the key partition's end first; how many."""
        partition = self._partition(graph_id)
        await self.keys.refresh(partition)
        return await self._erase_keys(partition, graph_id, "turn/",
                                      lambda key_id: turn_ids is None or turn_of_key_id(key_id) in turn_ids)

    async def _erase_keys(self, partition: int, graph_id: str, prefix: str, erased: Callable[[str], bool]) -> int:
        """Each of the graph's key sets (whose id starts with `prefix`)
        holding a key `erased` says goes is written again without them, or
        erased whole when none is left; how many keys went."""
        rewritten: dict[bytes, dict[str, bytes] | None] = {}
        gone = 0
        for key in self.keys.graph_sets(partition, graph_id, prefix):
            held = self.keys.keys_of(partition, key)
            kept = {key_id: data_key for key_id, data_key in held.items() if not erased(key_id)}
            if len(kept) < len(held):
                rewritten[key] = kept or None
                gone += len(held) - len(kept)
        await self._rewrite(partition, rewritten)
        return gone

    async def checkpointed(self, checkpoint: Checkpoint) -> None:
        """A checkpoint is in the log: of each graph ever forgotten from, the
        snapshots older than the one it lists are erased (recovery starts
        from the latest checkpoint; those may hold forgotten turns)."""
        listed = {loc.graph_id: loc.as_of for loc in checkpoint.snapshots}
        await self._erase_snapshots_before(checkpoint.partition, listed)

    async def _erase_snapshots_before(self, partition: int, listed: dict[str, int]) -> None:
        graphs = self._forgetful.get(partition, set()) & set(listed)
        if not graphs:
            return
        await self.keys.refresh(partition)
        older: dict[bytes, dict[str, bytes] | None] = {
            k: None for graph_id in sorted(graphs) for k in self.keys.graph_sets(partition, graph_id, "snapshot/")
            if (snapshot_of_key_id(k.partition(b"\x00")[2].decode()) or 0) < listed[graph_id]
        }
        await self._rewrite(partition, older)
        if older:
            log.info("partition %s: %d snapshot keys of graphs forgotten from erased", partition, len(older))

    async def reconcile(self, partition: int, forgotten: Callable[[str], set[str]],
                        listed: dict[str, int]) -> None:
        """After a catch-up, what a forget erases, in case the worker that
        applied it stopped first: the keys of every sealing of the turns
        `forgotten(graph)` names, and of those graphs' snapshots older than
        the ones the latest checkpoint `listed`."""
        await self.keys.refresh(partition)
        forgetful = self._forgetful.setdefault(partition, set())
        erased = 0
        for graph_id in sorted(self.keys.graphs(partition)):
            turns = forgotten(graph_id)
            if turns:
                forgetful.add(graph_id)
                erased += await self._erase_keys(partition, graph_id, "turn/",
                                                 lambda key_id: turn_of_key_id(key_id) in turns)  # noqa: B023
        await self._erase_snapshots_before(partition, listed)
        if erased:
            log.info("partition %s: %d keys of turns forgotten before erased", partition, erased)

    async def _rewrite(self, partition: int, sets: dict[bytes, dict[str, bytes] | None]) -> None:
        """Key sets written again with fewer keys (None: a tombstone). Kafka
        compacts only segments it has rolled, and it rolls one only when a
        record comes after its `segment.ms`: so a record of no set of its own
        (`ROLL_KEY`, a tombstone too) follows a little after that, and the
        older versions go within the topic's `max.compaction.lag.ms` of it,
        however quiet the partition."""
        if not sets:
            return
        kek = self.keys.kek  # the ring's: a worker that no longer seals still erases what was sealed
        acks = []
        for key, keys in sets.items():
            value = None if keys is None or kek is None else kek.seal_keys(key, keys, os.urandom(NONCE_BYTES))
            self.keys.add(partition, key, value)
            acks.append(await self._produce(self.topic, key, value, partition))
        await asyncio.gather(*acks)
        if partition not in self._rolls:
            loop = asyncio.get_running_loop()
            self._rolls[partition] = loop.call_later(self.roll_after_s + ROLL_MARGIN_S, self._roll_soon, partition)

    def _roll_soon(self, partition: int) -> None:
        task = asyncio.ensure_future(self._roll(partition))
        task.add_done_callback(lambda done: done.cancelled() or done.exception())  # a stopped producer: next time

    async def _roll(self, partition: int) -> None:
        self._rolls.pop(partition, None)
        await (await self._produce(self.topic, ROLL_KEY, None, partition))
        log.debug("key partition %s rolled, so its erased keys can be compacted away", partition)


def by_partition(records: list[Any]) -> dict[int, list[int]]:
    """The indices of `records` per partition, in order."""
    found: dict[int, list[int]] = defaultdict(list)
    for k, record in enumerate(records):
        found[record.partition].append(k)
    return found


async def opened(keys: KeyRing, records: list[Any]) -> list[bytes]:
    """The values of `records` (of any partitions), the sealed ones opened."""
    values = [record.value for record in records]
    for partition, indices in by_partition(records).items():
        part = await keys.open(partition, [values[k] for k in indices], lambda n: int(records[indices[n]].timestamp or 0))  # noqa: B023
        for k, value in zip(indices, part):
            values[k] = value
    return values
