"""connect_state.formats.status: the status topic, mirroring KafkaStatusBackingStoreFormatTest.

Accept/reject decisions and parsed values were checked against Kafka 4.3.1's KafkaStatusBackingStore.read.
"""

from __future__ import annotations

import pytest

from connect_state.core.errors import RecordFormatError
from connect_state.core.vocabulary import State
from connect_state.formats.status import (
    ConnectorStatusKey,
    Status,
    StatusKey,
    StatusRecord,
    TaskStatusKey,
    TopicStatus,
    TopicStatusKey,
    connector_status_key,
    format_status_key,
    java_parse_int,
    parse_status,
    parse_status_key,
    parse_status_record,
    parse_topic_status,
    serialize_status,
    serialize_topic_status,
    task_status_key,
    topic_status_key,
    topic_status_tombstone_keys,
)

RUNNING = b'{"state":"RUNNING","trace":null,"worker_id":"127.0.0.1:8083","generation":3}'
TOPIC_VALUE = b'{"topic":{"name":"foo-topic","connector":"foo-source","task":0,"discoverTimestamp":1746009337985}}'

# --------------------------------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------------------------------


def test_key_builders() -> None:
    assert connector_status_key("foo") == "status-connector-foo"
    assert task_status_key("foo", 3) == "status-task-foo-3"
    assert topic_status_key("foo-topic", "foo-source") == "status-topic-foo-topic:connector-foo-source"


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        # KafkaStatusBackingStoreFormatTest.readInvalidStatus
        ("status-unknown", "Discarding record with invalid key status-unknown"),
        ("status-connector-", "Discarding record with invalid connector status key status-connector-"),
        ("status-task-", "Discarding record with invalid task status key status-task-"),
        (
            "status-task-foo-source-#",
            "Invalid task status key status-task-foo-source-#; "
            "Discarding record with invalid task status key status-task-foo-source-#",
        ),
        ("status-topic-", "Discarding record with invalid topic status key status-topic-"),
        (
            "status-topic-:connector-",
            "Discarding record with invalid topic status key containing empty topic status-topic-:connector-",
        ),
        ("status-topic-foo-topic:", "Discarding record with invalid topic status key status-topic-foo-topic:"),
        (
            "status-topic-foo-topic:connector-",
            "Discarding record with invalid topic status key containing empty connector "
            "status-topic-foo-topic:connector-",
        ),
        # More of Connect's rules.
        ("status-connector", "Discarding record with invalid key status-connector"),
        ("STATUS-connector-x", "Discarding record with invalid key STATUS-connector-x"),
        ("", "Discarding record with invalid key "),
        ("status-task-foo", "Discarding record with invalid task status key status-task-foo"),
        ("status-task-foo-", "Discarding record with invalid task status key status-task-foo-"),  # split drops ""
        (
            "status-task-foo-2147483648",
            "Invalid task status key status-task-foo-2147483648; "
            "Discarding record with invalid task status key status-task-foo-2147483648",
        ),
        (
            "status-task-foo-\U0001d7ce",  # a digit outside the BMP: two UTF-16 units, neither a digit
            "Invalid task status key status-task-foo-\U0001d7ce; "
            "Discarding record with invalid task status key status-task-foo-\U0001d7ce",
        ),
        ("status-topic-t:xxxxxxxxx", "Discarding record with invalid topic status key status-topic-t:xxxxxxxxx"),
        (
            "status-topic-t:xxxxxxxxxx",
            "Discarding record with invalid topic status key containing empty connector status-topic-t:xxxxxxxxxx",
        ),
    ],
)
def test_invalid_keys_are_rejected_with_connects_message(key: str, reason: str) -> None:
    with pytest.raises(RecordFormatError) as raised:
        parse_status_key(key)
    assert raised.value.reason == reason
    with pytest.raises(RecordFormatError):
        parse_status_key(key.encode())  # same as bytes


