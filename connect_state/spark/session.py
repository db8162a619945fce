"""Building a SparkSession with Delta Lake and Spark's Kafka source from the jars `make jars` fetched.

The jars are handed to Spark with ``spark.jars`` (never Ivy ``spark.jars.packages``, never ``extraClassPath``):
see ../shared/spec/spark-delta-stack.md §2. Under ``spark-submit`` pass the same list with ``--jars``
(``connect-state-jars`` prints it) and this module leaves the classpath alone.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from connect_state.errors import ConfigError

SPARK_LIB_ENV = "CONNECT_STATE_SPARK_LIB"
DEFAULT_SPARK_LIB = Path(__file__).resolve().parents[2] / "jvm" / "spark" / "lib"

# Table features deltalake (delta-rs) cannot read through to_pyarrow/to_pandas stay off (stack notes §4.3/§4.4).
DELTA_DEFAULTS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.properties.defaults.enableDeletionVectors": "false",
    "spark.databricks.delta.properties.defaults.checkpointPolicy": "classic",
    "spark.databricks.delta.properties.defaults.columnMapping.mode": "none",
}


def jar_paths(lib: Path | None = None) -> list[str]:
    """Sorted absolute paths of the Delta and Kafka-source jars."""
    folder = Path(os.environ.get(SPARK_LIB_ENV) or lib or DEFAULT_SPARK_LIB)
    jars = sorted(str(p.resolve()) for p in folder.glob("*.jar"))
    if not jars:
        raise ConfigError(f"no Spark jars in {folder}: run `make jars` (or set {SPARK_LIB_ENV})")
    return jars


def _under_spark_submit() -> bool:
    """True when a JVM was already launched for us (spark-submit, Databricks): the classpath is not ours to set."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(
    app_name: str,
    master: str | None = "local[2]",
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Get or create the SparkSession with Delta configured.

    Outside spark-submit the jars from ``jvm/spark/lib`` are added and the Python workers are pinned to this
    interpreter (``PYSPARK_PYTHON``), so executors find pandas and pyarrow.
    """
    builder = SparkSession.builder.appName(app_name)
    if not _under_spark_submit():
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        if master:
            builder = builder.master(master)
        builder = builder.config("spark.jars", ",".join(jar_paths()))
    conf = {
        **DELTA_DEFAULTS,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.showConsoleProgress": "false",
        **(extra_conf or {}),
    }
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def main() -> None:
    """Console script ``connect-state-jars``: print the comma-separated jar list for ``spark-submit --jars``."""
    print(",".join(jar_paths()))
