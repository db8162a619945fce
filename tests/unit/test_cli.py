"""The command line (connect_state.cli) against a stand-in API over real HTTP (tests/unit/fake_api.py): what it sends,
what it prints, its exit codes, and that a refusal of its own (bad regex, no match, unknown context, declined) sends
no write. The real API and Connect as oracle: tests/integration/test_cli_connect.py."""

from __future__ import annotations

import base64
import json
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from connect_state.cli.contexts import HIDDEN
from connect_state.cli.errors import ExitCode
from connect_state.cli.main import cli
from connect_state.cli.output import table
from tests.unit.fake_api import FakeApi, fake_api

README = Path(__file__).resolve().parents[2] / "README.md"
Run = Callable[..., Result]


@pytest.fixture
def api() -> Iterator[FakeApi]:
    with fake_api() as served:
        yield served


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return tmp_path / "conf" / "contexts.yaml"


@pytest.fixture
def run(config: Path) -> Run:
    def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
        return CliRunner().invoke(
            cli, ["--config", str(config), *args], input=input, env=env, prog_name="connect-state"
        )

    return invoke


@pytest.fixture
def at_api(api: FakeApi, run: Run) -> Run:
    """``run`` with a current context on the fake API."""
    assert run("context", "set", "fake", "--url", api.url).exit_code == 0
    return run


