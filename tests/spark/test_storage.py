"""The jobs' look at checkpoints and tables through Hadoop's filesystem (connect_state/spark/storage.py and the
checkpoint readers built on it), on a local directory and in a bucket of the session's S3-compatible server."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from connect_state.core.settings import load_settings
from connect_state.core.storage import Location
from connect_state.dev.s3_server import S3Server
from connect_state.spark import delta_io, storage
from connect_state.spark.checkpoint import (
    discard_interrupted_first_entry,
    latest_positions,
    offset_log_batches,
    planned_positions,
)
from connect_state.spark.source_offsets import checkpoint_topics
from connect_state.spark.storage import configure_storage
from connect_state.spark.streaming import checkpoint_query_id
from connect_state.tables.schemas import CONNECTORS
from tests.fixtures.s3 import TEST_BUCKET
from tests.fixtures.spark import await_query

pytestmark = pytest.mark.spark

METADATA = '{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{}}'


def write_checkpoint(spark: SparkSession, checkpoint: Location) -> None:
    """A checkpoint as Spark leaves it: ``metadata`` and two entries of the offsets log (and a checksum file)."""
    files = {
        "metadata": '{"id":"0f4ab5a1-6d02-4a37-9cd4-8f3e4d1c2b10"}\n',
        "offsets/1": f'v1\n{METADATA}\n{{"connect-offsets":{{"0":3}}}}',
        "offsets/10": f'v1\n{METADATA}\n{{"connect-offsets":{{"0":5,"1":2}},"own-offsets":{{"0":1}}}}',
        "offsets/.10.crc": "ignored",
    }
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    for name, text in files.items():
        path = jvm.org.apache.hadoop.fs.Path(str(checkpoint / name))
        out = path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf()).create(path, True)
        out.write(bytearray(text.encode()))
        out.close()


def check_checkpoint_reads(spark: SparkSession, root: Location) -> None:
    missing = root / "none"
    assert not storage.exists(spark, missing) and not storage.is_dir(spark, missing)
    assert storage.list_names(spark, missing) == [] and storage.read_text(spark, missing / "metadata") is None
    assert offset_log_batches(spark, missing) == [] and latest_positions(spark, missing) is None
    assert checkpoint_topics(spark, missing) == set()

    checkpoint = root / "query"
    write_checkpoint(spark, checkpoint)
    assert storage.exists(spark, checkpoint) and storage.is_dir(spark, checkpoint)
    assert storage.list_names(spark, checkpoint) == ["metadata", "offsets"]
    assert checkpoint_query_id(spark, str(checkpoint)) == "0f4ab5a1-6d02-4a37-9cd4-8f3e4d1c2b10"
    assert offset_log_batches(spark, checkpoint) == [1, 10]
    assert planned_positions(spark, checkpoint, 1) == {("connect-offsets", 0): 3}
    assert planned_positions(spark, checkpoint, 11) is None and planned_positions(spark, checkpoint, -1) is None
    assert latest_positions(spark, checkpoint) == {
        ("connect-offsets", 0): 5,
        ("connect-offsets", 1): 2,
        ("own-offsets", 0): 1,
    }
    assert checkpoint_topics(spark, checkpoint) == {"connect-offsets", "own-offsets"}
    assert storage.delete(spark, checkpoint) and not storage.exists(spark, checkpoint)


def test_a_local_checkpoint_reads_through_hadoop(spark: SparkSession, tmp_path: Path) -> None:
    check_checkpoint_reads(spark, Location.parse(str(tmp_path)))
    check_checkpoint_reads(spark, Location(f"file://{tmp_path}/uri"))


def test_a_checkpoint_in_a_bucket_reads_through_hadoop(spark_on_s3: SparkSession, s3_server: S3Server) -> None:
    prefix = f"storage-{uuid.uuid4().hex[:8]}"
    settings = load_settings(overrides=s3_server.storage_settings(TEST_BUCKET, prefix), environ={})
    configure_storage(spark_on_s3, settings)
    check_checkpoint_reads(spark_on_s3, settings.checkpoint_root)
    assert str(settings.checkpoint_root) == f"s3a://{TEST_BUCKET}/{prefix}/checkpoints"
    write_checkpoint(spark_on_s3, settings.checkpoint_root / "kept")
    keys = s3_server.list_keys(TEST_BUCKET, f"{prefix}/")
    assert f"{prefix}/checkpoints/kept/offsets/10" in keys and f"{prefix}/checkpoints/kept/metadata" in keys


def test_a_table_whose_creation_was_killed_is_created_again(spark: SparkSession, tmp_path: Path) -> None:
    """A driver killed while creating a table leaves ``_delta_log`` without a commit (seen in the crash test: every
    later start of the job failed with ``DELTA_TABLE_NOT_FOUND``); the next start creates the table."""
    root = Location.parse(str(tmp_path))
    (tmp_path / CONNECTORS.name / "_delta_log").mkdir(parents=True)
    assert delta_io.create_table(spark, root, CONNECTORS)  # it did not exist: nothing was committed
    assert spark.read.format("delta").load(str(root / CONNECTORS.name)).count() == 0
    assert not delta_io.create_table(spark, root, CONNECTORS)  # now it does


def test_local_checkpoints_are_written_through_hadoops_filesystem(spark: SparkSession, tmp_path: Path) -> None:
    """Spark's default checkpoint manager goes through ``FileContext``, which runs ``readlink`` on every rename of a
    local file; the jobs' sessions write local checkpoints through ``FileSystem``, and a stateful query keeps its
    state across runs with it."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    checkpoint = tmp_path / "checkpoint"
    settings = load_settings(overrides={"delta.root": str(tmp_path), "checkpoint.root": str(checkpoint)}, environ={})
    try:
        configure_storage(spark, settings)
        manager = spark._jsparkSession.sessionState().newHadoopConf().get(storage.CHECKPOINT_FILE_MANAGER)
        assert manager == storage.LOCAL_CHECKPOINT_FILE_MANAGER

        source, counts = tmp_path / "in", {}

        def run(lines: list[str]) -> None:
            source.mkdir(exist_ok=True)
            (source / f"{len(list(source.iterdir()))}.txt").write_text("\n".join(lines) + "\n")
            query = (
                spark.readStream.text(str(source)).groupBy("value").count().writeStream.outputMode("update")
                .foreachBatch(lambda batch, _: counts.update({r.value: r["count"] for r in batch.collect()}))
                .option("checkpointLocation", str(checkpoint / "counts")).trigger(availableNow=True).start()
            )  # fmt: skip
            await_query(query)

        run(["a", "b", "a"])
        run(["a"])  # the second run starts from the state the first one checkpointed
        assert counts == {"a": 3, "b": 1}
        assert (checkpoint / "counts" / "state").is_dir() and (checkpoint / "counts" / "commits" / "1").is_file()

        conf.set(storage.CHECKPOINT_FILE_MANAGER, "com.example.TheirManager")  # named by the submitter: kept
        configure_storage(spark, settings)
        assert conf.get(storage.CHECKPOINT_FILE_MANAGER) == "com.example.TheirManager"
    finally:
        conf.unset(storage.CHECKPOINT_FILE_MANAGER)


