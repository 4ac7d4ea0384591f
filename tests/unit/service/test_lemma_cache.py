"""The lemmatiser's dictionaries kept decoded on disk (`service.lemma_cache`)."""

from simplemma.strategies.dictionaries import dictionary_factory

from emgas.service import lemma_cache


def test_a_cached_dictionary_is_the_decoded_one_and_is_decoded_once(tmp_path):
    decoded = []

    def decode(language):
        decoded.append(language)
        return lemma_cache._simplemma_loader()(language)

    load = lemma_cache.cached_loader(tmp_path, decode)
    first, again = load("en"), load("en")
    assert first == again == lemma_cache._simplemma_loader()("en") and decoded == ["en"]
    assert lemma_cache.cache_file(tmp_path, "en").exists()


def test_an_unreadable_file_is_decoded_again_and_rewritten(tmp_path):
    lemma_cache.cache_file(tmp_path, "en").write_bytes(b"not marshal")
    load = lemma_cache.cached_loader(tmp_path, lambda language: {b"dogs": b"dog"})
    assert load("en") == {b"dogs": b"dog"}
    assert lemma_cache.cached_loader(tmp_path, lambda language: {})("en") == {b"dogs": b"dog"}


def test_a_folder_that_cannot_be_written_still_gives_the_dictionary(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert lemma_cache.cached_loader(blocked / "sub", lambda language: {b"a": b"b"})("en") == {b"a": b"b"}


def test_install_routes_simplemma_through_the_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(dictionary_factory, "_load_dictionary_from_disk", lemma_cache._simplemma_loader())
    lemma_cache.install(tmp_path)
    dictionary_factory.DefaultDictionaryFactory()._get_dictionary_uncached("en")
    assert lemma_cache.cache_file(tmp_path, "en").exists()


def test_installing_twice_wraps_simplemmas_own_loader_not_the_last_install(tmp_path, monkeypatch):
    monkeypatch.setattr(dictionary_factory, "_load_dictionary_from_disk", lemma_cache._simplemma_loader())
    lemma_cache.install(tmp_path / "first")
    lemma_cache.install(tmp_path / "second")
    dictionary_factory.DefaultDictionaryFactory()._get_dictionary_uncached("en")
    assert lemma_cache.cache_file(tmp_path / "second", "en").exists()
    assert not lemma_cache.cache_file(tmp_path / "first", "en").exists()