def test_null_key_is_rejected() -> None:
    with pytest.raises(RecordFormatError) as raised:
        parse_status_key(None)
    assert raised.value.reason == "null key"
    with pytest.raises(RecordFormatError, match="null key"):
        parse_status_record(None, RUNNING)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("status-connector-foo", ConnectorStatusKey("foo")),
        ("status-connector--", ConnectorStatusKey("-")),
        ("status-connector-a:b-c", ConnectorStatusKey("a:b-c")),
        ("status-connector-status-task-x-1", ConnectorStatusKey("status-task-x-1")),
        ("status-task-foo-0", TaskStatusKey("foo", 0)),
        ("status-task-my-conn-name-12", TaskStatusKey("my-conn-name", 12)),  # the name keeps its dashes
        ("status-task-foo--1", TaskStatusKey("foo-", 1)),  # "-1" is never a task number: the dash is the name's
        ("status-task--1", TaskStatusKey("", 1)),  # Connect accepts an empty connector name here
        ("status-task-foo-+7", TaskStatusKey("foo", 7)),  # Integer.parseInt accepts a plus sign
        ("status-task-foo-007", TaskStatusKey("foo", 7)),
        ("status-task-foo-7-", TaskStatusKey("foo", 7)),  # String.split drops trailing empty strings
        ("status-task-foo-7---", TaskStatusKey("foo", 7)),
        ("status-task-foo-2147483647", TaskStatusKey("foo", 2147483647)),
        ("status-task-foo-\u0661\u0662", TaskStatusKey("foo", 12)),  # Arabic-Indic digits are digits for Java
        ("status-task-c:d-1", TaskStatusKey("c:d", 1)),
        ("status-topic-foo-topic:connector-foo-source", TopicStatusKey("foo-topic", "foo-source")),
        ("status-topic-t:connector-a:b", TopicStatusKey("t", "a:b")),  # a ':' in the connector name is fine
        ("status-topic-t:connector-a-b", TopicStatusKey("t", "a-b")),
        ("status-topic-a:b:connector-c", TopicStatusKey("a", "r-c")),  # the topic ends at the FIRST ':'
        ("status-topic-t:xxxxxxxxxxyz", TopicStatusKey("t", "yz")),  # ":connector-" itself is never checked
        ("status-topic-caf\u00e9:connector-\u9023\u63a5", TopicStatusKey("caf\u00e9", "\u9023\u63a5")),
    ],
)
def test_valid_keys(key: str, expected: StatusKey) -> None:
    assert parse_status_key(key) == expected
    assert parse_status_key(key.encode()) == expected


def test_bytes_keys_are_decoded_like_string_deserializer() -> None:
    assert parse_status_key(b"status-connector-a\xffb") == ConnectorStatusKey("a\ufffdb")
    assert parse_status_key(b"status-connector-a\xed\xa0\x80") == ConnectorStatusKey("a\ufffd")
    assert parse_status_key(bytearray(b"status-task-x-1")) == TaskStatusKey("x", 1)


def test_topic_key_cut_inside_a_surrogate_pair_is_rejected() -> None:
    # Java skips 11 UTF-16 units after the ':'; here that ends between the two halves of U+1F600.
    key = "status-topic-t:xxxxxxxxx\U0001f600conn"
    with pytest.raises(RecordFormatError, match="half of a surrogate pair"):
        parse_status_key(key)
    assert parse_status_key("status-topic-t:xxxxxxxxxx\U0001f600conn") == TopicStatusKey("t", "\U0001f600conn")


@pytest.mark.parametrize(
    "key",
    [
        ConnectorStatusKey("foo"),
        ConnectorStatusKey("a-b:c"),
        TaskStatusKey("my-conn-name", 12),
        TaskStatusKey("x", 0),
        TopicStatusKey("foo-topic", "foo-source"),
        TopicStatusKey("t", "with:colon-and-dash"),
    ],
)
def test_format_status_key_round_trips(key: StatusKey) -> None:
    assert parse_status_key(format_status_key(key)) == key


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", 0), ("12", 12), ("+12", 12), ("-12", -12), ("007", 7), ("-2147483648", -(2**31)), ("\uff11", 1)],
)
def test_java_parse_int(text: str, expected: int) -> None:
    assert java_parse_int(text) == expected


@pytest.mark.parametrize("text", ["", "+", "-", "1a", " 1", "1 ", "1_000", "2147483648", "-2147483649", "\U0001d7cf"])
def test_java_parse_int_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        java_parse_int(text)


