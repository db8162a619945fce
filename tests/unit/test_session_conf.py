"""The Spark settings the console scripts derive from connect-state's own (``connect_state/spark/session.py``)."""

from __future__ import annotations

import pytest

from connect_state.settings import load_settings
from connect_state.spark.session import driver_java_conf


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (  # the shipped default: C1 only, with a tiered JIT's code cache
            None,
            {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"},
        ),
        ("-XX:+UseSerialGC -Dx=1", {"spark.driver.extraJavaOptions": "-XX:+UseSerialGC -Dx=1"}),
        ("  ", {}),  # empty: the JVM's defaults, spark.driver.extraJavaOptions left alone
    ],
)
def test_driver_java_options_become_the_drivers_extra_java_options(value, expected):
    overrides = {} if value is None else {"spark.driver.java.options": value}
    assert driver_java_conf(load_settings(overrides=overrides, environ={})) == expected