def one_error_line(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    return lines[0]


# --- contexts ---------------------------------------------------------------------------------------------------------


def test_the_contexts_file_is_created_private(run: Run, config: Path) -> None:
    result = run(
        "context", "set", "prod", "--url", "https://api.example:8090", "--username", "alice", "--password", "s3"
    )
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o700
    assert yaml.safe_load(config.read_text()) == {
        "current-context": "prod",
        "contexts": {"prod": {"url": "https://api.example:8090", "username": "alice", "password": "s3"}},
    }
    config.chmod(0o644)  # rewritten private whatever its mode was
    assert run("context", "set", "prod", "--password", "${env:PROD_PASSWORD}").exit_code == 0
    assert stat.S_IMODE(config.stat().st_mode) == 0o600


def test_list_hides_secrets_but_shows_references(run: Run) -> None:
    run("context", "set", "a", "--url", "http://a:1", "--token", "t0ps3cret")
    run("context", "set", "b", "--url", "http://b:1", "--username", "bob", "--password", "${env:B_PASSWORD}")
    listed = run("context", "list", "-o", "json")
    assert json.loads(listed.stdout) == {
        "current-context": "a",
        "contexts": {
            "a": {"url": "http://a:1", "token": HIDDEN},
            "b": {"url": "http://b:1", "username": "bob", "password": "${env:B_PASSWORD}"},
        },
    }
    assert "t0ps3cret" not in run("context", "list").stdout


def test_references_are_resolved_when_used(api: FakeApi, run: Run) -> None:
    api.connectors({})
    run("context", "set", "basic", "--url", api.url, "--username", "alice", "--password", "${env:ALICE_PW}")
    run("context", "set", "bearer", "--url", api.url, "--token", "${env:BOT_TOKEN}")
    assert run("get", "connectors", env={"ALICE_PW": "wonder"}).exit_code == 0
    assert run("--context", "bearer", "get", "connectors", env={"BOT_TOKEN": "tk"}).exit_code == 0
    auths = [seen.headers["Authorization"] for seen in api.seen]
    assert auths[0] == "Basic " + base64.b64encode(b"alice:wonder").decode()
    assert auths[-1] == "Bearer tk"


def test_an_unresolvable_reference_is_a_usage_error_before_any_request(api: FakeApi, run: Run) -> None:
    run("context", "set", "basic", "--url", api.url, "--username", "alice", "--password", "${env:NOT_SET_ANYWHERE}")
    result = run("pause", "connector", "x")
    assert result.exit_code == ExitCode.USAGE
    assert "NOT_SET_ANYWHERE" in one_error_line(result)
    assert api.seen == []


def test_unknown_context_writes_nothing(run: Run, config: Path) -> None:
    run("context", "set", "a", "--url", "http://a:1")
    before = config.read_bytes()
    for args in (("context", "use", "nope"), ("context", "delete", "nope"), ("--context", "nope", "get", "connectors")):
        result = run(*args)
        assert result.exit_code == ExitCode.USAGE, args
        assert "unknown context 'nope'" in one_error_line(result)
    assert config.read_bytes() == before


def test_contexts_that_do_not_hold_together_are_refused(run: Run, config: Path) -> None:
    for args in (
        ("--url", "http://a:1", "--username", "a", "--password", "p", "--token", "t"),
        ("--url", "http://a:1", "--username", "a"),
        ("--url", "http://a:1", "--key-file", "k.pem"),
        ("--username", "a", "--password", "p"),  # a new context needs its url
    ):
        result = run("context", "set", "a", *args)
        assert result.exit_code == ExitCode.USAGE, args
        one_error_line(result)
    assert not config.exists()


def test_a_bad_url_or_a_missing_ca_file_is_a_usage_error(run: Run) -> None:
    run("context", "set", "a", "--url", "ftp://a:1")
    assert run("get", "connectors").exit_code == ExitCode.USAGE
    run("context", "set", "a", "--url", "https://a:1", "--ca-file", "missing.pem")
    result = run("get", "connectors")
    assert result.exit_code == ExitCode.USAGE
    assert "ca-file" in one_error_line(result)


def test_use_and_delete(run: Run, config: Path) -> None:
    run("context", "set", "a", "--url", "http://a:1")
    run("context", "set", "b", "--url", "http://b:1")
    assert run("context", "use", "b").exit_code == 0
    assert yaml.safe_load(config.read_text())["current-context"] == "b"
    assert run("context", "delete", "b").exit_code == 0
    assert yaml.safe_load(config.read_text()) == {"contexts": {"a": {"url": "http://a:1"}}}
    result = run("get", "connectors")  # contexts but none current: say so, do not guess
    assert result.exit_code == ExitCode.USAGE
    assert "context use" in one_error_line(result)


def test_unreachable_api(run: Run) -> None:
    run("context", "set", "closed", "--url", "http://127.0.0.1:1")
    result = run("get", "connectors")
    assert result.exit_code == ExitCode.UNREACHABLE
    assert "cannot reach http://127.0.0.1:1 (context closed)" in one_error_line(result)
    assert result.stdout == ""


# --- get, describe ----------------------------------------------------------------------------------------------------


def test_get_connectors_table(api: FakeApi, at_api: Run) -> None:
    api.connectors({"orders-a": "RUNNING", "orders-b": "PAUSED"}, tasks=2)
    api.answer("GET", "/connectors", 200, ["new-one", "orders-a", "orders-b"])  # no status yet: left out of expand
    api.answers[("GET", "/connectors?expand")][1]["orders-a"]["verdict"] = {"verdict": "stalled"}  # issue 35
    result = at_api("get", "connectors")
    assert result.exit_code == 0, result.output
    assert (
        result.stdout.splitlines()
        == table(
            ["NAME", "TYPE", "STATE", "TASKS", "VERDICT"],
            [
                ["new-one", None, None, None, None],
                ["orders-a", "source", "RUNNING", "2/2", "stalled"],
                ["orders-b", "source", "PAUSED", "0/2", None],
            ],
        ).splitlines()
    )
    assert [seen.query for seen in api.seen] == [{}, {"expand": ["status", "info", "verdict"]}]


def test_a_cluster_is_chosen_by_option_environment_or_context(api: FakeApi, at_api: Run) -> None:
    """Issue 37: every path asked under /clusters/<id>, the option before the environment before the context."""
    for path in ("/clusters/prod.eu/connectors", "/clusters/ctx/connectors", "/clusters/env/connectors"):
        api.answer("GET", path, 200, ["a"])
        api.answer("GET", f"{path}?expand", 200, {})
    assert at_api("--cluster", "prod.eu", "get", "connectors").exit_code == 0
    assert at_api("context", "set", "fake", "--cluster", "ctx").exit_code == 0
    assert at_api("get", "connectors").exit_code == 0
    assert at_api("get", "connectors", env={"CONNECT_STATE_CLI_CLUSTER": "env"}).exit_code == 0
    assert at_api("--cluster", "prod.eu", "get", "connectors", env={"CONNECT_STATE_CLI_CLUSTER": "env"}).exit_code == 0
    assert [seen.path for seen in api.seen][::2] == [
        "/clusters/prod.eu/connectors",
        "/clusters/ctx/connectors",
        "/clusters/env/connectors",
        "/clusters/prod.eu/connectors",
    ]
    assert [seen.path for seen in api.seen][1::2] == [seen.path for seen in api.seen][::2]  # then the expansion
    assert "ctx" in at_api("context", "list").stdout.splitlines()[1].split()


def test_clusters_lists_the_apis_clusters_and_marks_the_chosen_one(api: FakeApi, at_api: Run) -> None:
    listed = [
        {"id": "a", "default": True, "group.id": "ga", "bootstrap.servers": "k:9092", "health": {"status": "healthy"}},
        {
            "id": "b",
            "default": False,
            "group.id": "gb",
            "bootstrap.servers": "k:9092",
            "health": {"status": "starting"},
        },
    ]
    api.answer("GET", "/clusters", 200, listed)
    shown = at_api("clusters")
    assert shown.exit_code == 0, shown.output
    assert (
        shown.stdout.splitlines()
        == table(
            ["CURRENT", "ID", "DEFAULT", "GROUP.ID", "BOOTSTRAP.SERVERS", "HEALTH"],
            [["*", "a", True, "ga", "k:9092", "healthy"], ["", "b", False, "gb", "k:9092", "starting"]],
        ).splitlines()
    )
    chosen = at_api("--cluster", "b", "clusters").stdout.splitlines()
    assert [line.split()[0] for line in chosen[1:]] == ["a", "*"]
    assert json.loads(at_api("--cluster", "b", "clusters", "-o", "json").stdout) == listed
    assert {seen.path for seen in api.seen} == {"/clusters"}  # the list is the API's own, under no cluster
    unknown = at_api("--cluster", "c", "clusters")
    assert unknown.exit_code == ExitCode.NOT_FOUND
    assert [line.split()[0] for line in unknown.stdout.splitlines()[1:]] == ["a", "b"]  # listed, none marked
    assert one_error_line(unknown) == "Error: Cluster c not found"


def test_fleet_asks_the_apis_root_with_its_filters_and_lists_every_cluster(api: FakeApi, at_api: Run) -> None:
    body = {
        "connectors": [
            {"cluster": "a", "name": "s", "type": "sink", "version": "4.3.1", "state": "RUNNING",
             "tasks": [{"id": 0, "state": "FAILED"}], "verdict": "failed", "topics": ["t", "u"]},
        ],
        "unavailable": [{"cluster": "b", "message": "no tables yet"}],
    }  # fmt: skip
    api.answer("GET", "/fleet/connectors", 200, body)
    shown = at_api("--cluster", "b", "fleet", "--state", "running", "--topic", "t", "--plugin-version", "4.3.1")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines() == [
        *table(
            ["CLUSTER", "NAME", "TYPE", "VERSION", "STATE", "TASKS", "VERDICT", "TOPICS"],
            [["a", "s", "sink", "4.3.1", "RUNNING", "FAILED", "failed", "t,u"]],
        ).splitlines(),
        "unavailable: b: no tables yet",
    ]
    [seen] = api.seen
    wanted = {"state": ["running"], "topic": ["t"], "version": ["4.3.1"]}
    assert (seen.path, seen.query) == ("/fleet/connectors", wanted)  # no /clusters/b


def test_move_posts_under_the_chosen_cluster_and_shows_the_offsets_moved(api: FakeApi, at_api: Run) -> None:
    body = {
        "name": "c",
        "offsets": [{"partition": {"f": "x"}, "before": None, "offset": {"position": 3}, "change": "restored"}],
        "message": "Connector c created STOPPED in cluster b",
    }
    api.answer("POST", "/clusters/a/connectors/c/move", 201, body)
    shown = at_api("--cluster", "a", "move", "c", "--to", "b")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines()[-1] == "Connector c created STOPPED in cluster b"
    assert "restored" in shown.stdout.splitlines()[1]
    [seen] = api.seen
    assert (seen.method, seen.path, seen.query) == ("POST", "/clusters/a/connectors/c/move", {"to": ["b"]})
    exists = {"error_code": 409, "message": "Connector d already exists"}
    api.answer("POST", "/clusters/a/connectors/d/move", 409, exists)
    refused = at_api("--cluster", "a", "move", "d", "--to", "b")
    assert refused.exit_code != 0 and one_error_line(refused) == "Error: Connector d already exists"


@pytest.mark.parametrize("cluster", ["..", ".", "a/b", "-x"])
def test_a_cluster_id_that_is_no_path_segment_is_refused_before_any_request(
    api: FakeApi, at_api: Run, cluster: str
) -> None:
    result = at_api("--cluster", cluster, "pause", "connector", "a")  # "..": requests would ask /connectors/a/pause
    assert result.exit_code == ExitCode.USAGE
    assert "a cluster id is 1 to 128 letters, digits" in one_error_line(result)
    assert not api.seen


def test_get_connectors_json_and_yaml(api: FakeApi, at_api: Run) -> None:
    api.connectors({"a": "RUNNING"})
    expanded = api.answers[("GET", "/connectors?expand")][1]
    assert json.loads(at_api("get", "connectors", "-o", "json").stdout) == expanded
    assert yaml.safe_load(at_api("get", "connectors", "-o", "yaml").stdout) == expanded


def test_describe_connector(api: FakeApi, at_api: Run) -> None:
    info = {"name": "a/b", "config": {"file": "/in.txt", "password": "[hidden]"}, "tasks": [], "type": "source"}
    api.answer("GET", "/connectors/a%2Fb", 200, info)
    api.answer("GET", "/connectors/a%2Fb/topics", 403, {"error_code": 403, "message": "Topic tracking is disabled."})
    offsets = {"offsets": [{"partition": {"filename": "/in.txt"}, "offset": {"position": 8}}]}
    api.answer("GET", "/connectors/a%2Fb/offsets", 200, offsets)
    result = at_api("describe", "connector", "a/b")
    assert result.exit_code == 0, result.output
    assert "Topics: unavailable: Topic tracking is disabled. (HTTP 403)" in result.stdout
    assert '{"filename":"/in.txt"}  {"position":8}' in result.stdout
    assert json.loads(at_api("describe", "connector", "a/b", "-o", "json").stdout) == {
        "info": info,
        "status": {"error_code": 404, "message": "HTTP 404 Not Found"},
        "topics": {"error_code": 403, "message": "Topic tracking is disabled."},
        "offsets": offsets,
    }


def test_describe_unknown_connector(api: FakeApi, at_api: Run) -> None:
    api.answer("GET", "/connectors/x", 404, {"error_code": 404, "message": "Connector x not found"})
    result = at_api("describe", "connector", "x")
    assert result.exit_code == ExitCode.NOT_FOUND
    assert one_error_line(result) == "Error: Connector x not found"


# --- actions ----------------------------------------------------------------------------------------------------------


def test_pause_by_regex_matches_whole_names(api: FakeApi, at_api: Run) -> None:
    api.connectors({"orders-a": "RUNNING", "orders-b": "RUNNING", "old-orders-c": "RUNNING", "billing": "RUNNING"})
    for name in ("orders-a", "orders-b"):
        api.answer("PUT", f"/connectors/{name}/pause", 202)
    result = at_api("pause", "connector", "-e", "orders-.*", "--yes")
    assert result.exit_code == 0, result.output
    assert api.writes() == [("PUT", "/connectors/orders-a/pause"), ("PUT", "/connectors/orders-b/pause")]
    assert result.stdout.splitlines() == ["[1/2] orders-a: pause requested", "[2/2] orders-b: pause requested"]
    assert "orders-a" in result.stderr and "old-orders-c" not in result.stderr  # the list it announced


def test_bulk_asks_and_a_no_writes_nothing(api: FakeApi, at_api: Run) -> None:
    api.connectors({"orders-a": "RUNNING", "orders-b": "RUNNING"})
    for answer in ("n\n", ""):  # declined, or nobody to ask
        result = at_api("stop", "connector", "-e", "orders-.*", input=answer)
        assert result.exit_code == ExitCode.ABORTED
        assert "Go on?" in result.stderr and "nothing done" in result.stderr
    assert api.writes() == []
    api.answer("PUT", "/connectors/orders-a/stop", 204)
    api.answer("PUT", "/connectors/orders-b/stop", 204)
    assert at_api("stop", "connector", "-e", "orders-.*", input="y\n").exit_code == 0
    assert len(api.writes()) == 2


def test_dry_run_lists_and_writes_nothing(api: FakeApi, at_api: Run) -> None:
    api.connectors({"orders-a": "RUNNING", "orders-b": "RUNNING", "billing": "RUNNING"})
    result = at_api("resume", "connector", "-e", "orders-.*", "billing", "--dry-run")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == ["billing", "orders-a", "orders-b"]
    assert json.loads(at_api("resume", "connector", "-e", "orders-.*", "--dry-run", "-o", "json").stdout) == [
        "orders-a",
        "orders-b",
    ]
    assert api.writes() == []


def test_bad_regex_is_a_usage_error_before_any_request(api: FakeApi, at_api: Run) -> None:
    result = at_api("pause", "connector", "-e", "orders-(", "--yes")
    assert result.exit_code == ExitCode.USAGE
    assert "bad regular expression 'orders-('" in one_error_line(result)
    assert api.seen == []


def test_regex_matching_nothing_is_not_found_and_writes_nothing(api: FakeApi, at_api: Run) -> None:
    api.connectors({"orders-a": "RUNNING"})
    result = at_api("pause", "connector", "-e", "orders-a", "-e", "billing-.*", "--yes")
    assert result.exit_code == ExitCode.NOT_FOUND
    assert "no connector matches 'billing-.*'" in one_error_line(result)
    assert api.writes() == []


def test_nothing_named_is_a_usage_error(at_api: Run) -> None:
    assert at_api("pause", "connector").exit_code == ExitCode.USAGE


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (404, ExitCode.NOT_FOUND),
        (400, ExitCode.REFUSED),
        (403, ExitCode.REFUSED),
        (409, ExitCode.REFUSED),
        (500, ExitCode.FAILED),
        (503, ExitCode.FAILED),
    ],
)
def test_one_connector_exits_with_its_answer(api: FakeApi, at_api: Run, status: int, code: ExitCode) -> None:
    api.answer("PUT", "/connectors/a/pause", status, {"error_code": status, "message": f"answered {status}"})
    result = at_api("pause", "connector", "a")
    assert result.exit_code == code
    assert one_error_line(result) == f"Error: answered {status}"


