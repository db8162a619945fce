"""The herder's offsets writes (connect_state/herder/offsets.py) without Flask, over :class:`FakeHerderIO`: each
refusal of ``PATCH`` and ``DELETE /connectors/<name>/offsets`` in Connect's order (404, not STOPPED, the connector
type, bad offsets, the ``alterOffsets`` rules, the guards, the admin's and the writer's failures), zombie fencing and
the transaction with exactly-once source support, and what is written otherwise. The same through the REST API:
tests/unit/test_api_offsets.py; against the real worker: tests/integration/test_offsets_api_connect.py and
test_exactly_once_offsets_connect.py."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest

from connect_state.connect import rest
from connect_state.connect.connector_types import TypeBasis
from connect_state.core.errors import (
    AlterOffsetsBadRequest,
    ConsumerGroupAdminError,
    GroupNotEmptyError,
    KafkaUnavailableError,
    KafkaWriteError,
    KafkaWriteTimeout,
    ZombieFencingError,
)
from connect_state.core.settings import Settings
from connect_state.core.vocabulary import ConnectorType
from connect_state.formats.config import (
    connector_config_key,
    pause_records,
    resume_records,
    serialize_connector_config,
    serialize_task_count,
    stop_records,
    task_config_records,
    task_count_key,
)
from connect_state.formats.offsets import offset_key_bytes, serialize_offset_value
from connect_state.herder import BadRequestError, ConnectError, Herder, NotFoundError, source_timeout_message
from connect_state.herder.errors import PluginDeadlineError
from connect_state.security.guards import GuardRefusal
from tests.unit.fakes import FakeAdmin, FakeHerderIO, InMemoryTopics, RecordingWriter

SOURCE = {"connector.class": "FileStreamSource", "file": "/tmp/in", "topic": "t"}
SINK = {"connector.class": "FileStreamSink", "file": "/tmp/out", "topics": "t"}
PARTITION = {"filename": "/tmp/in"}
PATCH = "PATCH /connectors/src/offsets"
STRICT_CLASS = "com.example.StrictSource"


def strict_rule(config: Mapping[str, Any], offsets: Any) -> bool:
    """A configured ``alterOffsets`` rule refusing everything as a bad request."""
    raise AlterOffsetsBadRequest("offsets are managed elsewhere")


@pytest.fixture
def admin() -> FakeAdmin:
    return FakeAdmin(groups=["connect-snk"])


@pytest.fixture
def io(settings: Settings, kafka_log: InMemoryTopics, writer: RecordingWriter, admin: FakeAdmin) -> FakeHerderIO:
    return FakeHerderIO(settings, kafka_log, writer, admin)


def herder(io: FakeHerderIO, **overrides: str) -> Herder:
    return Herder(io.settings.with_overrides(**overrides) if overrides else io.settings, io)


def exactly_once(io: FakeHerderIO) -> Herder:
    return herder(io, **{"exactly.once.source.support": "enabled", "connect.group.id": "cluster"})


def history(io: FakeHerderIO, *records: tuple[str, bytes | None]) -> None:
    for key, value in records:
        io.topics.append(io.settings.config_storage_topic, 0, key.encode(), value)


def stopped(io: FakeHerderIO, name: str, config: Mapping[str, str], tasks: int = 1) -> None:
    """A connector that ran ``tasks`` tasks and was stopped through Connect."""
    history(
        io,
        (connector_config_key(name), serialize_connector_config(dict(config))),
        *task_config_records(name, [{}] * tasks),
        *stop_records(name),
    )


def offset(position: int | None) -> dict[str, object] | None:
    return None if position is None else {"position": position}


def offsets_written(writer: RecordingWriter) -> list[tuple[str, bytes, bytes | None]]:
    return [(topic, key, value) for topic, records in writer.batches for key, value in records]


# --- Connect's checks, in its order ----------------------------------------------------------------------------------


@pytest.mark.parametrize("write", ["alter", "reset"])
def test_an_unknown_connector_is_404(io: FakeHerderIO, writer: RecordingWriter, write: str) -> None:
    with pytest.raises(NotFoundError) as refused:
        if write == "alter":
            herder(io).alter_connector_offsets("nope", [(PARTITION, offset(1))])
        else:
            herder(io).reset_connector_offsets("nope")
    assert refused.value.message == rest.connector_not_found_message("nope")
    assert writer.sends == []


RUNNING = [(connector_config_key("src"), serialize_connector_config(SOURCE)), *task_config_records("src", [{}])]


@pytest.mark.parametrize(
    "records",
    [
        RUNNING,
        [*RUNNING, *pause_records("src")],
        [*RUNNING, *stop_records("src"), *resume_records("src")],
        [*RUNNING, stop_records("src")[1]],  # STOPPED, but its tasks not committed away yet
    ],
    ids=["running", "paused", "resumed", "stopped-with-tasks"],
)
@pytest.mark.parametrize("write", ["alter", "reset"])
def test_only_a_stopped_connector_without_tasks(io: FakeHerderIO, writer: RecordingWriter, records, write) -> None:
    history(io, *records)
    with pytest.raises(BadRequestError) as refused:
        if write == "alter":
            herder(io).alter_connector_offsets("src", [(PARTITION, offset(1))])
        else:
            herder(io).reset_connector_offsets("src")
    assert refused.value.message == rest.not_stopped_message("src")
    assert writer.sends == []


def test_a_connector_of_no_known_type_is_500(io: FakeHerderIO, writer: RecordingWriter) -> None:
    stopped(io, "src", {"file": "/tmp/in"})
    with pytest.raises(ConnectError) as refused:
        herder(io).alter_connector_offsets("src", [(PARTITION, offset(1))])
    assert refused.value.message == "Cannot tell whether connector src is a source or a sink connector (class None)"
    assert writer.sends == []


def test_an_unknown_class_is_typed_from_its_config_and_says_so(io: FakeHerderIO, admin: FakeAdmin) -> None:
    stopped(io, "snk", {"connector.class": "com.example.MySink", "topics": "t"})
    change = herder(io).alter_connector_offsets("snk", [({"kafka_topic": "t", "kafka_partition": 0}, None)])
    assert (change.kind, change.basis, change.managed) == (ConnectorType.SINK, TypeBasis.GUESSED, False)
    assert change.message == rest.offsets_success_message("altered", False)
    assert admin.calls == [("delete_group_offsets", "connect-snk", [("t", 0)])]


def test_bad_sink_offsets_are_400(io: FakeHerderIO, admin: FakeAdmin) -> None:
    stopped(io, "snk", SINK)
    with pytest.raises(BadRequestError) as refused:
        herder(io).alter_connector_offsets("snk", [({"kafka_partition": 0}, {"kafka_offset": 1})])
    assert "kafka_topic" in refused.value.message
    assert admin.calls == []


def test_bad_source_offsets_are_connects_500(io: FakeHerderIO, writer: RecordingWriter) -> None:
    """``OffsetUtils.validateFormat``: a ``DataException``, unmapped by Connect's exception mapper."""
    stopped(io, "src", SOURCE)
    with pytest.raises(ConnectError):
        herder(io).alter_connector_offsets("src", [(PARTITION, {"position": {"nested": 1}})])
    assert writer.sends == []


