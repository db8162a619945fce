"""connect_state.formats.config: the config topic (``KafkaConfigBackingStore``).

Every expected value below was produced by Kafka 4.3.1's own classes: records fed to
``KafkaConfigBackingStore.ConsumeCallback`` (log messages, thrown exceptions, resulting store state) and values
written through the store's ``Struct`` schemas with the worker's internal ``JsonConverter``.
"""

from __future__ import annotations

import pytest

from connect_state.core.errors import RecordFormatError
from connect_state.core.vocabulary import TargetState
from connect_state.formats.config import (
    ConfigCallbackError,
    ConfigKey,
    ConfigRecord,
    ConnectorConfig,
    ConnectorConfigKey,
    LoggerLevel,
    LoggerLevelKey,
    RestartRequest,
    RestartRequestKey,
    SessionKey,
    SessionKeyKey,
    TargetStateKey,
    TargetStateValue,
    TaskCommit,
    TaskCommitKey,
    TaskConfig,
    TaskConfigKey,
    TaskCount,
    TaskCountKey,
    commit_without_connector_reason,
    connector_config_key,
    delete_records,
    format_config_key,
    logger_level_key,
    parse_config_key,
    parse_config_record,
    pause_records,
    restart_request_key,
    resume_records,
    serialize_connector_config,
    serialize_logger_level,
    serialize_restart_request,
    serialize_session_key,
    serialize_target_state,
    serialize_task_commit,
    serialize_task_config,
    serialize_task_count,
    stop_records,
    target_state_key,
    task_commit_key,
    task_config_key,
    task_config_records,
    task_count_key,
)

# --------------------------------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------------------------------


def test_key_builders() -> None:
    # KafkaConfigBackingStore.CONNECTOR_KEY, TASK_KEY, COMMIT_TASKS_KEY, ... for "my-conn" and task 7
    assert connector_config_key("my-conn") == "connector-my-conn"
    assert task_config_key("my-conn", 7) == "task-my-conn-7"
    assert task_commit_key("my-conn") == "commit-my-conn"
    assert target_state_key("my-conn") == "target-state-my-conn"
    assert task_count_key("my-conn") == "tasks-fencing-my-conn"
    assert restart_request_key("my-conn") == "restart-connector-my-conn"
    assert logger_level_key("org.apache.kafka") == "logger-cluster-org.apache.kafka"


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("connector-foo", ConnectorConfigKey("foo")),
        ("connector-", ConnectorConfigKey("")),
        ("target-state-foo", TargetStateKey("foo")),
        ("task-foo-0", TaskConfigKey("foo", 0)),
        ("task-my-conn-name-12", TaskConfigKey("my-conn-name", 12)),
        ("task--0", TaskConfigKey("", 0)),  # split keeps the leading empty part
        ("task-a-b-c-+1-", TaskConfigKey("a-b-c", 1)),  # trailing empty parts dropped, "+1" parses
        ("task-a--1", TaskConfigKey("a-", 1)),
        ("task-a-\u0661", TaskConfigKey("a", 1)),  # Integer.parseInt takes any Unicode decimal digit
        ("task-connector-x-1", TaskConfigKey("connector-x", 1)),
        ("commit-foo", TaskCommitKey("foo")),
        ("restart-connector-foo", RestartRequestKey("foo")),
        ("restart-connector-", RestartRequestKey("")),
        ("tasks-fencing-foo", TaskCountKey("foo")),
        ("session-key", SessionKeyKey()),
        ("logger-cluster-org.foo", LoggerLevelKey("org.foo")),
        (b"connector-\xff", ConnectorConfigKey("\ufffd")),  # StringDeserializer: malformed UTF-8 becomes U+FFFD
    ],
)
def test_valid_keys(key: str | bytes, expected: ConfigKey) -> None:
    assert parse_config_key(key) == expected


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("task-foo", "Ignoring task configuration because task-foo couldn't be parsed as a task config key"),
        ("task-a-x", "Ignoring task configuration because task-a-x couldn't be parsed as a task config key"),
        ("task-", "Ignoring task configuration because task- couldn't be parsed as a task config key"),
        (
            "task-a-2147483648",
            "Ignoring task configuration because task-a-2147483648 couldn't be parsed as a task config key",
        ),
        ("session-keyx", "Discarding config update record with invalid key: session-keyx"),
        ("bogus", "Discarding config update record with invalid key: bogus"),
        ("connector", "Discarding config update record with invalid key: connector"),
        ("CONNECTOR-x", "Discarding config update record with invalid key: CONNECTOR-x"),
        ("", "Discarding config update record with invalid key: "),
    ],
)
def test_invalid_keys(key: str, reason: str) -> None:
    with pytest.raises(RecordFormatError) as raised:
        parse_config_key(key)
    assert raised.value.reason == reason
    assert not isinstance(raised.value, ConfigCallbackError)


