"""WordNet's parse kept in an SQLite file and read on demand (`service.wordnet`).

Held in memory, the parse is about 140 MB of lists, dicts and strings,
and loading it takes 0.23 s of a worker's start (a takeover's) whatever
its queries look up. Here each synset (its lemmas, its pointers) and each
lemma (its senses by part of speech) is a row, its value marshal'd, read
when a query first needs it and kept in a bounded cache; the exception
lists of morphology (a few thousand words) are read whole. Opening the
file takes about a millisecond.

The file is written once per machine from the parse, to a temporary name
and renamed (processes starting together never read half of one), under
the cache directory, named by a hash of the format's version, the Python
version (marshal's format is the interpreter's) and the source files'
sizes. A file that cannot be read is written again, said in the log.
CC-CEDICT's file (`service.cedict`) is made and read with the same pieces
(`Database`, `Table`, `write_tables`).
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import os
import sqlite3
import sys
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

FORMAT = 1
# Rows kept in memory per table: a wide category walked down three steps
# reads a few thousand synsets; this keeps the ones queries use, not all 117,000.
CACHED_ROWS = 20_000
_BATCH = 500  # keys per statement (SQLite allows 32,766 parameters)
_MISSING = object()  # a key the file does not hold
_UNREAD = object()  # a key not read yet
Parsed = tuple[list, list, dict, dict]  # `service.wordnet._parse`: words, rel, index, exceptions


class Table:
    """One table of the file as a read-only mapping (`[key]`, `.get`), rows
    read on first use, or many at once (`fill`), and the most recently
    used `CACHED_ROWS` kept."""

    def __init__(self, read: Callable[[list[Any]], dict[Any, Any]]) -> None:
        self._read = read  # keys -> {key: value} of those present
        self._rows: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def fill(self, keys: Iterable[Any]) -> None:
        """Read the rows of `keys` not held yet, in a few statements (a walk
        down a category reads its synsets a level at a time, not one by one)."""
        with self._lock:
            wanted = list(dict.fromkeys(k for k in keys if k not in self._rows))
        for start in range(0, len(wanted), _BATCH):
            chunk = wanted[start:start + _BATCH]
            found = self._read(chunk)
            self._keep({k: found.get(k, _MISSING) for k in chunk})

    def get(self, key: Any, default: Any = None) -> Any:
        with self._lock:
            found = self._rows.get(key, _UNREAD)
            if found is not _UNREAD:
                self._rows.move_to_end(key)
        if found is _UNREAD:
            found = self._read([key]).get(key, _MISSING)
            self._keep({key: found})
        return default if found is _MISSING else found

    def __getitem__(self, key: Any) -> Any:
        found = self.get(key, _MISSING)
        if found is _MISSING:
            raise KeyError(key)
        return found

    def _keep(self, rows: dict[Any, Any]) -> None:
        with self._lock:
            self._rows.update(rows)
            while len(self._rows) > CACHED_ROWS:
                self._rows.popitem(last=False)


class Database:
    """The file, opened read-only; safe to read from several threads."""

    def __init__(self, path: Path, file_format: int = FORMAT, what: str = "WordNet") -> None:
        # as_uri quotes what a URI must not hold bare (a space, "?", "#", "%").
        self._connection = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        if self._values("SELECT key, value FROM meta WHERE key IN ({})", ["format"]).get("format") != file_format:
            raise sqlite3.DatabaseError(f"not a {what} file of this format")

    def table(self, sql: str) -> Table:
        """The rows `sql` finds (a SELECT of key and value with `IN ({})` to fill), as a `Table`."""
        return Table(lambda keys: self._values(sql, keys))

    def _values(self, sql: str, keys: list[Any]) -> dict[Any, Any]:
        """{key: its value unmarshalled} of the rows of `keys` that `sql` (a
        SELECT of key and value with `IN ({})` to fill) finds."""
        with self._lock:
            rows = self._connection.execute(sql.format(",".join("?" * len(keys))), keys).fetchall()
        return {key: marshal.loads(raw) for key, raw in rows}

    def tables(self) -> tuple[Table, Table, Table, dict]:
        """(words, rel, index, exceptions) as `service.wordnet.WordNet` reads them."""
        with self._lock:
            rows = self._connection.execute("SELECT pos, word, bases FROM exceptions").fetchall()
        exceptions: dict[str, dict[str, tuple[str, ...]]] = {}
        for pos, word, bases in rows:
            exceptions.setdefault(pos, {})[word] = marshal.loads(bases)
        return (
            self.table("SELECT id, words FROM synsets WHERE id IN ({})"),
            self.table("SELECT id, rel FROM synsets WHERE id IN ({})"),
            self.table("SELECT lemma, senses FROM lemmas WHERE lemma IN ({})"),
            exceptions,
        )


def path_for(cache_dir: Path, fingerprint: object, name: str = "wordnet", file_format: int = FORMAT) -> Path:
    key = hashlib.sha1(repr((file_format, sys.version_info[:2], fingerprint)).encode()).hexdigest()[:12]
    return cache_dir / f"{name}-{key}.sqlite3"


def opened(cache_dir: Path, fingerprint: object, parse: Callable[[], Parsed]) -> tuple[Table, Table, Table, dict]:
    """The tables of the file for `fingerprint`, written from `parse()` first
    when there is none (or it cannot be read)."""
    return read_or_written(
        path_for(cache_dir, fingerprint), lambda path: Database(path).tables(), lambda path: write(path, parse()), "WordNet",
    )


def read_or_written(path: Path, read: Callable[[Path], T], write_file: Callable[[Path], None], what: str) -> T:
    """`read(path)` of the file at `path`; where there is none, or it cannot
    be read (said in the log), `write_file(path)` first."""
    if path.exists():
        try:
            return read(path)
        except sqlite3.DatabaseError as err:
            log.warning("the %s file %s is unreadable (%s): parsing again", what, path, err)
    write_file(path)
    return read(path)


def write(path: Path, parsed: Parsed) -> None:
    """The file of `parsed`, at `path`."""
    words, rel, index, exceptions = parsed
    write_tables(path, FORMAT, (
        "CREATE TABLE synsets (id INTEGER PRIMARY KEY, words BLOB, rel BLOB);"
        "CREATE TABLE lemmas (lemma TEXT PRIMARY KEY, senses BLOB) WITHOUT ROWID;"
        "CREATE TABLE exceptions (pos TEXT, word TEXT, bases BLOB, PRIMARY KEY (pos, word)) WITHOUT ROWID;"
    ), [
        ("INSERT INTO synsets VALUES (?, ?, ?)",
         ((s, marshal.dumps(w), marshal.dumps(r)) for s, (w, r) in enumerate(zip(words, rel)))),
        ("INSERT INTO lemmas VALUES (?, ?)", ((w, marshal.dumps(s)) for w, s in index.items())),
        ("INSERT INTO exceptions VALUES (?, ?, ?)",
         ((pos, w, marshal.dumps(b)) for pos, table in exceptions.items() for w, b in table.items())),
    ])


def write_tables(path: Path, file_format: int, schema: str, rows: Iterable[tuple[str, Iterable[tuple[Any, ...]]]]) -> None:
    """A file at `path` of the tables `schema` creates (and a meta table
    naming `file_format`), filled by `rows` (each an INSERT and its rows):
    written beside it, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.unlink(missing_ok=True)
    with sqlite3.connect(tmp) as db:
        db.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB);" + schema)
        db.execute("INSERT INTO meta VALUES ('format', ?)", (marshal.dumps(file_format),))
        for insert, values in rows:
            db.executemany(insert, values)
    db.close()
    os.replace(tmp, path)