def test_topic_status_tombstone_keys() -> None:
    assert topic_status_tombstone_keys("sink-a", ["orders", "payments", "orders"]) == [
        "status-topic-orders:connector-sink-a",
        "status-topic-payments:connector-sink-a",
    ]
    assert topic_status_tombstone_keys("sink-a", []) == []


# --------------------------------------------------------------------------------------------------------------------
# Values: serialization
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (
            Status("RUNNING", None, "127.0.0.1:8083", 3),
            b'{"state":"RUNNING","trace":null,"worker_id":"127.0.0.1:8083","generation":3,"version":null}',
        ),
        (
            Status("PAUSED", None, "127.0.0.1:8083", 7, "4.3.1"),
            b'{"state":"PAUSED","trace":null,"worker_id":"127.0.0.1:8083","generation":7,"version":"4.3.1"}',
        ),
        (
            Status("FAILED", "org.example.Boom: no\n\tat X.y(X.java:1)\x1f", "w:1", -1),
            b'{"state":"FAILED","trace":"org.example.Boom: no\\n\\tat X.y(X.java:1)\\u001F",'
            b'"worker_id":"w:1","generation":-1,"version":null}',
        ),
        (
            Status("STOPPED", "", "caf\u00e9:8083", 2147483647),
            '{"state":"STOPPED","trace":"","worker_id":"caf\u00e9:8083","generation":2147483647,"version":null}'.encode(),
        ),
    ],
)
def test_serialize_status_like_a_4_3_worker(status: Status, expected: bytes) -> None:
    assert serialize_status(status) == expected
    assert parse_status(expected) == status


def test_serialize_status_without_version_is_the_older_form() -> None:
    assert serialize_status(Status("RUNNING", None, "127.0.0.1:8083", 3), with_version=False) == RUNNING
    assert parse_status(RUNNING) == Status("RUNNING", None, "127.0.0.1:8083", 3)
    with pytest.raises(ValueError, match="version"):
        serialize_status(Status("RUNNING", None, "w", 3, "1.0"), with_version=False)


def test_destroyed_is_a_tombstone() -> None:
    assert serialize_status(Status("DESTROYED", None, "w", 1)) is None


@pytest.mark.parametrize(
    "status",
    [
        Status("SLEEPING", None, "w", 1),
        Status("running", None, "w", 1),
        Status("RUNNING", None, None, 1),  # worker_id is a required field of the schema
        Status("RUNNING", None, "w", 2**31),
        Status("RUNNING", None, "w", -(2**31) - 1),
    ],
)
def test_serialize_status_rejects_what_the_schema_rejects(status: Status) -> None:
    with pytest.raises(ValueError):
        serialize_status(status)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (TopicStatus("foo-topic", "foo-source", 0, 1746009337985), TOPIC_VALUE),
        (
            TopicStatus("t\u00e9", "c:\U0001f600", -1, -(2**63)),
            '{"topic":{"name":"t\u00e9","connector":"c:\\uD83D\\uDE00","task":-1,"discoverTimestamp":-9223372036854775808}}'.encode(),
        ),
    ],
)
def test_serialize_topic_status(status: TopicStatus, expected: bytes) -> None:
    assert serialize_topic_status(status) == expected
    assert parse_topic_status(expected) == status


@pytest.mark.parametrize(
    "status",
    [TopicStatus("t", "c", 2**31, 0), TopicStatus("t", "c", 0, 2**63), TopicStatus(None, "c", 0, 0)],  # type: ignore[arg-type]
)
def test_serialize_topic_status_rejects_what_the_schema_rejects(status: TopicStatus) -> None:
    with pytest.raises(ValueError):
        serialize_topic_status(status)


def test_utf8_names_round_trip_unescaped() -> None:
    name = "caf\u00e9-\u9023\u63a5\u5668"
    value = serialize_topic_status(TopicStatus("orders", name, 1, 5))
    assert name.encode() in value
    record = parse_status_record(topic_status_key("orders", name).encode(), value)
    assert record == StatusRecord(TopicStatusKey("orders", name), TopicStatus("orders", name, 1, 5))