def test_a_bulk_action_goes_on_after_a_failure_and_exits_partial(api: FakeApi, at_api: Run) -> None:
    api.connectors({"a": "RUNNING", "b": "RUNNING", "c": "RUNNING"})
    api.answer("PUT", "/connectors/a/pause", 202)
    api.answer("PUT", "/connectors/b/pause", 403, {"error_code": 403, "message": "bot may not PUT /connectors/b/pause"})
    api.answer("PUT", "/connectors/c/pause", 202)
    result = at_api("pause", "connector", "-e", ".*", "--yes", "-o", "json")
    assert result.exit_code == ExitCode.PARTIAL
    assert [(o["connector"], o["ok"], o["status"]) for o in json.loads(result.stdout)] == [
        ("a", True, 202),
        ("b", False, 403),
        ("c", True, 202),
    ]
    assert "[2/3] b: failed: bot may not PUT /connectors/b/pause (HTTP 403)" in result.stderr
    assert result.stderr.strip().splitlines()[-1] == "Error: 1 of 3 connectors failed: b (HTTP 403)"


def test_restart_passes_connects_query_and_reads_the_plan(api: FakeApi, at_api: Run) -> None:
    plan = {
        "name": "a",
        "connector": {"state": "RUNNING", "worker_id": "w"},
        "tasks": [{"id": 0, "state": "RESTARTING", "worker_id": "w"}, {"id": 1, "state": "RUNNING", "worker_id": "w"}],
    }
    api.answer("POST", "/connectors/a/restart", 202, plan)
    result = at_api("restart", "connector", "a", "--include-tasks", "--only-failed")
    assert result.exit_code == 0, result.output
    assert api.seen[-1].query == {"includeTasks": ["true"], "onlyFailed": ["true"]}
    assert result.stdout.strip() == "a: restarting 1 task"
    api.answer("POST", "/connectors/a/restart", 204)
    assert at_api("restart", "connector", "a").stdout.strip() == "a: restart requested"
    assert api.seen[-1].query == {"includeTasks": ["false"], "onlyFailed": ["false"]}


