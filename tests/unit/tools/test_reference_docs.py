"""docs/reference/ is generated from the code (`make docs`) and kept up to date."""

from typing import get_args

import pytest
from pydantic import BaseModel
from pydantic._internal._docs_extraction import extract_docstrings_from_cls

from emgas.processors.events import GraphEvent, Reply
from emgas.streams.settings import Settings
from emgas.tools import reference


@pytest.mark.parametrize("name", sorted(reference.PAGES))
def test_each_generated_page_is_up_to_date(name):
    page = reference.OUT / name
    assert page.exists(), f"docs/reference/{name} is missing: run `make docs`"
    assert page.read_text() == reference.PAGES[name](), f"docs/reference/{name} is stale: run `make docs`"


def _variables(model: type[BaseModel], prefix: str) -> list[str]:
    found = []
    for name, field in model.model_fields.items():
        found.append(prefix + name.upper())
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            found += _variables(field.annotation, prefix + name.upper() + "__")
    return found


def test_every_setting_nested_ones_included_is_in_the_settings_page():
    page = reference.settings_page()
    variables = _variables(Settings, "EMGAS_")
    assert "EMGAS_MAX_FUTURE_S" in variables and "EMGAS_GRAPH__DECAY__HALF_LIFE_S" in variables
    assert [v for v in variables if f"| `{v}` |" not in page] == []


def test_every_graph_event_and_reply_type_is_in_the_wire_format_page():
    page = reference.wire_format_page()
    models = [*get_args(get_args(GraphEvent)[0]), *get_args(get_args(Reply)[0])]
    missing = [m.__name__ for m in models if f"### {m.__name__} (`{m.model_fields['type'].default}`" not in page]
    assert missing == []


def test_a_setting_without_a_docstring_fails_the_generator():
    class Knobs(BaseModel):
        documented: int = 1
        """A knob."""
        undocumented: int = 2

    with pytest.raises(reference.MissingDescription, match="EMGAS_UNDOCUMENTED"):
        list(reference._settings_rows(Knobs, "EMGAS_"))


def test_the_check_mode_names_a_stale_page(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(reference, "OUT", tmp_path)
    assert reference.main([]) == 0
    (tmp_path / "metrics.md").write_text("old\n")
    assert reference.stale_pages(tmp_path) == ["metrics.md"]


def test_the_settings_docstrings_are_read_as_pydantic_reads_them():
    # The generator reads them itself: the models do not ask pydantic to
    # (`use_attribute_docstrings` parses each model's module at every import).
    models = reference._settings_models()
    assert Settings in models and len(models) >= 6
    for model in models:
        assert not model.model_config.get("use_attribute_docstrings"), model.__name__
        expected: dict[str, str] = {}
        for cls in reversed(model.__mro__):
            if isinstance(cls, type) and issubclass(cls, BaseModel) and not cls.__module__.startswith("pydantic"):
                expected.update(extract_docstrings_from_cls(cls, use_inspect=True))
        assert reference.attribute_docstrings(model) == expected, model.__name__
        assert set(expected) >= set(model.model_fields), model.__name__
