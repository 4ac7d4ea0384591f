"""The command's entry point: a worker's encoder starts loading before the
command line's imports, and only there (a worker whose settings leave
semantic seeds at their default)."""

import sys

import pytest

from emgas.streams.cli import entry


@pytest.mark.parametrize(("argv", "env", "preloads"), [
    (["worker"], {}, True),
    (["worker", "--loglevel", "DEBUG"], {}, True),
    (["--verbose", "worker"], {}, True),
    (["query", "--graph", "g", "hello"], {}, False),
    ([], {}, False),
    (["worker"], {"EMGAS_ACTIVATION__SEMANTIC": "false"}, False),
    (["worker"], {"emgas_activation": '{"semantic": false}'}, False),
])
def test_only_a_worker_with_default_semantic_seeds_loads_its_encoder_first(monkeypatch, argv, env, preloads):
    started, ran = [], []

    class Thread:
        def __init__(self, target, **_):
            self.target = target

        def start(self):
            started.append(self.target)

    for name in [name for name in entry.os.environ if name.upper().startswith("EMGAS_ACTIVATION")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(entry.threading, "Thread", Thread)
    monkeypatch.setattr(sys, "argv", ["emgas", *argv])
    monkeypatch.setattr("emgas.streams.cli.main.main", lambda: ran.append(True) or 0)
    assert entry.main() == 0 and ran == [True]
    assert started == ([entry._preload_encoder] if preloads else [])

