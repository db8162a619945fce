"""The herder's lifecycle writes (connect_state/herder/herder.py) without Flask, over :class:`FakeHerderIO`: stop,
pause, resume, delete, restart and the topics reset, each refusal with Connect's message and nothing written, and the
records written otherwise. The statuses the API answers for each error class: tests/unit/test_api_connectors.py and
the integration tests against the real worker."""

from __future__ import annotations

import subprocess
import sys

import pytest

from connect_state.connect import rest
from connect_state.core.errors import KafkaUnavailableError, KafkaWriteTimeout
from connect_state.core.settings import Settings
from connect_state.formats.config import (
    connector_config_key,
    delete_records,
    pause_records,
    restart_request_key,
    resume_records,
    serialize_connector_config,
    stop_records,
    target_state_key,
)
from connect_state.herder import (
    ConnectError,
    ForbiddenError,
    Herder,
    KafkaUnreachableError,
    NotEstablishedError,
    NotFoundError,
    UnsupportedError,
)
from tests.unit.fakes import FakeAdmin, FakeHerderIO, InMemoryTopics, RecordingWriter

CONFIG = serialize_connector_config({"connector.class": "FileStreamSource", "file": "/tmp/in", "topic": "t"})


@pytest.fixture
def io(settings: Settings, kafka_log: InMemoryTopics, writer: RecordingWriter) -> FakeHerderIO:
    return FakeHerderIO(settings, kafka_log, writer, FakeAdmin())


def herder(io: FakeHerderIO, **overrides: str) -> Herder:
    return Herder(io.settings.with_overrides(**overrides) if overrides else io.settings, io)


def configure(io: FakeHerderIO, name: str, *records: tuple[str, bytes | None]) -> None:
    """Append ``connector-<name>`` (and ``records``) to the config topic, as Connect's leader writes them."""
    for key, value in [(connector_config_key(name), CONFIG), *records]:
        io.topics.append(io.settings.config_storage_topic, 0, key.encode(), value)


def written(writer: RecordingWriter) -> list[tuple[str, bytes | None]]:
    return [(key.decode(), value) for _, records in writer.batches for key, value in records]


