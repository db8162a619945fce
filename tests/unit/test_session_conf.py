"""The settings the console scripts derive for Spark (``connect_state/spark/session.py``), and settings checked when
they are loaded."""

from __future__ import annotations

import pytest

from connect_state.core.errors import ConfigError
from connect_state.core.settings import load_settings
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


@pytest.mark.parametrize("value", ["com.example.Foo=Sink", "com.example.Foo=both", "com.example.Foo="])
def test_connector_class_types_must_be_source_or_sink(value):
    # The jobs' folds decide connector types with it: a bad value is refused at start, not in every batch.
    with pytest.raises(ConfigError, match=r"connector\.class\.types: the type of com\.example\.Foo must be"):
        load_settings(overrides={"connector.class.types": value}, environ={})


def test_connector_class_types_are_read():
    settings = load_settings(overrides={"connector.class.types": "a.B=source,c.D=sink"}, environ={})
    assert settings.connector_class_types == {"a.B": "source", "c.D": "sink"}
