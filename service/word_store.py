"""Word vectors kept on disk, so a word is encoded once per machine, not
once per process: a worker that restarts or takes a partition over finds
the vectors of the words it has seen before (`service.semantic`).

One SQLite file per model (its name carries the model's identity, so
vectors of another model are never read), word -> 384 float32, shared by
every process on the machine (SQLite's own locking; a busy file waits, a
broken or unwritable one is reported once and the cache runs in memory
only). Nothing in it is graph state: deleting it costs encoding again.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

DIMENSIONS = 384
_CHUNK = 500  # words per SELECT (SQLite's host parameter limit is 999 on old builds)
MMAP_BYTES = 256 * 2**20  # address space, not memory: the pages read are the OS's page cache


class WordStore:
    """word -> unit vector (float32), in the SQLite file at `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(path), timeout=10.0, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            # Read through a memory map: a taken-over graph's 2,700 vectors in
            # 12-15 ms instead of 23-40 (each row spans pages: 1.5 kB a vector).
            db.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
            db.execute("CREATE TABLE IF NOT EXISTS vectors (word TEXT PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID")
            self._db = db
        except (OSError, sqlite3.Error) as exc:
            log.warning("word vectors are not kept on disk (%s: %s): each process encodes its words again", path, exc)

    def get(self, words: list[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those of `words` that have one."""
        found: dict[str, np.ndarray] = {}
        if self._db is None or not words:
            return found
        with self._lock:
            try:
                for start in range(0, len(words), _CHUNK):
                    chunk = words[start:start + _CHUNK]
                    marks = ",".join("?" * len(chunk))
                    for word, blob in self._db.execute(f"SELECT word, vector FROM vectors WHERE word IN ({marks})", chunk):
                        if len(blob) == DIMENSIONS * 4:
                            found[word] = np.frombuffer(blob, dtype=np.float32)
            except sqlite3.Error as exc:
                self._give_up(exc)
        return found

    def put(self, vectors: dict[str, np.ndarray]) -> None:
        if self._db is None or not vectors:
            return
        rows = [(word, np.asarray(vector, dtype=np.float32).tobytes()) for word, vector in vectors.items()]
        with self._lock:
            try:
                self._db.execute("BEGIN")
                self._db.executemany("INSERT OR IGNORE INTO vectors (word, vector) VALUES (?, ?)", rows)
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._give_up(exc)

    def _give_up(self, exc: sqlite3.Error) -> None:
        log.warning("word vectors are no longer kept on disk (%s: %s)", self.path, exc)
        db, self._db = self._db, None
        if db is not None:
            db.close()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
