"""Building a SparkSession with Delta Lake, Spark's Kafka source and Hadoop's S3A connector.

Started by a console script (``connect-state-jobs`` ...), the session gets the jars of ``spark.jars.dir`` (default: the
source checkout's ``jvm/spark/lib``, fetched by ``make jars``) with ``spark.jars`` (never Ivy ``spark.jars.packages``,
never ``extraClassPath``, which would put them ahead of Spark's own jars), the master of ``spark.master`` and a small
number of shuffle and Delta snapshot partitions. Under ``spark-submit`` (or on Databricks) the JVM was launched before
us: the jars come from ``--jars`` (``connect-state-jars`` prints the list), and the master and the partitions are the
submitter's to choose (``--master``, ``--conf spark.sql.shuffle.partitions=N``); this module leaves them alone.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from connect_state.core.errors import ConfigError
from connect_state.core.settings import Settings, add_config_arguments, settings_from_args

#: ``jvm/spark/lib`` of the source checkout this module runs from (absent in an installed wheel).
CHECKOUT_SPARK_LIB = Path(__file__).resolve().parents[2] / "jvm" / "spark" / "lib"

#: Shuffle partitions of a session the console scripts start themselves (local masters). The number is frozen into a
#: stateful query's checkpoint at its first run: changing it later needs new checkpoints.
LOCAL_SHUFFLE_PARTITIONS = "4"

#: Partitions of the job that rebuilds a Delta table's snapshot from its log, in a session the console scripts start
#: themselves (Delta's default is 50: 50 tasks for every new version read, on a local master's few cores). Measured on
#: a 2-core machine, 15 rounds of a MERGE, a read and an append of small tables: 140 s with 50, 41 s with 2, 48 s with
#: 4. Under spark-submit and on Databricks the cluster's setting stays.
LOCAL_SNAPSHOT_PARTITIONS = "2"

#: Generated classes Spark keeps compiled (``spark.sql.codegen.cache.maxEntries``, default 100), in a session the
#: console scripts start themselves. The jobs of one driver plan about 170 distinct pieces of generated code in turn,
#: so with 100 the cache missed nearly every time: Janino compiled the same code again (14 compilations a second under a
#: trickle of changes, 824 of 169 distinct codes in four minutes) and the JIT compiled the new classes again.
#: A static setting: under spark-submit and on Databricks it is the submitter's (the README's command passes it).
LOCAL_CODEGEN_CACHE_ENTRIES = "1000"

# Table features deltalake (delta-rs) cannot read through to_pyarrow/to_pandas stay off (stack notes §4.3/§4.4).
DELTA_DEFAULTS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.properties.defaults.enableDeletionVectors": "false",
    "spark.databricks.delta.properties.defaults.checkpointPolicy": "classic",
    "spark.databricks.delta.properties.defaults.columnMapping.mode": "none",
}


def jar_paths(jars_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Sorted absolute paths of the jars in ``jars_dir`` (``spark.jars.dir``), default the checkout's jvm/spark/lib."""
    folder = Path(jars_dir) if jars_dir else CHECKOUT_SPARK_LIB
    jars = sorted(str(p.resolve()) for p in folder.glob("*.jar")) if folder.is_dir() else []
    if not jars:
        hint = "run `make jars`" if not jars_dir else "point spark.jars.dir at the jars `make jars` fetched"
        raise ConfigError(
            f"no Spark jars in {folder}: {hint} (or set spark.jars.dir; under spark-submit pass them with --jars)"
        )
    return jars


def under_spark_submit() -> bool:
    """True when a JVM was already launched for us (spark-submit, Databricks): the classpath, the master and the
    shuffle partitions are not ours to set."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or "DATABRICKS_RUNTIME_VERSION" in os.environ


def build_session(
    app_name: str,
    master: str | None = "local[2]",
    extra_conf: Mapping[str, str] | None = None,
    jars_dir: str | os.PathLike[str] | None = None,
) -> SparkSession:
    """Get or create the SparkSession with Delta configured.

    Outside spark-submit the jars of ``jars_dir`` are added, ``master``, :data:`LOCAL_SHUFFLE_PARTITIONS`,
    :data:`LOCAL_SNAPSHOT_PARTITIONS` and :data:`LOCAL_CODEGEN_CACHE_ENTRIES` are set, and the Python workers are
    pinned to this interpreter (``PYSPARK_PYTHON``), so executors find pandas and pyarrow.
    """
    builder = SparkSession.builder.appName(app_name)
    conf = {**DELTA_DEFAULTS, "spark.sql.session.timeZone": "UTC", "spark.ui.showConsoleProgress": "false"}
    if not under_spark_submit():
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        if master:
            builder = builder.master(master)
        conf["spark.jars"] = ",".join(jar_paths(jars_dir))
        conf["spark.sql.shuffle.partitions"] = LOCAL_SHUFFLE_PARTITIONS
        conf["spark.databricks.delta.snapshotPartitions"] = LOCAL_SNAPSHOT_PARTITIONS
        conf["spark.sql.codegen.cache.maxEntries"] = LOCAL_CODEGEN_CACHE_ENTRIES
    conf.update(extra_conf or {})
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def driver_java_conf(settings: Settings) -> dict[str, str]:
    """The Spark setting that gives a driver we launch ``spark.driver.java.options`` (none when it is empty)."""
    java_options = settings.spark_driver_java_options.strip()
    return {"spark.driver.extraJavaOptions": java_options} if java_options else {}


def job_session(app_name: str, settings: Settings) -> SparkSession:
    """The session of a job's console script: :func:`build_session` with the settings' master, jars and driver JVM
    options (``spark.driver.java.options``), then the settings' storage options
    (:func:`connect_state.spark.storage.configure_storage`)."""
    from connect_state.spark.storage import configure_storage

    extra = driver_java_conf(settings) if not under_spark_submit() else {}
    spark = build_session(app_name, settings.spark_master, extra, jars_dir=settings.spark_jars_dir or None)
    configure_storage(spark, settings)
    return spark


def main(argv: list[str] | None = None) -> int:
    """Console script ``connect-state-jars``: print the comma-separated jar list for ``spark-submit --jars``."""
    parser = argparse.ArgumentParser(
        prog="connect-state-jars",
        description="Print the jars of spark.jars.dir (default: the checkout's jvm/spark/lib) for spark-submit --jars.",
    )
    add_config_arguments(parser)
    args = parser.parse_args(argv)
    try:
        print(",".join(jar_paths(settings_from_args(args).spark_jars_dir or None)))
    except ConfigError as err:
        print(f"connect-state-jars: {err}", file=sys.stderr)
        return 2
    return 0