def test_every_state_round_trips() -> None:
    for state in State:
        status = Status(state, None, "w", 1)
        data = serialize_status(status)
        if state == "DESTROYED":
            assert data is None
        else:
            assert data is not None
            assert parse_status(data) == status


# --------------------------------------------------------------------------------------------------------------------
# Values: parsing
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (RUNNING, Status("RUNNING", None, "127.0.0.1:8083", 3)),
        (b'{"state":"RUNNING","generation":1}', Status("RUNNING", None, None, 1)),  # trace, worker_id may be missing
        (b'{"generation":5,"state":"PAUSED","extra":{"a":[1]}}', Status("PAUSED", None, None, 5)),
        (b'{"state":"PAUSED","generation":-1}', Status("PAUSED", None, None, -1)),
        (b'{"state":"PAUSED","generation":4294967299}', Status("PAUSED", None, None, 3)),  # Long.intValue()
        (b'{"state":"PAUSED","generation":18446744073709551619}', Status("PAUSED", None, None, 3)),
        (b'{"state":"PAUSED","generation":007}', Status("PAUSED", None, None, 7)),
        (b'{"state":"RUNNING","state":"PAUSED","generation":2}', Status("PAUSED", None, None, 2)),  # last key wins
        (b'{"state":"RESTARTING","worker_id":"w","generation":1}garbage', Status("RESTARTING", None, "w", 1)),
        (b'{"state":"DESTROYED","worker_id":"w","generation":1}', Status("DESTROYED", None, "w", 1)),
        (b'{"state":"RUNNING","generation":1,"version":null}', Status("RUNNING", None, None, 1, None)),
        (
            b'{"state":"FAILED","trace":"a\\u001Fb","worker_id":"w","generation":1,"version":"4.3.1"}',
            Status("FAILED", "a\x1fb", "w", 1, "4.3.1"),
        ),
    ],
)
def test_parse_status(data: bytes, expected: Status) -> None:
    assert parse_status(data) == expected


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"invalid", "Failed to deserialize connector status: invalid JSON (Unrecognized token 'invalid' at byte 0)"),
        (b"", "Failed to deserialize connector status: the value is null (NullPointerException)"),
        (b"null", "Failed to deserialize connector status: the value is null (NullPointerException)"),
        (b"[]", "Invalid connector status type class java.util.ArrayList"),
        (b'"RUNNING"', "Invalid connector status type class java.lang.String"),
        (b"1", "Invalid connector status type class java.lang.Long"),
        (b"1.5", "Invalid connector status type class java.lang.Double"),
        (b"true", "Invalid connector status type class java.lang.Boolean"),
        (b"{}", "Failed to deserialize connector status: field 'state' is missing or null (NullPointerException)"),
        (
            b'{"state":null,"generation":1}',
            "Failed to deserialize connector status: field 'state' is missing or null (NullPointerException)",
        ),
        (
            b'{"state":"running","generation":1}',
            "Failed to deserialize connector status: No enum constant "
            "org.apache.kafka.connect.runtime.AbstractStatus.State.running (IllegalArgumentException)",
        ),
        (
            b'{"state":1,"generation":1}',
            "Failed to deserialize connector status: field 'state' is a java.lang.Long, not a java.lang.String "
            "(ClassCastException)",
        ),
        (
            b'{"state":"RUNNING"}',
            "Failed to deserialize connector status: field 'generation' is missing or null (NullPointerException)",
        ),
        (
            b'{"state":"PAUSED","generation":1.0}',  # 1.0 is a Double for Jackson, not a Long
            "Failed to deserialize connector status: field 'generation' is a java.lang.Double, not a java.lang.Long "
            "(ClassCastException)",
        ),
        (
            b'{"state":"PAUSED","generation":"1"}',
            "Failed to deserialize connector status: field 'generation' is a java.lang.String, not a java.lang.Long "
            "(ClassCastException)",
        ),
        (
            b'{"state":"PAUSED","generation":true}',
            "Failed to deserialize connector status: field 'generation' is a java.lang.Boolean, not a java.lang.Long "
            "(ClassCastException)",
        ),
        (
            b'{"state":"STOPPED","trace":5,"generation":1}',
            "Failed to deserialize connector status: field 'trace' is a java.lang.Long, not a java.lang.String "
            "(ClassCastException)",
        ),
        (
            b'{"state":"STOPPED","worker_id":[],"generation":1}',
            "Failed to deserialize connector status: field 'worker_id' is a java.util.ArrayList, not a "
            "java.lang.String (ClassCastException)",
        ),
        (
            b'{"state":"STOPPED","generation":1,"version":{}}',
            "Failed to deserialize connector status: field 'version' is a java.util.HashMap, not a java.lang.String "
            "(ClassCastException)",
        ),
    ],
)
def test_parse_status_rejects_like_connect(data: bytes, reason: str) -> None:
    with pytest.raises(RecordFormatError) as raised:
        parse_status(data)
    assert raised.value.reason == reason