def test_null_key_makes_the_callback_throw() -> None:
    with pytest.raises(ConfigCallbackError) as raised:
        parse_config_record(None, b"{}")
    assert raised.value.exception == "NullPointerException"


def test_null_key_with_an_unreadable_value_is_only_a_conversion_failure() -> None:
    # The value is converted before the key is looked at: no NullPointerException then.
    with pytest.raises(RecordFormatError) as raised:
        parse_config_record(None, b"invalid")
    assert not isinstance(raised.value, ConfigCallbackError)
    assert raised.value.reason.startswith("Failed to convert config data to Kafka Connect format: invalid JSON (")


@pytest.mark.parametrize(
    "key",
    [
        ConnectorConfigKey("a b"),
        TaskConfigKey("my-conn", 3),
        TaskCommitKey("x"),
        TargetStateKey("é"),
        TaskCountKey("y"),
        SessionKeyKey(),
        RestartRequestKey("z"),
        LoggerLevelKey("org.apache"),
    ],
)
def test_format_config_key_round_trips(key: ConfigKey) -> None:
    assert parse_config_key(format_config_key(key)) == key


# --------------------------------------------------------------------------------------------------------------------
# Reading values
# --------------------------------------------------------------------------------------------------------------------

_SESSION = b'{"key":"ABEiM0RVZneImaq7zN3u/w==","algorithm":"HmacSHA256","creation-timestamp":1746009337985}'


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (
            "connector-foo",
            b'{"properties":{"a":"b","n":null,"i":5,"m":{"x":1}}}',
            ConfigRecord(ConnectorConfigKey("foo"), ConnectorConfig({"a": "b", "n": None, "i": 5, "m": {"x": 1}})),
        ),
        ("connector-foo", None, ConfigRecord(ConnectorConfigKey("foo"), None)),  # deletion
        ("connector-foo", b"", ConfigRecord(ConnectorConfigKey("foo"), None)),  # empty bytes read as null: deletion
        ("connector-foo", b"null", ConfigRecord(ConnectorConfigKey("foo"), None)),
        (
            "task-foo-0",
            b'{"properties":{"k":"v"}}',
            ConfigRecord(TaskConfigKey("foo", 0), TaskConfig({"k": "v"})),
        ),
        ("commit-foo", b'{"tasks":0}', ConfigRecord(TaskCommitKey("foo"), TaskCommit(0))),
        ("commit-foo", b'{"tasks":4294967297}', ConfigRecord(TaskCommitKey("foo"), TaskCommit(1))),  # (int) narrowing
        (
            "target-state-foo",
            b'{"state":"PAUSED","state.v2":"STOPPED"}',
            ConfigRecord(TargetStateKey("foo"), TargetStateValue("STOPPED")),
        ),
        ("target-state-foo", b'{"state":"PAUSED"}', ConfigRecord(TargetStateKey("foo"), TargetStateValue("PAUSED"))),
        (
            "target-state-foo",
            b'{"state.v2":null,"state":"STARTED"}',
            ConfigRecord(TargetStateKey("foo"), TargetStateValue("STARTED")),
        ),
        ("target-state-foo", None, ConfigRecord(TargetStateKey("foo"), None)),
        ("target-state-foo", b"", ConfigRecord(TargetStateKey("foo"), None)),
        (
            "target-state-foo",
            b'{"state":"PAUSED","state.v2":5}',
            ConfigRecord(
                TargetStateKey("foo"),
                TargetStateValue("PAUSED"),
                (
                    "Invalid data for target state for connector 'foo': 'state.v2' field should be a String but is "
                    "java.lang.Long",
                ),
            ),
        ),
        ("tasks-fencing-foo", b'{"task-count":3}', ConfigRecord(TaskCountKey("foo"), TaskCount(3))),
        (
            "session-key",
            _SESSION,
            ConfigRecord(
                SessionKeyKey(),
                SessionKey(bytes.fromhex("00112233445566778899aabbccddeeff"), "HmacSHA256", 1746009337985),
            ),
        ),
        (
            "session-key",
            b'{"key":"AAA","algorithm":"","creation-timestamp":5}',  # unpadded base64 and an empty algorithm pass
            ConfigRecord(SessionKeyKey(), SessionKey(b"\x00\x00", "", 5)),
        ),
        (
            "restart-connector-foo",
            b'{"include-tasks":true,"only-failed":true}',
            ConfigRecord(RestartRequestKey("foo"), RestartRequest(include_tasks=True, only_failed=True)),
        ),
        (
            "restart-connector-foo",
            b'{"include-tasks":"true"}',
            ConfigRecord(
                RestartRequestKey("foo"),
                RestartRequest(include_tasks=False, only_failed=False),
                (
                    "Invalid data for restart request 'only-failed' field should be a Boolean but is null, "
                    "defaulting to false",
                    "Invalid data for restart request 'include-tasks' field should be a Boolean but is "
                    "java.lang.String, defaulting to false",
                ),
            ),
        ),
        ("logger-cluster-org.foo", b'{"level":"DEBUG"}', ConfigRecord(LoggerLevelKey("org.foo"), LoggerLevel("DEBUG"))),
        ("logger-cluster-org.foo", b'{"level":"bogus"}', ConfigRecord(LoggerLevelKey("org.foo"), LoggerLevel("bogus"))),
    ],
)
def test_parse_config_record(key: str, value: bytes | None, expected: ConfigRecord) -> None:
    assert parse_config_record(key, value) == expected


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (
            "connector-foo",
            b"[]",
            "Ignoring configuration for connector 'foo' because it is in the wrong format: java.util.ArrayList",
        ),
        (
            "connector-foo",
            b"{}",
            "Invalid data for config for connector 'foo': 'properties' field should be a Map but is null",
        ),
        (
            "connector-foo",
            b'{"properties":"x"}',
            "Invalid data for config for connector 'foo': 'properties' field should be a Map but is java.lang.String",
        ),
        ("task-foo-0", None, "Ignoring task configuration for task foo-0 because it is unexpectedly null"),
        (
            "task-foo-0",
            b"5",
            "Ignoring task configuration for task foo-0 because the value is not a Map but is java.lang.Long",
        ),
        (
            "task-foo-0",
            b'{"properties":[]}',
            "Invalid data for config of task foo-0 'properties' field should be a Map but is java.util.ArrayList",
        ),
        (
            "task-foo",
            b'{"properties":{}}',
            "Ignoring task configuration because task-foo couldn't be parsed as a task config key",
        ),
        (
            "commit-foo",
            None,
            "Ignoring connector tasks configuration commit for connector 'foo' because it is in the wrong format: null",
        ),
        (
            "target-state-foo",
            b'"STOPPED"',
            "Ignoring target state for connector 'foo' because it is in the wrong format: java.lang.String",
        ),
        (
            "target-state-foo",
            b'{"state":7,"state.v2":5}',
            "Invalid data for target state for connector 'foo': 'state.v2' field should be a String but is "
            "java.lang.Long; Invalid data for target state for connector 'foo': 'state' field should be a String but "
            "is java.lang.Long",
        ),
        (
            "target-state-foo",
            b'{"state.v2":null}',
            "Invalid data for target state for connector 'foo': 'state' field should be a String but is null",
        ),
        ("target-state-foo", b'{"state":"paused"}', "Invalid target state for connector 'foo': paused"),
        # a string state.v2 that is not a TargetState does not fall back to state
        (
            "target-state-foo",
            b'{"state":"PAUSED","state.v2":"BOGUS"}',
            "Invalid target state for connector 'foo': BOGUS",
        ),
        (
            "tasks-fencing-foo",
            None,
            "Ignoring task count record for connector 'foo' because it is in the wrong format: null",
        ),
        ("session-key", None, "Ignoring session key because it is unexpectedly null"),
        ("session-key", b"[]", "Ignoring session key because the value is not a Map but is java.util.ArrayList"),
        (
            "session-key",
            b'{"key":null,"algorithm":"x"}',
            "Invalid data for session key 'key' field should be a String but is null",
        ),
        (
            "session-key",
            b'{"key":"","algorithm":5}',
            "Invalid data for session key 'algorithm' field should be a String but it is java.lang.Long",
        ),
        (
            "session-key",
            b'{"key":"AAAA","algorithm":"HmacSHA256","creation-timestamp":1.5}',
            "Invalid data for session key 'creation-timestamp' field should be a long but it is java.lang.Double",
        ),
        ("restart-connector-foo", None, "Ignoring restart request because the value is not a Map but is null"),
        (
            "logger-cluster-org.foo",
            None,
            "Ignoring logging level for namespace org.foo because it is unexpectedly null",
        ),
        (
            "logger-cluster-org.foo",
            b"[1]",
            "Ignoring logging level for namespace org.foo because the value is not a Map but is java.util.ArrayList",
        ),
        (
            "logger-cluster-org.foo",
            b'{"level":5}',
            "Invalid data for logging level key 'level' field with namespace org.foo; should be a String but it is "
            "java.lang.Long",
        ),
        ("bogus", b"{}", "Discarding config update record with invalid key: bogus"),
        ("bogus", None, "Discarding config update record with invalid key: bogus"),
    ],
)
def test_records_connect_ignores(key: str, value: bytes | None, reason: str) -> None:
    with pytest.raises(RecordFormatError) as raised:
        parse_config_record(key, value)
    assert raised.value.reason == reason
    assert not isinstance(raised.value, ConfigCallbackError)


