"""Every connect-state job in one Spark driver: ``connect-state-jobs``.

The jobs are separate console scripts so that each can be deployed, scaled and scheduled on its own. On a small
machine (``make run``'s demo) or as a single scheduled Databricks task, one driver running them all is lighter:

* continuous (default): the active-topics, connector-states and heartbeats queries, the two offsets queries (with
  their topic-change supervisor) and the cleanup passes run side by side in one SparkSession until SIGINT/SIGTERM.
  Each streaming query runs on its own cloned session, so the Delta transaction ids a ``foreachBatch`` sets never
  leak into another query's writes. The queries are started one after the other from the main thread (some starts
  toggle a session setting for their own query), then supervised by one thread each.
* ``--available-now``: one catch-up run of each, in dependency order — active topics, connector states (which the
  offsets, heartbeats and cleanup jobs read), offsets, heartbeats (with its sweep), one cleanup pass — then exit.

Exit status 0, or 1 when a job failed (the others are stopped then).

    connect-state-jobs [--available-now] [--max-offsets-per-trigger N] [--conf-file F] [--set key=value ...]
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from pyspark.sql import SparkSession

from connect_state.cleanup import DeletionHook, interval_seconds, load_deletion_hooks
from connect_state.errors import ConnectStateError
from connect_state.jobs import active_topics, cleanup, connector_states, heartbeats, offsets
from connect_state.settings import Settings
from connect_state.spark.foldjob import parse_job_arguments
from connect_state.spark.session import build_session
from connect_state.spark.streaming import restore_signals, run_query, stop_on_signals

log = logging.getLogger("connect_state.jobs.all")

JOB_NAME = "jobs"


def run_catch_up(
    spark: SparkSession, settings: Settings, hooks: Mapping[str, DeletionHook], max_offsets: int | None
) -> int:
    """One catch-up run of every job, in dependency order; stops at the first failure."""
    steps: list[tuple[str, Callable[[], int]]] = [
        ("active topics", lambda: run_query(active_topics.start(spark, settings, True, max_offsets))),
        ("connector states", lambda: run_query(connector_states.start(spark, settings, True, max_offsets))),
        ("offsets", lambda: offsets.run_offsets_queries(spark, settings, True, max_offsets)),
        ("heartbeats", lambda: heartbeats.run_catch_up(spark, settings, max_offsets)),
        ("cleanup", lambda: cleanup.run_cleanup(spark, settings, hooks, 0.0, once=True)),
    ]
    for name, step in steps:
        log.info("catch-up: %s", name)
        status = step()
        if status != 0:
            log.error("catch-up: %s failed (status %d); not running the rest", name, status)
            return status
    return 0


def run_continuous(
    spark: SparkSession, settings: Settings, hooks: Mapping[str, DeletionHook], max_offsets: int | None
) -> int:
    """All jobs side by side until a signal or a failure; 1 when one of them failed."""
    interval = interval_seconds(settings.trigger_interval)
    stop = threading.Event()
    previous = stop_on_signals(stop, "every job")
    statuses: dict[str, int] = {}

    def supervise(name: str, body: Callable[[], int]) -> threading.Thread:
        def target() -> None:
            try:
                statuses[name] = body()
            except Exception:
                log.exception("%s failed", name)
                statuses[name] = 1
            if statuses[name] != 0:
                stop.set()  # one job failed: stop the others and report it

        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread

    try:
        queries = {
            "active_topics": active_topics.start(spark, settings, False, max_offsets),
            "connector_states": connector_states.start(spark, settings, False, max_offsets),
            "heartbeats": heartbeats.start(spark, settings, False, max_offsets),
        }
        threads = [supervise(name, lambda q=query: run_query(q, stop=stop)) for name, query in queries.items()]
        threads.append(
            supervise("offsets", lambda: offsets.run_offsets_queries(spark, settings, False, max_offsets, stop=stop))
        )
        threads.append(supervise("cleanup", lambda: cleanup.run_cleanup(spark, settings, hooks, interval, stop=stop)))
        while not stop.wait(1.0):
            pass
        for thread in threads:
            thread.join(timeout=180.0)
        failed = sorted(name for name, status in statuses.items() if status != 0)
        if failed:
            log.error("failed: %s", ", ".join(failed))
        return 1 if failed else 0
    finally:
        restore_signals(previous)


def main(argv: list[str] | None = None) -> int:
    """The console script ``connect-state-jobs``."""
    args, settings = parse_job_arguments(
        JOB_NAME, __doc__.split("\n\n")[0], argv, "one catch-up run of every job in dependency order, then stop"
    )
    try:
        heartbeats.load_providers(settings)  # fail early on a bad heartbeat.providers or cleanup.hooks
        hooks = load_deletion_hooks(settings.cleanup_hooks)
    except ConnectStateError as err:
        log.error("%s", err)
        return 2
    spark = build_session("connect-state-jobs", settings.spark_master)
    if args.available_now:
        return run_catch_up(spark, settings, hooks, args.max_offsets_per_trigger)
    return run_continuous(spark, settings, hooks, args.max_offsets_per_trigger)


if __name__ == "__main__":
    raise SystemExit(main())