# --- offsets, timeline ------------------------------------------------------------------------------------------------


def test_offsets_patch_sends_the_file_as_it_is(api: FakeApi, at_api: Run, tmp_path: Path) -> None:
    body = {"offsets": [{"partition": {"filename": "/in.txt"}, "offset": {"position": 4}}]}
    api.answer("PATCH", "/connectors/a/offsets", 200, {"message": "The offsets for this connector have been altered"})
    patch = tmp_path / "patch.json"
    patch.write_text(json.dumps(body))
    result = at_api("offsets", "patch", "a", "-f", str(patch))
    assert (result.exit_code, result.stdout.strip()) == (0, "The offsets for this connector have been altered")
    assert at_api("offsets", "patch", "a", "-f", "-", input=json.dumps(body)).exit_code == 0
    assert [seen.body for seen in api.seen] == [body, body]


def test_offsets_patch_of_a_file_that_is_not_json_sends_nothing(api: FakeApi, at_api: Run) -> None:
    result = at_api("offsets", "patch", "a", "-f", "-", input="{offsets: nope")
    assert result.exit_code == ExitCode.USAGE
    one_error_line(result)
    assert api.seen == []


def test_offsets_get_and_reset(api: FakeApi, at_api: Run) -> None:
    offsets = {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 5}}]}
    api.answer("GET", "/connectors/a/offsets", 200, offsets)
    api.answer("DELETE", "/connectors/a/offsets", 400, {"error_code": 400, "message": "Connectors must be STOPPED"})
    assert json.loads(at_api("offsets", "get", "a", "-o", "json").stdout) == offsets
    assert at_api("offsets", "reset", "a").exit_code == ExitCode.REFUSED