@pytest.mark.parametrize("key", ["connector-foo", "bogus", "session-key", "commit-foo"])
def test_unreadable_values_fail_conversion_first(key: str) -> None:
    with pytest.raises(RecordFormatError) as raised:
        parse_config_record(key, b"nope")
    assert raised.value.reason.startswith("Failed to convert config data to Kafka Connect format: invalid JSON (")


@pytest.mark.parametrize(
    ("key", "value", "reason", "exception"),
    [
        ("commit-foo", b'{"tasks":"1"}', "Expected integer value to be either Integer or Long", "ConnectException"),
        ("commit-foo", b'{"tasks":1.0}', "Expected integer value to be either Integer or Long", "ConnectException"),
        ("commit-foo", b"{}", "Expected integer value to be either Integer or Long", "ConnectException"),
        (
            "tasks-fencing-foo",
            b'{"task-count":"3"}',
            "Expected integer value to be either Integer or Long",
            "ConnectException",
        ),
        ("tasks-fencing-foo", b"{}", "Expected integer value to be either Integer or Long", "ConnectException"),
        # Base64.getDecoder().decode runs before the algorithm is checked; new SecretKeySpec rejects an empty key
        ("session-key", b'{"key":"!!!","algorithm":5}', "Illegal base64 character 21", "IllegalArgumentException"),
        ("session-key", b'{"key":"AA\\nAA","algorithm":"x"}', "Illegal base64 character a", "IllegalArgumentException"),
        ("session-key", b'{"key":"AA-_","algorithm":"x"}', "Illegal base64 character 2d", "IllegalArgumentException"),
        (
            "session-key",
            b'{"key":"","algorithm":"HmacSHA256","creation-timestamp":1}',
            "Empty key",
            "IllegalArgumentException",
        ),
    ],
)
def test_records_the_callback_throws_on(key: str, value: bytes, reason: str, exception: str) -> None:
    with pytest.raises(ConfigCallbackError) as raised:
        parse_config_record(key, value)
    assert (raised.value.reason, raised.value.exception) == (reason, exception)