def test_the_alter_offsets_rule_refuses(io: FakeHerderIO, writer: RecordingWriter) -> None:
    stopped(io, "src", SOURCE)
    with pytest.raises(ConnectError) as refused:  # FileStreamSourceConnector.alterOffsets' ConnectException
        herder(io).alter_connector_offsets("src", [(PARTITION, {"line": 3})])
    assert refused.value.message == "Offset objects should either be null or contain the key 'position'"
    assert writer.sends == []


def hung_rule(config: Mapping[str, Any], offsets: Any) -> bool:
    """A configured ``alterOffsets`` rule that does not return in time."""
    time.sleep(1)
    return True


def test_a_rule_past_its_deadline_is_a_typed_500(io: FakeHerderIO, writer: RecordingWriter) -> None:
    stopped(io, "src", {"connector.class": STRICT_CLASS, "topic": "t"})
    rules = {
        "offsets.alter.rules": f"{STRICT_CLASS}=tests.unit.test_herder_offsets:hung_rule",
        "offsets.alter.timeout.ms": "20",
    }
    with pytest.raises(PluginDeadlineError) as refused:
        herder(io, **rules).alter_connector_offsets("src", [(PARTITION, offset(1))])
    assert isinstance(refused.value, ConnectError)  # Connect's 500
    assert refused.value.message == (
        "Failed to modify offsets for source connector src: the alterOffsets rule tests.unit.test_herder_offsets:"
        f"hung_rule of class {STRICT_CLASS} did not return within 20 ms (offsets.alter.timeout.ms)"
    )
    assert writer.sends == []


def test_a_rules_bad_request_is_400(io: FakeHerderIO, writer: RecordingWriter) -> None:
    stopped(io, "src", {"connector.class": STRICT_CLASS, "topic": "t"})
    rules = {"offsets.alter.rules": f"{STRICT_CLASS}=tests.unit.test_herder_offsets:strict_rule"}
    with pytest.raises(BadRequestError) as refused:
        herder(io, **rules).alter_connector_offsets("src", [(PARTITION, offset(1))])
    assert refused.value.message == "offsets are managed elsewhere"
    assert writer.sends == []


