"""The heartbeats query's trigger in a continuous run (``heartbeat.trigger.interval`` sets a floor)."""

from __future__ import annotations

import pytest

from connect_state.core.errors import ConfigError
from connect_state.core.settings import Settings
from connect_state.spark.heartbeats import query_trigger


@pytest.mark.parametrize(
    ("trigger", "floor", "expected"),
    [
        ("1 second", "10 seconds", "10 seconds"),  # the default floor under a short trigger
        ("30 seconds", "10 seconds", "30 seconds"),  # a longer trigger is kept
        ("500 ms", "0 seconds", "500 ms"),  # no floor
        ("1 minute", "60000", "1 minute"),  # equal: the jobs' own
    ],
)
def test_the_longer_of_the_two_intervals(settings: Settings, trigger: str, floor: str, expected: str) -> None:
    configured = settings.with_overrides(**{"trigger.interval": trigger, "heartbeat.trigger.interval": floor})
    assert query_trigger(configured) == expected


def test_the_default_floor_is_ten_seconds(settings: Settings) -> None:
    assert settings.heartbeat_trigger_interval == "10 seconds"


def test_a_bad_floor_names_its_setting(settings: Settings) -> None:
    with pytest.raises(ConfigError, match=r"heartbeat\.trigger\.interval"):
        query_trigger(settings.with_overrides(**{"heartbeat.trigger.interval": "soon"}))
