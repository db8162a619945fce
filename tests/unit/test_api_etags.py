"""ETag / 304 and kept bodies of the hot GETs (api/etags.py, issue 34): the tag follows the table versions and the
follower's position the answer is made of, and authentication, the lag header and metrics stay on the path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from werkzeug.security import generate_password_hash

from connect_state.api import close_app, connectors, create_app
from connect_state.core.settings import Settings
from connect_state.formats.status import connector_status_key
from connect_state.progress.freshness import HEADER, TableLag, parse_lag_header
from connect_state.tables.schemas import ACTIVE_TOPICS, CONNECTORS
from tests.unit.fakes import InMemoryTopics, RecordingWriter
from tests.unit.helpers import write_table as write_delta
from tests.unit.test_api_live import STATUS, Fed, running, status, watermarks

STATUS_PATH = "/connectors/c/status"


@pytest.fixture
def fed(settings: Settings, kafka_log: InMemoryTopics) -> Fed:
    return Fed(settings, kafka_log)


@pytest.fixture
def client(settings: Settings, writer: RecordingWriter, kafka_log: InMemoryTopics, fed: Fed) -> Iterator[FlaskClient]:
    write_delta(settings.delta_root, CONNECTORS, [running("c")])
    watermarks(settings, kafka_log, "connector_states", STATUS)
    fed.catch_up()
    app = create_app(settings, writer=writer, topics=kafka_log, follower=fed.follower)
    app.testing = True
    yield app.test_client()
    close_app(app)


def state_of(client: FlaskClient, path: str = STATUS_PATH, etag: str | None = None) -> tuple[int, str | None, str]:
    headers = {"If-None-Match": f'"{etag}"'} if etag else {}
    answer = client.get(path, headers=headers)
    return answer.status_code, answer.get_etag()[0], answer.get_data(as_text=True)


def test_if_none_match_of_the_current_tag_answers_304_without_a_body(client: FlaskClient) -> None:
    first = client.get(STATUS_PATH)
    assert first.status_code == 200 and first.get_json()["connector"]["state"] == "RUNNING"
    etag, _weak = first.get_etag()
    assert etag

    again = client.get(STATUS_PATH, headers={"If-None-Match": f'"{etag}"'})
    assert (again.status_code, again.get_data(), again.get_etag()[0]) == (304, b"", etag)
    assert parse_lag_header(again.headers[HEADER]) == parse_lag_header(first.headers[HEADER])
    other = client.get(STATUS_PATH, headers={"If-None-Match": '"not-it"'})
    assert (other.status_code, other.get_data(), other.get_etag()[0]) == (200, first.get_data(), etag)


def test_a_kept_body_is_answered_without_running_the_view(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    first = client.get(STATUS_PATH)

    def refuse(_name: str) -> None:
        raise AssertionError("the view ran")

    monkeypatch.setattr(connectors, "status_row", refuse)
    kept = client.get(STATUS_PATH)
    assert (kept.status_code, kept.get_data(), kept.get_etag()) == (200, first.get_data(), first.get_etag())
    assert parse_lag_header(kept.headers[HEADER]) == [TableLag("connectors", 0, 0)]


def test_the_tag_changes_with_the_followers_position(client: FlaskClient, kafka_log: InMemoryTopics, fed: Fed) -> None:
    """The table stays as it is; the answer changes with a record the follower folds over it: so does the tag."""
    client.get(STATUS_PATH)  # the rows loaded,
    fed.catch_up()  # then the follower caught up after them: its records may be folded over them
    code, etag, body = state_of(client)
    assert code == 200 and state_of(client, etag=etag)[0] == 304
    kafka_log.append_keyed(STATUS, connector_status_key("c").encode(), status("PAUSED"))
    fed.catch_up()

    code, new_etag, new_body = state_of(client, etag=etag)
    assert code == 200 and '"PAUSED"' in new_body and new_body != body
    assert new_etag not in (None, etag)
    assert state_of(client, etag=new_etag)[0] == 304


def test_the_tag_changes_with_the_tables_version(client: FlaskClient, settings: Settings) -> None:
    _, etag, body = state_of(client)
    write_delta(settings.delta_root, CONNECTORS, [running("c", state="FAILED")], mode="overwrite")

    code, new_etag, new_body = state_of(client, etag=etag)
    assert code == 200 and '"FAILED"' in new_body and new_body != body
    assert new_etag not in (None, etag)


def test_tags_per_path_and_query(client: FlaskClient, settings: Settings) -> None:
    write_delta(settings.delta_root, ACTIVE_TOPICS, [])
    tags = {path: state_of(client, path)[1] for path in (STATUS_PATH, "/connectors/d/topics", "/connectors/c/topics")}
    tags["expand=status"] = state_of(client, "/connectors?expand=status")[1]
    tags["expand=info"] = state_of(client, "/connectors?expand=info")[1]
    assert None not in tags.values() and len(set(tags.values())) == len(tags), tags
    assert state_of(client, "/connectors")[1] is None  # not a hot GET: no tag
    assert state_of(client, "/connectors/none/status")[:2] == (404, None)  # only 200 answers are kept


@pytest.fixture
def auth_client(
    settings: Settings, writer: RecordingWriter, kafka_log: InMemoryTopics, tmp_path: Path
) -> Iterator[FlaskClient]:
    users, roles = tmp_path / "users", tmp_path / "roles"
    users.write_text("".join(f"{user}:{generate_password_hash(user, 'pbkdf2:sha256:1000')}\n" for user in "ab"))
    roles.write_text("a: read\nb: read@other-*\n")
    write_delta(settings.delta_root, CONNECTORS, [running("c")])
    overrides = {"api.auth.basic.file": str(users), "api.auth.roles.file": str(roles)}
    app = create_app(settings.with_overrides(**overrides), writer=writer, topics=kafka_log)
    app.testing = True
    yield app.test_client()
    close_app(app)


def test_a_304_still_checks_the_principal(auth_client: FlaskClient) -> None:
    first = auth_client.get(STATUS_PATH, auth=("a", "a"))
    etag = first.get_etag()[0]
    assert first.status_code == 200 and etag
    conditional = {"If-None-Match": f'"{etag}"'}
    assert auth_client.get(STATUS_PATH, headers=conditional, auth=("a", "a")).status_code == 304
    assert auth_client.get(STATUS_PATH, headers=conditional).status_code == 401
    assert auth_client.get(STATUS_PATH, headers=conditional, auth=("a", "wrong")).status_code == 401
    assert auth_client.get(STATUS_PATH, headers=conditional, auth=("b", "b")).status_code == 403
    assert auth_client.get(STATUS_PATH, auth=("b", "b")).status_code == 403