# --- guards ----------------------------------------------------------------------------------------------------------


def test_another_connectors_group_is_refused(io: FakeHerderIO, admin: FakeAdmin) -> None:
    stopped(io, "snk", {**SINK, "consumer.override.group.id": "connect-other"})
    io.rows["other"] = {"name": "other"}
    io.committed["connect-other"] = {"t"}
    with pytest.raises(GuardRefusal, match="default consumer group of connector other"):
        herder(io).reset_connector_offsets("snk")
    assert admin.calls == []


def test_a_group_the_connector_committed_to_is_its_own(io: FakeHerderIO, admin: FakeAdmin) -> None:
    stopped(io, "snk", {**SINK, "consumer.override.group.id": "mine"})
    io.committed["mine"], io.active["snk"] = {"t"}, ["t"]
    herder(io).reset_connector_offsets("snk")
    assert [call[:2] for call in admin.calls] == [("list_group_offsets", "mine"), ("delete_group", "mine")]


def test_an_internal_topic_as_offsets_topic_is_refused(io: FakeHerderIO, writer: RecordingWriter) -> None:
    stopped(io, "src", {**SOURCE, "offsets.storage.topic": io.settings.status_storage_topic})
    with pytest.raises(GuardRefusal, match="internal topics"):
        herder(io).alter_connector_offsets("src", [(PARTITION, offset(1))])
    assert writer.sends == []


# --- sink writes -----------------------------------------------------------------------------------------------------