def test_checkpoints_elsewhere_keep_sparks_manager(spark_on_s3: SparkSession, s3_server: S3Server) -> None:
    settings = load_settings(overrides=s3_server.storage_settings(TEST_BUCKET, "manager"), environ={})
    assert not storage.on_local_disk(spark_on_s3, settings.checkpoint_root)
    configure_storage(spark_on_s3, settings)
    assert spark_on_s3._jsparkSession.sessionState().newHadoopConf().get(storage.CHECKPOINT_FILE_MANAGER) is None


def test_a_checkpoint_whose_first_entry_was_killed_starts_again(spark: SparkSession, tmp_path: Path) -> None:
    # What a driver killed -9 while Spark wrote its query's first offsets-log entry leaves (found by the crash test).
    checkpoint, source = tmp_path / "checkpoint", tmp_path / "in"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / ".0.73ddef2a.tmp").write_text("v1\n")
    (checkpoint / "offsets" / "..0.73ddef2a.tmp.crc").write_bytes(b"crc")
    source.mkdir()

    def start():
        stream = spark.readStream.format("text").load(str(source)).writeStream.format("noop")
        return stream.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()

    with pytest.raises(StreamingQueryException) as refused:  # Spark refuses it, at every start
        start().awaitTermination(60)
    assert "[STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY]" in str(refused.value)  # the cause has no condition of its own

    removed = discard_interrupted_first_entry(spark, str(checkpoint))
    assert [Path(p).name for p in removed] == [".0.73ddef2a.tmp"]  # Hadoop lists no checksum file, deletes it too
    assert list((checkpoint / "offsets").iterdir()) == []
    (source / "a.txt").write_text("a line\n")
    await_query(start())  # starts as a new query, and runs a batch
    assert offset_log_batches(spark, str(checkpoint)) == [0]
    (checkpoint / "offsets" / ".1.5e1f.tmp").write_text("v1\n")  # the log has an entry now: nothing is touched
    assert discard_interrupted_first_entry(spark, str(checkpoint)) == []
    assert (checkpoint / "offsets" / ".1.5e1f.tmp").exists()
