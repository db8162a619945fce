"""Checkpoints and tables seen through Hadoop's ``FileSystem`` in the Spark JVM: the one way the jobs look at storage.

Spark writes the checkpoints and Delta the tables through Hadoop's filesystems (local disk, ``s3a://``, ``abfss://``,
``gs://``, ``dbfs:/`` ...); every existence check, listing or read of them by the jobs goes through the same
filesystems here, never through ``pathlib``, so a checkpoint in object storage is found like a local one.

:func:`configure_storage` hands the ``storage.*`` settings (:func:`connect_state.core.storage.hadoop_options`) to the
SparkContext's Hadoop configuration before the first access.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

from connect_state.core.settings import Settings
from connect_state.core.storage import Location, hadoop_options

log = logging.getLogger("connect_state.spark.storage")

Where = Location | str


#: The session setting that names Spark's class for writing checkpoint files.
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"

#: Spark's checkpoint file manager that renames through Hadoop's ``FileSystem`` (on a local disk: ``rename(2)``, as
#: atomic as the default's). Spark's default renames through ``FileContext``, whose local filesystem runs the
#: ``readlink`` program on both paths of every rename (Hadoop's ``RawLocalFs.getFileLinkStatus``): every offsets and
#: commit log entry and every state store file a new process (``bench/RESULTS.md``).
LOCAL_CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


def configure_storage(spark: SparkSession, settings: Settings) -> dict[str, str]:
    """Set the Hadoop options the settings ask for (S3 endpoint, region, path style) on the SparkContext's Hadoop
    configuration, which the jobs' filesystems, Spark's checkpoints and Delta read; return them. Checkpoints on a local
    disk are written by :data:`LOCAL_CHECKPOINT_FILE_MANAGER` unless the session names a manager already."""
    options = hadoop_options(settings)
    if options:
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        for key, value in options.items():
            conf.set(key, value)
        log.info("Hadoop storage options: %s", ", ".join(f"{k}={v}" for k, v in sorted(options.items())))
    configure_checkpoint_manager(spark, settings.checkpoint_root)
    return options


def configure_checkpoint_manager(spark: SparkSession, checkpoint_root: Where) -> None:
    """Name :data:`LOCAL_CHECKPOINT_FILE_MANAGER` when ``checkpoint_root`` is on the local filesystem, this Spark has
    that class, and no manager is named already (``--conf spark.sql.streaming.checkpointFileManagerClass``, or the
    same key in the Hadoop configuration). Set in the SparkContext's Hadoop configuration, which every session's
    starts from, so the jobs' cloned sessions share it (Spark does not copy it to a new session's settings); it
    applies to every checkpoint of the SparkContext."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    if spark.conf.get(CHECKPOINT_FILE_MANAGER, None) is not None or hadoop.get(CHECKPOINT_FILE_MANAGER) is not None:
        return
    if on_local_disk(spark, checkpoint_root) and _has_class(spark, LOCAL_CHECKPOINT_FILE_MANAGER):
        hadoop.set(CHECKPOINT_FILE_MANAGER, LOCAL_CHECKPOINT_FILE_MANAGER)


def _has_class(spark: SparkSession, name: str) -> bool:
    """Whether the driver's JVM can load class ``name`` (Spark's own classes move between packages across versions)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        jvm.java.lang.Class.forName(name, False, jvm.java.lang.Thread.currentThread().getContextClassLoader())
    except Exception:  # Py4J wraps java.lang.ClassNotFoundException
        return False
    return True


def on_local_disk(spark: SparkSession, location: Where) -> bool:
    """Whether Hadoop reaches ``location`` through its local filesystem (a path without a scheme can be on the
    cluster's default filesystem: HDFS, DBFS)."""
    fs, _ = _filesystem(spark, location)
    return str(fs.getScheme()) == "file"


def _filesystem(spark: SparkSession, location: Where) -> tuple[Any, Any]:
    """Hadoop's ``FileSystem`` of ``location`` and its ``Path``, with the session's Hadoop configuration (the one
    Spark's streaming checkpoints and Delta use)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(str(location))
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    return path.getFileSystem(conf), path


def exists(spark: SparkSession, location: Where) -> bool:
    """Whether ``location`` (a file or a directory) exists."""
    fs, path = _filesystem(spark, location)
    return bool(fs.exists(path))


def is_dir(spark: SparkSession, location: Where) -> bool:
    """Whether ``location`` is a directory (on object stores: a prefix with objects under it, or a marker)."""
    fs, path = _filesystem(spark, location)
    try:
        return bool(fs.getFileStatus(path).isDirectory())
    except Exception as err:  # Py4J wraps java.io.FileNotFoundException
        if _not_found(err):
            return False
        raise


def list_names(spark: SparkSession, location: Where) -> list[str]:
    """The names of the entries directly under ``location``, sorted; none when it does not exist."""
    fs, path = _filesystem(spark, location)
    try:
        statuses = fs.listStatus(path)
    except Exception as err:
        if _not_found(err):
            return []
        raise
    return sorted(str(status.getPath().getName()) for status in statuses)


def read_text(spark: SparkSession, location: Where) -> str | None:
    """The UTF-8 text of the file at ``location``; None when there is none."""
    fs, path = _filesystem(spark, location)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        stream = fs.open(path)
    except Exception as err:
        if _not_found(err):
            return None
        raise
    try:
        data = jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
    finally:
        stream.close()
    return bytes(data).decode("utf-8")


def delete(spark: SparkSession, location: Where) -> bool:
    """Delete ``location`` and everything under it; False when there was nothing."""
    fs, path = _filesystem(spark, location)
    return bool(fs.delete(path, True))


def _not_found(err: Exception) -> bool:
    """A Py4J error whose Java exception is ``java.io.FileNotFoundException`` (told apart by its class, not text)."""
    java_exception = getattr(err, "java_exception", None)
    if java_exception is None:
        return False
    jvm = SparkContext._jvm
    if jvm is None:
        return False
    return bool(jvm.java.lang.Class.forName("java.io.FileNotFoundException").isInstance(java_exception))