def test_offsets_restore_is_a_dry_run_unless_apply(api: FakeApi, at_api: Run) -> None:
    partition = {"filename": "/in.txt"}
    change = {"partition": partition, "current": {"position": 8}, "restored": {"position": 4}, "change": "altered"}
    body = {"connector": "a", "at": 1, "applied": False, "message": "Dry run: nothing written", "offsets": [change]}
    api.answer("POST", "/connectors/a/offsets/restore", 200, body)
    dry = at_api("offsets", "restore", "a", "--at", "2026-11-22T09:00:00Z")
    assert dry.exit_code == 0 and "altered" in dry.stdout and "Dry run" in dry.stdout
    assert at_api("offsets", "restore", "a", "--at", "1", "--apply").exit_code == 0
    assert [seen.query for seen in api.seen] == [
        {"at": ["2026-11-22T09:00:00Z"], "apply": ["false"]},
        {"at": ["1"], "apply": ["true"]},
    ]
    assert at_api("offsets", "restore", "a").exit_code == ExitCode.USAGE  # --at is required: nothing sent
    assert len(api.seen) == 2


def test_restore_connector_sends_its_time_and_initial_state(api: FakeApi, at_api: Run) -> None:
    body = {"name": "a", "cleanup_hooks_ran": [], "message": "Connector a restored STOPPED with its config of ..."}
    api.answer("POST", "/connectors/a/restore", 201, body)
    done = at_api("restore", "connector", "a")
    assert done.exit_code == 0 and "Connector a restored STOPPED" in done.stdout
    assert at_api("restore", "connector", "a", "--at", "1", "--initial-state", "paused").exit_code == 0
    assert [seen.query for seen in api.seen] == [
        {"initial_state": ["STOPPED"]},
        {"initial_state": ["PAUSED"], "at": ["1"]},
    ]
    assert at_api("restore", "connector", "a", "--initial-state", "BOGUS").exit_code == ExitCode.USAGE
    api.answer("POST", "/connectors/a/restore", 409, {"error_code": 409, "message": "Connector a already exists"})
    refused = at_api("restore", "connector", "a")
    assert refused.exit_code == ExitCode.REFUSED and "Connector a already exists" in refused.stderr
    assert len(api.seen) == 3