@pytest.mark.parametrize(
    ("encoded", "expected"),
    [
        ("AAAA", b"\x00\x00\x00"),
        ("AAA", b"\x00\x00"),
        ("AA", b"\x00"),
        ("AA==", b"\x00"),
        ("AAA=", b"\x00\x00"),
        ("QUJDRA", b"ABCD"),
        ("QUJDRA==", b"ABCD"),
        ("//8=", b"\xff\xff"),
        ("A", "Input byte[] should at least have 2 bytes for base64 bytes"),
        ("é", "Input byte[] should at least have 2 bytes for base64 bytes"),
        ("\U0001f600", "Input byte[] should at least have 2 bytes for base64 bytes"),  # one '?' in ISO-8859-1
        ("\U0001f600AA", "Illegal base64 character 3f"),
        ("AA=", "Input byte array has wrong 4-byte ending unit"),
        ("=", "Input byte[] should at least have 2 bytes for base64 bytes"),
        ("A===", "Last unit does not have enough valid bits"),
        ("AA!!", "Illegal base64 character 21"),
        ("QUJDRA===", "Input byte array has incorrect ending byte at 8"),
        ("AA==x", "Input byte array has incorrect ending byte at 4"),
        ("AAA=A", "Input byte array has incorrect ending byte at 4"),
        ("AAAAA", "Last unit does not have enough valid bits"),
        ("AAAA\xff", "Illegal base64 character -1"),
    ],
)
def test_session_key_base64_like_java(encoded: str, expected: bytes | str) -> None:
    value = b'{"key":"' + encoded.encode() + b'","algorithm":"HmacSHA256","creation-timestamp":5}'
    if isinstance(expected, bytes):
        record = parse_config_record("session-key", value)
        assert isinstance(record.value, SessionKey)
        assert record.value.key == expected
    else:
        with pytest.raises(ConfigCallbackError) as raised:
            parse_config_record("session-key", value)
        assert raised.value.reason == expected


