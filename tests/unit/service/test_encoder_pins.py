"""The encoder's weights and tokenizer are pinned by sha256: a changed file is
refused with one line, and semantic seeds are off rather than run on unknown
weights. Every file changed here is a doctored copy in a temporary folder."""

import functools
import hashlib
import logging
import shutil
import threading

import pytest

from emgas.service import encoder as enc


@pytest.fixture
def fresh_encoder_caches():
    caches = (enc.encoder, enc._optional_encoder, enc._usable, enc.refusal)
    for cache in caches:
        cache.cache_clear()
    yield
    for cache in caches:
        cache.cache_clear()


def installed_files():
    if not enc.available():
        pytest.skip("emgas[dense] is not installed: no files to copy")
    return (
        enc._package_dir(enc.MODEL_PACKAGE) / "model.onnx",
        enc._package_dir(enc.TOKENIZER_PACKAGE) / enc.TOKENIZER_FILE,
    )


@pytest.mark.parametrize(
    "content, accepted",
    [
        (b"weights", True),       # the digest pinned for it
        (b"weights!", False),     # one byte more
        (b"Weights", False),      # one byte changed
        (b"", False),             # emptied
    ],
)
def test_a_file_is_accepted_only_with_its_pinned_digest(tmp_path, content, accepted):
    path = tmp_path / "model.onnx"
    path.write_bytes(content)
    pinned = hashlib.sha256(b"weights").hexdigest()
    if accepted:
        assert enc.verified(path, pinned) == path
    else:
        with pytest.raises(enc.UnverifiedWeights, match="not the pinned"):
            enc.verified(path, pinned)


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(enc.UnverifiedWeights, match="missing"):
        enc.verified(tmp_path / "tokenizer.json", enc.PINNED["tokenizer.json"])


def test_the_installed_files_have_the_pinned_digests():
    model, tokenizer = installed_files()
    assert enc.sha256_of(model) == enc.PINNED["model.onnx"]
    assert enc.sha256_of(tokenizer) == enc.PINNED["tokenizer.json"]


@pytest.mark.parametrize("doctored", ["model", "tokenizer"])
def test_a_doctored_copy_is_refused_by_the_encoder(tmp_path, doctored):
    model, tokenizer = installed_files()
    copies = {"model": tmp_path / "model.onnx", "tokenizer": tmp_path / "tokenizer.json"}
    shutil.copyfile(model, copies["model"])
    shutil.copyfile(tokenizer, copies["tokenizer"])
    with copies[doctored].open("r+b") as file:  # one byte changed, the size kept
        file.seek(100)
        byte = file.read(1)
        file.seek(100)
        file.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(enc.UnverifiedWeights, match=copies[doctored].name):
        enc.Encoder(copies["model"], copies["tokenizer"])


def test_with_a_doctored_tokenizer_the_memory_runs_without_semantic_seeds(
    tmp_path, monkeypatch, caplog, fresh_encoder_caches
):
    model, tokenizer = installed_files()
    model_dir, tokenizer_dir = tmp_path / "model", tmp_path / "tokenizer"
    (tokenizer_dir / enc.TOKENIZER_FILE).parent.mkdir(parents=True)
    model_dir.mkdir()
    (model_dir / "model.onnx").symlink_to(model)  # the real weights, unchanged
    text = tokenizer.read_text(encoding="utf-8")
    (tokenizer_dir / enc.TOKENIZER_FILE).write_text(text.replace('"[UNK]"', '"[UNK ]"', 1), encoding="utf-8")
    dirs = {enc.MODEL_PACKAGE: model_dir, enc.TOKENIZER_PACKAGE: tokenizer_dir}
    monkeypatch.setattr(enc, "_package_dir", lambda name: dirs[name])
    with caplog.at_level(logging.WARNING, logger=enc.__name__):
        assert enc.optional_encoder() is None
        assert enc.optional_encoder() is None  # decided once, said once
    refusals = [r for r in caplog.records if r.name == enc.__name__]
    assert len(refusals) == 1
    assert "semantic seeds off" in refusals[0].getMessage()
    assert "tokenizer.json" in refusals[0].getMessage()
    assert "\n" not in refusals[0].getMessage()