def test_parse_status_wording_follows_the_kind() -> None:
    with pytest.raises(RecordFormatError, match=r"^Invalid task status type class java\.util\.ArrayList$"):
        parse_status(b"[]", "task")
    with pytest.raises(RecordFormatError, match=r"^Failed to deserialize task status: "):
        parse_status(b"{}", "task")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (TOPIC_VALUE, TopicStatus("foo-topic", "foo-source", 0, 1746009337985)),
        (
            b'{"topic":{"name":"t","connector":"c","task":0,"discoverTimestamp":1},"x":1}',
            TopicStatus("t", "c", 0, 1),
        ),
        (
            b'{"topic":{"discoverTimestamp":2,"task":4294967296,"connector":"c","name":"t","extra":null}}',
            TopicStatus("t", "c", 0, 2),  # task: Long.intValue()
        ),
    ],
)
def test_parse_topic_status(data: bytes, expected: TopicStatus) -> None:
    assert parse_topic_status(data) == expected


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"invalid", "Failed to deserialize topic status: invalid JSON (Unrecognized token 'invalid' at byte 0)"),
        (b"null", "Invalid topic status value null"),
        (b"[1,2]", "Invalid topic status value [1, 2]"),
        (b'"text"', "Invalid topic status value text"),
        (b"{}", "Invalid topic status value null for field topic"),
        (b'{"topic":null}', "Invalid topic status value null for field topic"),
        (b'{"topic":[1,{"b":1,"a":[]}]}', "Invalid topic status value [1, {a=[], b=1}] for field topic"),
        (b'{"topic":"x"}', "Invalid topic status value x for field topic"),
        (
            b'{"topic":{"connector":"c","task":0,"discoverTimestamp":1}}',
            "Failed to deserialize topic status: field 'name' is missing or null (NullPointerException)",
        ),
        (
            b'{"topic":{"name":"t","connector":null,"task":0,"discoverTimestamp":1}}',
            "Failed to deserialize topic status: field 'connector' is missing or null (NullPointerException)",
        ),
        (
            b'{"topic":{"name":"t","connector":"c","discoverTimestamp":1}}',
            "Failed to deserialize topic status: field 'task' is missing or null (NullPointerException)",
        ),
        (
            b'{"topic":{"name":"t","connector":"c","task":1.5,"discoverTimestamp":1}}',
            "Failed to deserialize topic status: field 'task' is a java.lang.Double, not a java.lang.Long "
            "(ClassCastException)",
        ),
        (
            b'{"topic":{"name":"t","connector":"c","task":0,"discoverTimestamp":"1"}}',
            "Failed to deserialize topic status: field 'discoverTimestamp' is a java.lang.String, not a "
            "java.lang.Long (ClassCastException)",
        ),
        (
            b'{"topic":{"name":5,"connector":"c","task":0,"discoverTimestamp":1}}',
            "Failed to deserialize topic status: field 'name' is a java.lang.Long, not a java.lang.String "
            "(ClassCastException)",
        ),
        (
            # Java evaluates the arguments first: the bad task fails before the missing names are noticed.
            b'{"topic":{"name":null,"connector":null,"task":"x","discoverTimestamp":1}}',
            "Failed to deserialize topic status: field 'task' is a java.lang.String, not a java.lang.Long "
            "(ClassCastException)",
        ),
    ],
)
def test_parse_topic_status_rejects_like_connect(data: bytes, reason: str) -> None:
    with pytest.raises(RecordFormatError) as raised:
        parse_topic_status(data)
    assert raised.value.reason == reason


