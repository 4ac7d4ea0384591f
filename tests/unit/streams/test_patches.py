"""The patches of Faust and aiokafka internals are tied to the pinned versions."""

import re
import tomllib
from pathlib import Path

import pytest

from emgas.streams.runtime.patches import PINNED, App, TablelessManager, UnpatchableVersion, check_versions

ROOT = Path(__file__).resolve().parents[3]


def test_the_patched_versions_are_the_pinned_ones():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = dict(re.fullmatch(r"([\w-]+)==([\w.]+)", d).groups() for d in dependencies if "==" in d)
    assert {name: pins[name] for name in PINNED} == PINNED


def test_the_installed_versions_pass():
    check_versions()


@pytest.mark.parametrize("name", sorted(PINNED))
def test_another_version_is_refused_in_one_line_naming_the_library(name):
    other = {**PINNED, name: "9.9.9"}
    with pytest.raises(UnpatchableVersion) as refused:
        check_versions(other.__getitem__)
    assert f"{name} 9.9.9 is installed" in str(refused.value) and "\n" not in str(refused.value)


class _Recovery:
    def __init__(self) -> None:
        self.started = False

    async def start(self) -> None:
        self.started = True


@pytest.mark.parametrize("tables, sleeps", [(0, []), (1, [1.0])])
async def test_the_table_manager_sleeps_at_start_only_when_a_table_is_declared(monkeypatch, tables, sleeps):
    app = App("emgas-test", broker="kafka://127.0.0.1:9", fetch_max_wait_ms=100)
    manager = app.tables
    assert isinstance(manager, TablelessManager)
    for k in range(tables):
        app.Table(f"table-{k}")
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def update_channels() -> None:
        pass

    monkeypatch.setattr(manager, "sleep", sleep)
    monkeypatch.setattr(manager, "_update_channels", update_channels)
    manager._recovery = _Recovery()
    await manager.on_start()
    assert slept == sleeps and manager._recovery.started


def test_declaring_agents_and_tasks_reads_no_source_for_venusian(monkeypatch):
    import inspect

    import venusian

    def refuse(*args, **kwargs):
        raise AssertionError("venusian bookkeeping on a declaration")

    monkeypatch.setattr(venusian, "attach", refuse)
    monkeypatch.setattr(inspect, "getframeinfo", refuse)
    app = App("emgas-test", broker="kafka://127.0.0.1:9", fetch_max_wait_ms=100)
    topic = app.topic("emgas-test-topic")

    @app.agent(topic)
    async def agent(stream):  # pragma: no cover - declared, never run
        async for _ in stream:
            pass

    @app.task
    async def task():  # pragma: no cover - declared, never run
        pass

    @app.timer(1.0)
    async def timer():  # pragma: no cover - declared, never run
        pass

    assert list(app.agents) == [agent.name] and len(app._tasks) == 2  # declared as without the patch


def test_the_worker_logs_at_its_level_without_a_spinner_raising_the_root_to_debug():
    """Faust's start-up spinner set the root logger to DEBUG at --loglevel
    WARNING (so every library's debug line made a record); the worker has none."""
    import logging

    import faust

    from emgas.streams.runtime.patches import HandingOverWorker

    async def hand_over() -> None: ...

    worker = HandingOverWorker(faust.App("spinner-test"), loglevel="WARNING", quiet=True, hand_over=hand_over)
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        worker.on_setup_root_logger(root, logging.WARNING)
        assert worker.spinner is None
        assert not logging.getLogger("aiokafka.producer.producer").isEnabledFor(logging.DEBUG)
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers


def test_the_plugin_tables_read_the_entry_points_once(monkeypatch):
    from importlib import metadata

    from emgas.streams.runtime import patches

    reads = []
    monkeypatch.setattr(metadata, "entry_points", lambda: reads.append(1) or metadata.EntryPoints(()))
    patches._entry_points.cache_clear()
    try:
        app = App("emgas-test", broker="kafka://127.0.0.1:9", fetch_max_wait_ms=100)
        assert app.cache is not None and app.web is not None  # the cache backend's and web driver's tables
        import mode.utils.imports as mode_imports
        for namespace in ("faust.codecs", "faust.web.drivers", "faust.cache"):  # each table's read
            assert list(mode_imports.load_extension_class_names(namespace)) == []
        assert reads == [1]
    finally:
        patches._entry_points.cache_clear()


async def test_an_assignment_is_told_before_fausts_own_recovery_seeks():
    app = App("emgas-test", broker="kafka://127.0.0.1:9", fetch_max_wait_ms=100)
    manager = app.tables
    assert isinstance(manager, TablelessManager)
    order: list[str] = []

    async def told(assigned) -> None:
        order.append(f"told {sorted(assigned)}")

    class _Seeking:
        async def on_rebalance(self, *args) -> None:
            order.append("faust's recovery")

    async def update_channels() -> None:
        pass

    manager.on_assigned = told
    manager._recovery = _Seeking()
    manager._update_channels = update_channels
    await manager.on_rebalance({1, 2}, set(), {1, 2}, 7)
    assert order == ["told [1, 2]", "faust's recovery"]