def test_the_herder_imports_no_flask_spark_kafka_or_delta() -> None:
    code = (
        "import sys, connect_state.herder; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'flask', 'pyspark', 'kafka', 'deltalake', 'pyarrow'}))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


# --- stop, pause, resume ---------------------------------------------------------------------------------------------

TARGET_STATES = [("stop", stop_records), ("pause", pause_records), ("resume", resume_records)]


@pytest.mark.parametrize(("action", "records_for"), TARGET_STATES)
def test_target_state_writes_are_connects_records(io: FakeHerderIO, writer: RecordingWriter, action, records_for):
    configure(io, "src")
    getattr(herder(io), f"{action}_connector")("src")
    assert written(writer) == records_for("src")
    assert writer.batches[0][0] == io.settings.config_storage_topic


@pytest.mark.parametrize(("action", "records_for"), TARGET_STATES)
def test_target_state_of_an_unknown_connector_is_404(io: FakeHerderIO, writer: RecordingWriter, action, records_for):
    configure(io, "gone", *delete_records("gone"))
    with pytest.raises(NotFoundError) as refused:
        getattr(herder(io), f"{action}_connector")("gone")
    assert refused.value.message == rest.unknown_connector_message("gone") == "Unknown connector gone"
    assert writer.sends == []


def test_a_deletion_landing_before_our_stop_is_undone_and_answered_404(io, writer: RecordingWriter) -> None:
    """The stop passed the check, then Connect's deletion landed before our records: our target state is tombstoned
    again (no target state left for a connector that is gone) and the answer is Connect's 404."""
    configure(io, "src")
    config_topic = io.settings.config_storage_topic
    deleted: list[bool] = []

    def delete_first(topic: str) -> None:
        if topic == config_topic and not deleted:
            deleted.append(True)
            for key, value in delete_records("src"):
                io.topics.append(config_topic, 0, key.encode(), value)

    writer.fail = delete_first
    with pytest.raises(NotFoundError) as refused:
        herder(io).stop_connector("src")
    assert refused.value.message == "Unknown connector src"
    assert written(writer) == [*stop_records("src"), (target_state_key("src"), None)]


def test_the_config_topic_not_read_in_time_writes_nothing(io: FakeHerderIO, writer: RecordingWriter) -> None:
    configure(io, "src")
    io.unreadable = NotEstablishedError("config topic not read")
    with pytest.raises(NotEstablishedError):
        herder(io).pause_connector("src")
    assert writer.sends == []


@pytest.mark.parametrize(
    ("failure", "error", "message"),
    [
        (
            KafkaUnavailableError("no broker"),
            KafkaUnreachableError,
            "Nothing was written for the stop of connector src",
        ),
        (
            KafkaWriteTimeout("late"),
            ConnectError,
            "Kafka did not acknowledge the stop of connector src within 30000 ms",
        ),
    ],
)
def test_a_failed_config_write(io: FakeHerderIO, writer: RecordingWriter, failure, error, message) -> None:
    configure(io, "src")
    writer.fail = failure
    with pytest.raises(error) as failed:
        herder(io, **{"api.kafka.write.timeout.ms": "30000"}).stop_connector("src")
    assert failed.value.message.startswith(message)
    if error is ConnectError:
        assert "the outcome is unknown" in failed.value.message
        assert "Retrying PUT /connectors/src/stop is safe" in failed.value.message


# --- delete ----------------------------------------------------------------------------------------------------------


def test_delete_writes_connects_tombstones(io: FakeHerderIO, writer: RecordingWriter) -> None:
    configure(io, "src")
    herder(io).delete_connector("src")
    assert written(writer) == delete_records("src") == [(connector_config_key("src"), None), ("target-state-src", None)]


def test_delete_completes_a_half_finished_deletion(io: FakeHerderIO, writer: RecordingWriter) -> None:
    configure(io, "src", *stop_records("src"), (connector_config_key("src"), None))
    herder(io).delete_connector("src")
    assert written(writer) == [(target_state_key("src"), None)]


def test_delete_of_an_unknown_connector_is_404(io: FakeHerderIO, writer: RecordingWriter) -> None:
    configure(io, "src", *delete_records("src"))
    with pytest.raises(NotFoundError) as refused:
        herder(io).delete_connector("src")
    assert refused.value.message == "Connector src not found"
    assert writer.sends == []


# --- restart ---------------------------------------------------------------------------------------------------------

STATUS_ROW = {
    "name": "src",
    "type": "source",
    "config": CONFIG.decode(),
    "connector_state": "RUNNING",
    "connector_worker_id": "w:8083",
    "connector_trace": None,
    "connector_version": "4.3.1",
    "tasks": [{"id": 0, "state": "FAILED", "worker_id": "w:8083", "trace": "boom", "version": "4.3.1"}],
}


def test_restart_without_flags_writes_the_request_and_returns_no_plan(io, writer: RecordingWriter) -> None:
    configure(io, "src")
    assert herder(io).restart_connector("src", include_tasks=False, only_failed=False) is None
    assert written(writer) == [(restart_request_key("src"), b'{"include-tasks":false,"only-failed":false}')]


def test_restart_plan_shows_what_restarts(io: FakeHerderIO) -> None:
    configure(io, "src")
    io.rows["src"] = STATUS_ROW
    plan = herder(io).restart_connector("src", include_tasks=True, only_failed=True)
    assert plan is not None
    assert plan["connector"]["state"] == "RUNNING"  # type: ignore[index]
    assert [task["state"] for task in plan["tasks"]] == ["RESTARTING"]  # type: ignore[attr-defined]


def test_restart_plan_without_a_status_is_404_after_the_write(io: FakeHerderIO, writer: RecordingWriter) -> None:
    configure(io, "src")
    with pytest.raises(NotFoundError) as refused:
        herder(io).restart_connector("src", include_tasks=True, only_failed=False)
    assert refused.value.message == "Status for connector src not found"
    assert [key for key, _ in written(writer)] == [restart_request_key("src")], "written all the same, as Connect"


@pytest.mark.parametrize("restart", ["connector", "task"])
def test_restart_of_an_unknown_connector_is_404(io: FakeHerderIO, writer: RecordingWriter, restart: str) -> None:
    with pytest.raises(NotFoundError) as refused:
        if restart == "connector":
            herder(io).restart_connector("nope", include_tasks=False, only_failed=False)
        else:
            herder(io).restart_task("nope", 0)
    assert refused.value.message == "Unknown connector: nope"
    assert writer.sends == []


def test_a_task_alone_cannot_be_restarted(io: FakeHerderIO, writer: RecordingWriter) -> None:
    configure(io, "src")
    with pytest.raises(UnsupportedError) as refused:
        herder(io).restart_task("src", 2)
    assert refused.value.message.startswith("connect-state cannot restart task src-2 alone")
    assert writer.sends == []


# --- topics reset ----------------------------------------------------------------------------------------------------


def test_topics_reset_tombstones_the_active_topics(io: FakeHerderIO, writer: RecordingWriter) -> None:
    io.active["snk"] = ["b", "a"]
    herder(io).reset_active_topics("snk")
    assert writer.batches == [
        (
            io.settings.status_storage_topic,
            [(b"status-topic-a:connector-snk", None), (b"status-topic-b:connector-snk", None)],
        )
    ]


def test_topics_reset_without_topics_writes_nothing(io: FakeHerderIO, writer: RecordingWriter) -> None:
    herder(io).reset_active_topics("never-ran")
    assert writer.sends == []


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"topic.tracking.enable": "false"}, rest.TRACKING_DISABLED),
        ({"topic.tracking.enable": "false", "topic.tracking.allow.reset": "false"}, rest.TRACKING_DISABLED),
        ({"topic.tracking.allow.reset": "false"}, rest.RESET_DISABLED),
    ],
)
def test_topics_reset_refused_by_the_settings(io: FakeHerderIO, writer: RecordingWriter, overrides, message) -> None:
    io.active["snk"] = ["a"]
    with pytest.raises(ForbiddenError) as refused:
        herder(io, **overrides).reset_active_topics("snk")
    assert refused.value.message == message
    assert writer.sends == []


def test_topics_reset_outcome_unknown(io: FakeHerderIO, writer: RecordingWriter) -> None:
    io.active["snk"] = ["a"]
    writer.fail = KafkaWriteTimeout("late")
    with pytest.raises(ConnectError) as failed:
        herder(io).reset_active_topics("snk")
    assert "the tombstones may still be written" in failed.value.message