def test_restore_connector_with_its_offsets_sends_the_flag_and_shows_them(api: FakeApi, at_api: Run) -> None:
    change = {"partition": {"filename": "/in"}, "current": None, "restored": {"position": 4}, "change": "restored"}
    body = {"name": "a", "offsets": [change], "message": "Connector a restored STOPPED ...\nIts offsets as of ..."}
    api.answer("POST", "/connectors/a/restore", 201, body)
    done = at_api("restore", "connector", "a", "--offsets")
    assert done.exit_code == 0, done.output
    assert [seen.query for seen in api.seen] == [{"initial_state": ["STOPPED"], "offsets": ["true"]}]
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["PARTITION", "CURRENT", "RESTORED", "CHANGE"]
    assert "restored" in lines[1] and lines[-1] == "Its offsets as of ..."


def test_history_passes_its_filters_and_says_where_the_next_page_starts(api: FakeApi, at_api: Run) -> None:
    events = [
        {
            "event": "created",
            "details": {"connector_class": "X", "config": {"a": "1"}},
            "source": "config",
            "kafka_partition": 0,
            "kafka_offset": 3,
            "kafka_timestamp": 1767225600000,
        }
    ]
    page = {"connector": "a", "total": 2, "offset": 0, "limit": 1, "next_offset": 1, "events": events}
    api.answer("GET", "/connectors/a/events", 200, page)
    result = at_api(
        "history", "a", "--kind", "created", "--kind", "deleted", "--since", "2026-01-01T00:00:00Z", "--limit", "1"
    )
    assert result.exit_code == 0, result.output
    assert api.seen[-1].query == {
        "kind": ["created", "deleted"],
        "since": ["2026-01-01T00:00:00Z"],
        "limit": ["1"],
        "offset": ["0"],
    }
    assert "2026-01-01T00:00:00.000Z  created  config  connector_class=X config=1 keys" in result.stdout
    assert "--offset 1 for more" in result.stderr


