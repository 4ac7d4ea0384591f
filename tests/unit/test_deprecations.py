"""Renamed and moved names still import, with a DeprecationWarning, and are the new objects."""

import importlib
import sys

import pytest


def test_memory_error_is_memory_api_error_under_its_old_name():
    from emgas.streams.interfaces import memory

    with pytest.warns(DeprecationWarning, match="MemoryApiError"):
        from emgas.streams.interfaces.memory import MemoryError as old  # noqa: A004 - the deprecated name
    assert old is memory.MemoryApiError
    assert not issubclass(memory.MemoryApiError, MemoryError)  # the builtin is no longer shadowed


def test_an_unknown_name_of_the_memory_module_is_still_an_attribute_error():
    from emgas.streams.interfaces import memory

    with pytest.raises(AttributeError, match="no_such_name"):
        memory.no_such_name  # noqa: B018


@pytest.mark.parametrize("old, new", [
    ("emgas.streams.memory", "emgas.streams.interfaces.memory"),
    ("emgas.streams.client", "emgas.streams.interfaces.client"),
    ("emgas.streams.langchain", "emgas.streams.interfaces.langchain"),
])
def test_the_old_module_paths_warn_and_give_the_new_modules(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