def test_with_a_doctored_model_the_dense_baselines_are_skipped_with_the_reason(
    tmp_path, monkeypatch, fresh_encoder_caches
):
    from emgas.tools import evaluation

    _, tokenizer = installed_files()
    (tmp_path / "model.onnx").write_bytes(b"not the weights")
    dirs = {enc.MODEL_PACKAGE: tmp_path, enc.TOKENIZER_PACKAGE: tokenizer.parents[len(enc.TOKENIZER_FILE.parts) - 1]}
    monkeypatch.setattr(enc, "_package_dir", lambda name: dirs[name])
    names, skipped = evaluation._runnable(())
    assert "dense" not in names and "emgas" in names
    assert "not the pinned ones" in skipped["dense"] and "model.onnx" in skipped["dense"]


def test_a_preloaded_encoder_is_the_one_every_later_caller_gets(monkeypatch, fresh_encoder_caches):
    loads, runs = [], []

    class Loaded:
        def encode(self, texts):
            runs.append(threading.current_thread().name)

    @functools.lru_cache(maxsize=1)
    def loaded():
        loads.append(threading.current_thread().name)
        return Loaded()

    monkeypatch.setattr(enc, "_optional_encoder", loaded)
    monkeypatch.setattr(enc, "available", lambda: True)
    monkeypatch.setattr(enc, "refusal", lambda: None)
    thread = enc.preload()
    assert not thread.daemon  # an exit waits for the load: onnxruntime aborts a process that exits mid-build
    thread.join()
    assert enc.optional_encoder() is enc.optional_encoder()
    assert loads == ["emgas-encoder"] and runs == ["emgas-encoder"]  # loaded once, and run once before any query


def test_a_preload_that_fails_is_quiet_and_left_to_the_next_caller(monkeypatch, caplog, fresh_encoder_caches):
    calls = []

    def failing():
        calls.append(1)
        raise RuntimeError("no session")

    escaped = []
    monkeypatch.setattr(threading, "excepthook", escaped.append)
    monkeypatch.setattr(enc, "_optional_encoder", failing)
    monkeypatch.setattr(enc, "available", lambda: True)
    monkeypatch.setattr(enc, "refusal", lambda: None)
    with caplog.at_level(logging.DEBUG, logger=enc.__name__):
        enc.preload().join()
    assert escaped == [] and "loading the encoder ahead failed" in caplog.text
    with pytest.raises(RuntimeError, match="no session"):  # the next caller meets the failure itself
        enc.optional_encoder()
    assert len(calls) == 2


@pytest.mark.parametrize("installed, why", [(False, None), (True, "model.onnx has sha256 0123…, not the pinned …")])
def test_an_encoder_missing_or_refused_is_not_loaded_ahead(monkeypatch, fresh_encoder_caches, installed, why):
    loads = []
    monkeypatch.setattr(enc, "_optional_encoder", lambda: loads.append(1))
    monkeypatch.setattr(enc, "available", lambda: installed)
    monkeypatch.setattr(enc, "refusal", lambda: why)
    enc.preload().join()
    assert loads == []  # its one line is `_usable`'s, said once whoever asks first


def test_the_installed_files_are_hashed_once_per_process(monkeypatch, fresh_encoder_caches):
    # The warm-up asks `refusal` before it builds the encoder: a second hash
    # of the 23 MB model was 15-25 ms of every worker's start.
    model, tokenizer = installed_files()
    hashed = []
    real = enc.sha256_of
    monkeypatch.setattr(enc, "sha256_of", lambda path: hashed.append(path.name) or real(path))
    assert enc.refusal() is None
    enc.Encoder()
    assert sorted(hashed) == sorted([model.name, tokenizer.name])


