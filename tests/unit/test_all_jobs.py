"""``connect-state-jobs``: which jobs one driver runs (``--jobs``), in dependency order."""

from __future__ import annotations

import pytest

from connect_state.core.errors import ConfigError
from connect_state.spark.all_jobs import every_job, select_jobs
from jobs.all import main

NAMES = [
    "active_topics",
    "connector_states",
    "offsets",
    "heartbeats",
    "cleanup",
    "restarts",
    "watch",
    "alerts",
    "fleet_tables",
]


def test_every_job_in_dependency_order() -> None:
    assert [job.name for job in every_job()] == NAMES


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (None, NAMES),
        ("offsets,active_topics", ["active_topics", "offsets"]),  # the dependency order, not the argument's
        (" cleanup , heartbeats ", ["heartbeats", "cleanup"]),
        ("offsets,offsets", ["offsets"]),
        (",".join(reversed(NAMES)), NAMES),
    ],
)
def test_selected_jobs_keep_the_dependency_order(names: str | None, expected: list[str]) -> None:
    assert [job.name for job in select_jobs(every_job(), names)] == expected


@pytest.mark.parametrize(("names", "said"), [("offsets,nope", "unknown job nope"), (" , ", "no job named")])
def test_a_bad_selection_names_the_jobs(names: str, said: str) -> None:
    with pytest.raises(ConfigError) as raised:
        select_jobs(every_job(), names)
    assert said in str(raised.value)
    assert ", ".join(NAMES) in str(raised.value)


def test_the_console_script_refuses_an_unknown_job_with_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--jobs", "active_topics,sink"])
    assert exited.value.code == 2
    assert "--jobs: unknown job sink; the jobs are active_topics" in capsys.readouterr().err