def test_sink_alter_alters_and_deletes(io: FakeHerderIO, admin: FakeAdmin) -> None:
    stopped(io, "snk", SINK)
    pairs = [
        ({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": 7}),
        ({"kafka_topic": "t", "kafka_partition": 1}, None),
    ]
    change = herder(io).alter_connector_offsets("snk", pairs)
    assert change.message == "The offsets for this connector have been altered successfully"
    assert admin.calls == [
        ("alter_group_offsets", "connect-snk", {("t", 0): 7}),
        ("delete_group_offsets", "connect-snk", [("t", 1)]),
    ]


@pytest.mark.parametrize(
    ("failing", "error", "message"),
    [
        ("alter_group_offsets", GroupNotEmptyError("members"), rest.sink_alter_zombie_message("snk")),
        ("alter_group_offsets", ConsumerGroupAdminError("down"), rest.sink_alter_failed_message("snk")),
    ],
)
def test_sink_alter_failures(io: FakeHerderIO, admin: FakeAdmin, failing, error, message) -> None:
    stopped(io, "snk", SINK)
    admin.errors[failing] = error
    with pytest.raises(ConnectError) as failed:
        herder(io).alter_connector_offsets("snk", [({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": 1})])
    assert failed.value.message == message


@pytest.mark.parametrize(
    ("failing", "error", "message"),
    [
        ("list_group_offsets", ConsumerGroupAdminError("down"), rest.sink_list_failed_message("snk")),
        ("delete_group", GroupNotEmptyError("members"), rest.sink_reset_zombie_message("snk")),
        ("delete_group", ConsumerGroupAdminError("down"), rest.sink_reset_failed_message("snk")),
    ],
)
def test_sink_reset_failures(io: FakeHerderIO, admin: FakeAdmin, failing, error, message) -> None:
    stopped(io, "snk", SINK)
    admin.errors[failing] = error
    with pytest.raises(ConnectError) as failed:
        herder(io).reset_connector_offsets("snk")
    assert failed.value.message == message


def test_sink_reset_deletes_the_group(io: FakeHerderIO, admin: FakeAdmin) -> None:
    stopped(io, "snk", SINK)
    assert (
        herder(io).reset_connector_offsets("snk").message
        == "The offsets for this connector have been reset successfully"
    )
    assert admin.calls[-1] == ("delete_group", "connect-snk", None)
    assert admin.groups == set()


# --- source writes ---------------------------------------------------------------------------------------------------


def test_source_alter_writes_connects_records(io: FakeHerderIO, writer: RecordingWriter) -> None:
    stopped(io, "src", SOURCE)
    change = herder(io).alter_connector_offsets("src", [(PARTITION, offset(5))])
    assert change.managed, "FileStreamSourceConnector.alterOffsets returns true"
    key = offset_key_bytes("src", PARTITION)
    assert offsets_written(writer) == [(io.settings.offset_storage_topic, key, serialize_offset_value(offset(5)))]


def test_source_reset_tombstones_every_listed_partition(io: FakeHerderIO, writer: RecordingWriter) -> None:
    stopped(io, "src", SOURCE)
    topic = io.settings.offset_storage_topic
    keys = [offset_key_bytes("src", {"filename": name}) for name in ("/a", "/b")]
    io.sources["src"] = [{"offsets_topic": topic, "key": key, "listed": True} for key in keys]
    herder(io).reset_connector_offsets("src")
    assert sorted(offsets_written(writer)) == [(topic, key, None) for key in sorted(keys)]


def test_source_reset_of_nothing_writes_nothing(io: FakeHerderIO, writer: RecordingWriter) -> None:
    stopped(io, "src", SOURCE)
    assert herder(io).reset_connector_offsets("src").managed
    assert writer.sends == []


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (KafkaWriteTimeout("late"), source_timeout_message("src", PATCH)),
        (KafkaUnavailableError("no broker"), rest.source_modify_timeout_message("src")),
        (KafkaWriteError("refused"), rest.source_modify_failed_message("src")),
    ],
)
def test_source_write_failures(io: FakeHerderIO, writer: RecordingWriter, error, message) -> None:
    stopped(io, "src", SOURCE)
    writer.fail = error
    with pytest.raises(ConnectError) as failed:
        herder(io).alter_connector_offsets("src", [(PARTITION, offset(1))])
    assert failed.value.message == message


def test_the_secondary_store_is_best_effort(io: FakeHerderIO, writer: RecordingWriter) -> None:
    """``ConnectorOffsetBackingStore.set``: the connector's own topic first, then the worker's, only logged."""
    stopped(io, "src", {**SOURCE, "offsets.storage.topic": "own"})
    worker_topic = io.settings.offset_storage_topic
    writer.fail = lambda topic: KafkaWriteError("refused") if topic == worker_topic else None
    herder(io).alter_connector_offsets("src", [(PARTITION, offset(1))])
    assert [topic for topic, _ in writer.batches] == ["own"]


# --- exactly-once source support: zombie fencing and the transaction ------------------------------------------------


def fenced_earlier(io: FakeHerderIO, tasks: int) -> None:
    """A connector that ran ``tasks`` tasks with exactly-once support (the leader's fencing record), then stopped."""
    history(
        io,
        (connector_config_key("src"), serialize_connector_config(SOURCE)),
        (task_count_key("src"), serialize_task_count(tasks)),
        *task_config_records("src", [{}] * tasks),
        *stop_records("src"),
    )


def test_fencing_then_one_transaction(io: FakeHerderIO, writer: RecordingWriter) -> None:
    fenced_earlier(io, 2)
    exactly_once(io).alter_connector_offsets("src", [(PARTITION, offset(1))])
    assert writer.fenced == [["cluster-src-0", "cluster-src-1"]]
    [transaction] = writer.transactions
    assert transaction.transactional_id == "cluster-src-0"
    assert [topic for topic, _ in transaction.committed] == [io.settings.offset_storage_topic]
    assert transaction.closed


def test_a_failed_fencing_writes_nothing(io: FakeHerderIO, writer: RecordingWriter) -> None:
    fenced_earlier(io, 2)
    writer.fence_error = ZombieFencingError("InitProducerId refused")
    with pytest.raises(ConnectError) as failed:
        exactly_once(io).alter_connector_offsets("src", [(PARTITION, offset(1))])
    assert failed.value.message == rest.zombie_fencing_failed_message("src", "InitProducerId refused")
    assert (writer.sends, writer.transactions) == ([], [])


def test_a_resume_during_fencing_is_refused(io: FakeHerderIO, writer: RecordingWriter, monkeypatch) -> None:
    """The checks run again after the fencing (``DistributedHerder.modifyConnectorOffsets``)."""
    fenced_earlier(io, 1)
    monkeypatch.setattr(writer, "fence_producers", lambda ids, timeout_ms=None: history(io, *resume_records("src")))
    with pytest.raises(BadRequestError) as refused:
        exactly_once(io).reset_connector_offsets("src")
    assert refused.value.message == rest.not_stopped_message("src")
    assert writer.transactions == []


def test_the_transaction_is_closed_when_its_write_fails(io: FakeHerderIO, writer: RecordingWriter) -> None:
    fenced_earlier(io, 1)
    writer.fail = KafkaWriteError("refused")
    with pytest.raises(ConnectError):
        exactly_once(io).alter_connector_offsets("src", [(PARTITION, offset(1))])
    assert [transaction.closed for transaction in writer.transactions] == [True]


def test_without_exactly_once_support_nothing_is_fenced(io: FakeHerderIO, writer: RecordingWriter) -> None:
    fenced_earlier(io, 2)
    herder(io).alter_connector_offsets("src", [(PARTITION, offset(1))])
    assert (writer.fenced, writer.transactions) == ([], [])
    assert [topic for topic, _ in writer.batches] == [io.settings.offset_storage_topic]