# --------------------------------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        # KafkaStatusBackingStoreFormatTest.readInvalidStatusValue: "invalid" for all three key kinds.
        (
            "status-connector-foo-source",
            "Failed to deserialize connector status: invalid JSON (Unrecognized token 'invalid' at byte 0)",
        ),
        (
            "status-task-foo-source-0",
            "Failed to deserialize task status: invalid JSON (Unrecognized token 'invalid' at byte 0); "
            "Failed to parse task status with key status-task-foo-source-0",
        ),
        (
            "status-topic-foo-topic:connector-foo-source",
            "Failed to deserialize topic status: invalid JSON (Unrecognized token 'invalid' at byte 0); "
            "Failed to parse topic status with key status-topic-foo-topic:connector-foo-source",
        ),
    ],
)
def test_invalid_value_is_rejected_for_every_key_kind(key: str, reason: str) -> None:
    for raw_key in (key, key.encode()):
        with pytest.raises(RecordFormatError) as raised:
            parse_status_record(raw_key, b"invalid")
        assert raised.value.reason == reason


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (
            "status-task-foo-0",
            b"[]",
            "Invalid task status type class java.util.ArrayList; "
            "Failed to parse task status with key status-task-foo-0",
        ),
        (
            "status-topic-t:connector-c",
            b"{}",
            "Invalid topic status value null for field topic; Failed to parse topic status with key "
            "status-topic-t:connector-c",
        ),
        (
            "status-connector-foo",
            TOPIC_VALUE,  # a topic status under a connector key: no "state"
            "Failed to deserialize connector status: field 'state' is missing or null (NullPointerException)",
        ),
        (
            "status-topic-t:connector-c",
            RUNNING,  # a connector status under a topic key: no "topic"
            "Invalid topic status value null for field topic; Failed to parse topic status with key "
            "status-topic-t:connector-c",
        ),
        # An invalid key wins over the value, as in Connect.
        ("status-connector-", b"invalid", "Discarding record with invalid connector status key status-connector-"),
    ],
)
def test_parse_status_record_rejects(key: str, value: bytes, reason: str) -> None:
    with pytest.raises(RecordFormatError) as raised:
        parse_status_record(key, value)
    assert raised.value.reason == reason


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (
            b"status-connector-foo",
            RUNNING,
            StatusRecord(ConnectorStatusKey("foo"), Status("RUNNING", None, "127.0.0.1:8083", 3)),
        ),
        (
            "status-task-my-conn-name-12",
            b'{"state":"UNASSIGNED","trace":null,"worker_id":"w","generation":9,"version":null}',
            StatusRecord(TaskStatusKey("my-conn-name", 12), Status("UNASSIGNED", None, "w", 9)),
        ),
        (
            b"status-topic-foo-topic:connector-foo-source",
            TOPIC_VALUE,
            StatusRecord(
                TopicStatusKey("foo-topic", "foo-source"), TopicStatus("foo-topic", "foo-source", 0, 1746009337985)
            ),
        ),
        (b"status-connector-foo", None, StatusRecord(ConnectorStatusKey("foo"), None)),
        (b"status-task-foo-3", None, StatusRecord(TaskStatusKey("foo", 3), None)),
        (b"status-topic-t:connector-c", None, StatusRecord(TopicStatusKey("t", "c"), None)),
    ],
)
def test_parse_status_record(key: bytes | str, value: bytes | None, expected: StatusRecord) -> None:
    assert parse_status_record(key, value) == expected


def test_non_bmp_names_are_written_as_escaped_surrogates_and_read_back() -> None:
    status = TopicStatus("orders", "sink-\U0001f600", 2, 10)
    value = serialize_topic_status(status)
    assert b"sink-\\uD83D\\uDE00" in value
    assert parse_status_record(topic_status_key("orders", "sink-\U0001f600").encode(), value).value == status
