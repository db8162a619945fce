"""Exactly-once source connectors around an offsets change (connect_state/connect/exactly_once.py): the transactional
ids Connect uses and which of them ``DistributedHerder.doFenceZombieSourceTasks`` fences, read from the config topic's
records as the snapshot folds them. The real broker and worker check the rest (tests/integration/
test_exactly_once_offsets_connect.py)."""

from __future__ import annotations

import pytest

from connect_state.connect.exactly_once import offsets_transactional_id, task_transactional_id, zombie_fencing_ids
from connect_state.core.errors import ConfigError
from connect_state.core.settings import load_settings
from connect_state.core.vocabulary import ExactlyOnceSourceSupport
from connect_state.folds.config_snapshot import ConfigSnapshot
from connect_state.formats.config import (
    connector_config_key,
    serialize_connector_config,
    serialize_task_count,
    stop_records,
    task_config_records,
    task_count_key,
)

CONFIG = serialize_connector_config({"connector.class": "FileStreamSource", "file": "/tmp/in"})


def view_after(records: list[tuple[str, bytes | None]], name: str = "src"):
    snapshot = ConfigSnapshot()
    for offset, (key, value) in enumerate(records):
        snapshot.apply(key.encode(), value, 0, offset, 0)
    return snapshot.connector(name)


def running(name: str, tasks: int) -> list[tuple[str, bytes | None]]:
    return [(connector_config_key(name), CONFIG), *task_config_records(name, [{}] * tasks)]


def fenced_at(name: str, tasks: int) -> tuple[str, bytes | None]:
    """The ``tasks-fencing-<name>`` record Connect's leader writes after a round of fencing."""
    return (task_count_key(name), serialize_task_count(tasks))


def test_transactional_ids_are_connects() -> None:
    """``Worker.taskTransactionalId``: ``String.format("%s-%s-%d", groupId, connector, taskId)``."""
    assert task_transactional_id("connect-cluster", "my-source", 3) == "connect-cluster-my-source-3"
    assert offsets_transactional_id("g", "a-b") == "g-a-b-0"


@pytest.mark.parametrize(
    ("history", "fenced"),
    [
        # Never ran with exactly-once support (no task-count record): nothing to fence.
        ([*running("src", 2), *stop_records("src")], []),
        # Ran 3 tasks (the leader's fencing wrote the record), then stopped: the 3 task producers are fenced.
        ([*running("src", 3), fenced_at("src", 3), *stop_records("src")], [0, 1, 2]),
        # Already fenced after the stop (a record after the empty task configs): nothing pending.
        ([*running("src", 3), fenced_at("src", 3), *stop_records("src"), fenced_at("src", 0)], []),
        # One task before, zero now: Connect's 1-to-1 shortcut does not apply, task 0 is fenced.
        ([*running("src", 1), fenced_at("src", 1), *stop_records("src")], [0]),
    ],
)
def test_zombie_fencing_ids_follow_do_fence_zombie_source_tasks(history, fenced) -> None:
    view = view_after(history)
    assert zombie_fencing_ids("grp", view) == [f"grp-src-{task}" for task in fenced]


def test_one_task_to_one_task_needs_no_fencing() -> None:
    """The new task's own ``initTransactions`` fences the old one (the shortcut of ``doFenceZombieSourceTasks``)."""
    history = [*running("src", 1), fenced_at("src", 1), *task_config_records("src", [{}])]
    view = view_after(history)
    assert (view.pending_fencing, view.task_count_record, view.task_count) == (True, 1, 1)
    assert zombie_fencing_ids("grp", view) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("disabled", ExactlyOnceSourceSupport.DISABLED),
        ("PREPARING", ExactlyOnceSourceSupport.PREPARING),
        (" Enabled ", ExactlyOnceSourceSupport.ENABLED),
    ],
)
def test_the_setting_reads_connects_values(value: str, expected: ExactlyOnceSourceSupport) -> None:
    settings = load_settings(overrides={"exactly.once.source.support": value}, environ={})
    assert settings.exactly_once_source_support is expected
    assert settings.exactly_once_source_support.enabled == (expected is ExactlyOnceSourceSupport.ENABLED)


def test_a_wrong_setting_says_what_is_allowed() -> None:
    expected = r"exactly\.once\.source\.support: expected one of disabled, preparing, enabled, got 'yes'"
    with pytest.raises(ConfigError, match=expected):
        load_settings(overrides={"exactly.once.source.support": "yes"}, environ={})


def test_the_defaults_follow_connects_sample_worker_config() -> None:
    """Connect's ``group.id`` has no default: ``connect-cluster`` is ``config/connect-distributed.properties``'."""
    settings = load_settings(environ={})
    assert settings.connect_group_id == "connect-cluster"
    assert settings.exactly_once_source_support is ExactlyOnceSourceSupport.DISABLED
