"""The fault-injection hook (connect_state/core/faults.py): ``CONNECT_STATE_FAULT_INJECT=<point>[:<n>]`` kills the
process the n-th time it reaches the point; unset, nothing happens."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from connect_state.core.errors import ConfigError
from connect_state.core.faults import ENV, FaultPoint, Faults, fault_point, parse_faults


def test_parse() -> None:
    assert parse_faults("") == {}
    assert parse_faults("after_history_write:3, batch_start") == {"after_history_write": 3, "batch_start": 1}
    with pytest.raises(ConfigError, match="unknown fault point 'nowhere'"):
        parse_faults("nowhere")
    for bad in ("batch_start:0", "batch_start:x", "batch_start:-1"):
        with pytest.raises(ConfigError, match="positive integer"):
            parse_faults(bad)


def test_the_nth_time_kills_and_only_that_one() -> None:
    kills: list[int] = []
    faults = Faults({"after_history_write": 3}, kill=lambda: kills.append(1))
    for _ in range(2):
        faults.reached(FaultPoint.AFTER_HISTORY_WRITE)
        faults.reached(FaultPoint.BATCH_START)  # not armed
    assert kills == []
    faults.reached(FaultPoint.AFTER_HISTORY_WRITE)
    assert kills == [1]
    faults.reached(FaultPoint.AFTER_HISTORY_WRITE)
    assert kills == [1]


def test_unset_does_nothing() -> None:
    fault_point(FaultPoint.BATCH_START)  # the test process has no CONNECT_STATE_FAULT_INJECT


def run_child(env_value: str) -> subprocess.CompletedProcess[str]:
    code = (
        "from connect_state.core.faults import FaultPoint, fault_point\n"
        "for i in range(3):\n"
        "    print('batch', i, flush=True)\n"
        "    fault_point(FaultPoint.BATCH_START)\n"
        "print('survived', flush=True)\n"
    )
    env = {**os.environ, ENV: env_value}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_a_process_kills_itself_with_sigkill_at_the_armed_point() -> None:
    done = run_child("batch_start:2")
    assert done.returncode == -signal.SIGKILL
    assert done.stdout.split("\n")[:2] == ["batch 0", "batch 1"] and "survived" not in done.stdout
    assert "killing the process at batch_start" in done.stderr or done.stderr == ""


def test_a_bad_value_fails_the_process_at_start() -> None:
    done = run_child("batch_start:zero")
    assert done.returncode == 1 and "CONNECT_STATE_FAULT_INJECT" in done.stderr