def test_commit_without_connector_reason() -> None:
    assert commit_without_connector_reason("foo") == (
        "Ignoring task configs for connector foo; it appears that the connector was deleted previously and that log "
        "compaction has since removed any trace of its previous configurations from the config topic"
    )


# --------------------------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("STARTED", b'{"state":"STARTED","state.v2":"STARTED"}'),
        ("PAUSED", b'{"state":"PAUSED","state.v2":"PAUSED"}'),
        ("STOPPED", b'{"state":"PAUSED","state.v2":"STOPPED"}'),
    ],
)
def test_serialize_target_state(state: str, expected: bytes) -> None:
    assert serialize_target_state(state) == expected
    record = parse_config_record("target-state-x", expected)
    assert record.value == TargetStateValue(state)  # type: ignore[arg-type]


def test_every_target_state_is_covered() -> None:
    assert tuple(TargetState) == ("STARTED", "PAUSED", "STOPPED")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (serialize_task_commit(0), b'{"tasks":0}'),
        (serialize_task_commit(3), b'{"tasks":3}'),
        (serialize_task_count(2), b'{"task-count":2}'),
        (
            serialize_session_key(
                SessionKey(bytes.fromhex("00112233445566778899aabbccddeeff"), "HmacSHA256", 1746009337985)
            ),
            b'{"key":"ABEiM0RVZneImaq7zN3u/w==","algorithm":"HmacSHA256","creation-timestamp":1746009337985}',
        ),
        (
            serialize_restart_request(RestartRequest(include_tasks=True, only_failed=False)),
            b'{"include-tasks":true,"only-failed":false}',
        ),
        (
            serialize_restart_request(RestartRequest(include_tasks=False, only_failed=True)),
            b'{"include-tasks":false,"only-failed":true}',
        ),
        (serialize_logger_level("DEBUG"), b'{"level":"DEBUG"}'),
        (
            # a null property is written as null (CONNECTOR_CONFIGURATION_V0's values are optional strings)
            serialize_connector_config(
                {"connector.class": "FileStreamSource", "name": "foo", "nullprop": None, "z": 'é"\\/'}
            ),
            b'{"properties":{"connector.class":"FileStreamSource","name":"foo","nullprop":null,"z":"\xc3\xa9\\"\\\\/"}}',
        ),
        (serialize_connector_config({}), b'{"properties":{}}'),
        (
            serialize_task_config({"task.class": "T", "\x1f": "\n"}),
            b'{"properties":{"task.class":"T","\\u001F":"\\n"}}',
        ),
    ],
)
def test_serializers_write_connects_bytes(data: bytes, expected: bytes) -> None:
    assert data == expected