def test_deletions_and_heartbeats_tables(api: FakeApi, at_api: Run) -> None:
    api.answer("GET", "/connectors/gone/deletions", 200, {"name": "gone", "deletions": []})
    api.answer("GET", "/connectors/a/heartbeats", 200, {"name": "a", "partitions": [], "heartbeats": []})
    assert at_api("deletions", "gone").stdout.strip() == "No deletion of gone recorded."
    assert at_api("heartbeats", "a", "--limit", "5").exit_code == 0
    assert api.seen[-1].query == {"limit": ["5"]}


# --- completion, version, docs ----------------------------------------------------------------------------------------


def test_connector_names_complete_from_the_api(api: FakeApi, at_api: Run, config: Path) -> None:
    api.connectors({"orders-a": "RUNNING", "orders-b": "RUNNING", "billing": "RUNNING"})
    env = {
        "CONNECT_STATE_CLI_CONFIG": str(config),
        "_CONNECT_STATE_COMPLETE": "bash_complete",
        "COMP_WORDS": "connect-state pause connector ord",
        "COMP_CWORD": "3",
    }
    result = at_api(env=env)
    assert result.stdout.split() == ["plain,orders-a", "plain,orders-b"]


def test_version(run: Run) -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert re.fullmatch(r"connect-state, version \S+\n", result.stdout)


def test_readme_documents_every_exit_code() -> None:
    text = README.read_text(encoding="utf-8")
    documented = {int(code): name for code, name in re.findall(r"^\| `(\d)` \| (\w[\w ]*?) \|", text, re.MULTILINE)}
    assert documented == {code.value: code.name.lower().replace("_", " ") for code in ExitCode}