def test_the_installed_files_refused_refuse_the_encoder(monkeypatch, fresh_encoder_caches):
    installed_files()
    monkeypatch.setattr(enc, "refusal", lambda: "model.onnx has sha256 0123…, not the pinned 4567…: refused")
    with pytest.raises(enc.UnverifiedWeights, match="not the pinned"):
        enc.Encoder()


def test_the_encoder_on_demand_is_built_by_its_first_encode_only(monkeypatch, fresh_encoder_caches):
    # A worker's warm-up and its queries hold it without building it: a takeover
    # whose words all have vectors on disk answers before any session is built.
    loads = []

    class Loaded:
        def encode(self, texts):
            return list(texts)

    monkeypatch.setattr(enc, "available", lambda: True)
    monkeypatch.setattr(enc, "refusal", lambda: None)
    monkeypatch.setattr(enc, "encoder", lambda: loads.append(1) or Loaded())
    held = enc.on_demand()
    assert held is not None and held is enc.on_demand() and loads == []
    assert held.encode(["a", "b"]) == ["a", "b"] and held.encode(["c"]) == ["c"]
    assert loads == [1]


@pytest.mark.parametrize("installed, why, said", [
    (False, None, "not installed"),
    (True, "model.onnx has sha256 0123…, not the pinned …", "semantic seeds off"),
])
def test_no_encoder_on_demand_when_missing_or_refused_said_once(monkeypatch, caplog, fresh_encoder_caches, installed, why, said):
    monkeypatch.setattr(enc, "available", lambda: installed)
    monkeypatch.setattr(enc, "refusal", lambda: why)
    monkeypatch.setattr(enc, "encoder", lambda: pytest.fail("built"))
    with caplog.at_level(logging.INFO, logger=enc.__name__):
        assert enc.on_demand() is None and enc.on_demand() is None and enc.optional_encoder() is None
    lines = [r.getMessage() for r in caplog.records if r.name == enc.__name__]
    assert len(lines) == 1 and said in lines[0]


def test_the_encoder_is_preloaded_once_per_process(monkeypatch):
    started = []
    monkeypatch.setattr(enc, "preload", lambda: started.append(1) or "thread")
    enc.preload_once.cache_clear()
    try:
        assert enc.preload_once() == enc.preload_once() == "thread" and started == [1]
    finally:
        enc.preload_once.cache_clear()


@pytest.mark.parametrize("semantic, started", [(True, 1), (False, 0)])
def test_a_worker_builds_the_encoder_ahead_only_for_semantic_seeds(monkeypatch, semantic, started):
    from emgas.processors.activation import ActivationParams
    from emgas.service import retrieval

    calls = []
    monkeypatch.setattr(retrieval, "preload_once", lambda: calls.append(1))
    retrieval.build_encoder_ahead(ActivationParams(semantic=semantic))
    assert len(calls) == started


def test_the_encoders_status_asks_nothing_that_takes_time(monkeypatch, fresh_encoder_caches):
    # A worker's /health reads it on its event loop: no hash, no session built by asking.
    monkeypatch.setattr(enc, "refusal", lambda: pytest.fail("hashed"))
    monkeypatch.setattr(enc, "encoder", lambda: pytest.fail("built"))
    assert enc.status() == "not built"
    monkeypatch.setattr(enc, "available", lambda: False)
    assert enc.on_demand() is None and enc.status() == "refused"


def test_the_encoders_status_is_built_once_its_session_is(monkeypatch, fresh_encoder_caches):
    monkeypatch.setattr(enc, "available", lambda: True)
    monkeypatch.setattr(enc, "refusal", lambda: None)
    monkeypatch.setattr(enc, "encoder", lambda: object())
    assert enc.on_demand() is not None and enc.status() == "not built"  # usable, not built by being held
    enc.optional_encoder()
    assert enc.status() == "built"