@pytest.mark.parametrize(
    "call",
    [
        lambda: serialize_task_commit(2**31),
        lambda: serialize_task_commit(True),
        lambda: serialize_task_count(-(2**31) - 1),
        lambda: serialize_target_state("RUNNING"),
        lambda: serialize_connector_config({"a": 5}),  # type: ignore[dict-item]
        lambda: serialize_connector_config({5: "a"}),  # type: ignore[dict-item]
        lambda: serialize_session_key(SessionKey(b"", "HmacSHA256", 1)),
        lambda: serialize_session_key(SessionKey(b"k", "HmacSHA256", 2**63)),
        lambda: serialize_restart_request(RestartRequest(include_tasks=1, only_failed=False)),  # type: ignore[arg-type]
        lambda: serialize_logger_level(None),  # type: ignore[arg-type]
    ],
)
def test_serializers_reject_what_the_schemas_reject(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]


def test_stop_records() -> None:
    # DistributedHerder.stopConnector: writeTaskConfigs(name, []) then putTargetState(STOPPED)
    assert stop_records("foo") == [
        ("commit-foo", b'{"tasks":0}'),
        ("target-state-foo", b'{"state":"PAUSED","state.v2":"STOPPED"}'),
    ]


def test_pause_and_resume_records() -> None:
    assert pause_records("foo") == [("target-state-foo", b'{"state":"PAUSED","state.v2":"PAUSED"}')]
    assert resume_records("foo") == [("target-state-foo", b'{"state":"STARTED","state.v2":"STARTED"}')]


def test_delete_records() -> None:
    # removeConnectorConfig: connector tombstone first, then the target-state tombstone
    assert delete_records("foo") == [("connector-foo", None), ("target-state-foo", None)]


def test_task_config_records() -> None:
    assert task_config_records("foo", [{"a": "1"}, {"a": "2"}]) == [
        ("task-foo-0", b'{"properties":{"a":"1"}}'),
        ("task-foo-1", b'{"properties":{"a":"2"}}'),
        ("commit-foo", b'{"tasks":2}'),
    ]


def test_written_records_read_back() -> None:
    for key, value in [*stop_records("c-1"), *task_config_records("c-1", [{"k": "v"}]), *delete_records("c-1")]:
        record = parse_config_record(key, value)
        assert format_config_key(record.key) == key
        assert record.warnings == ()
