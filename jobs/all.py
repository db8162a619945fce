"""Every connect-state job in one Spark driver: ``connect-state-jobs``.

The jobs are separate console scripts so that each can be deployed, scaled and scheduled on its own. On a small
machine (``make run``'s demo) or as a single scheduled Databricks task, one driver running them all is lighter:

* continuous (default): the active-topics, connector-states and heartbeats queries, the two offsets queries (the
  source one restarting itself when a connector's own offsets topic appears), the cleanup passes and the auto-restart
  passes (idle unless ``restart.auto.connectors`` opts connectors in) run side by side
  in one driver until SIGINT/SIGTERM. Each job runs on its own cloned session, so the settings a query's start or its
  ``foreachBatch`` changes (Delta transaction ids) never leak into another job's. The jobs are started one after the
  other from the main thread, then supervised by one thread per query or loop of passes. A query that fails is
  restarted with exponential backoff, logged and counted, while the others keep running (a job whose start fails is
  started again the same way).
* ``--available-now``: one catch-up run of each, in dependency order — active topics, connector states (which the
  offsets, heartbeats, cleanup and restarts jobs read), offsets, heartbeats (then the heartbeats due), one cleanup
  pass, one auto-restart pass — then exit. A job that fails does not stop the ones after it; the run ends by naming
  the failed jobs.

``--jobs a,b`` runs only the named jobs (still in dependency order; names: ``active_topics``, ``connector_states``,
``offsets``, ``heartbeats``, ``cleanup``, ``restarts``), for example the three folds in one driver and the three leased
jobs in another.

Exit status 0; 1 when a job of a catch-up run failed (named in the log: ``catch-up failed: <jobs>``); 2 for a bad
setting or an unknown job name.

    connect-state-jobs [--available-now] [--jobs NAME,...] [--max-offsets-per-trigger N] [--conf-file F]
                       [--set key=value ...]
"""

from __future__ import annotations

import argparse
import logging

from connect_state.core.errors import ConfigError
from connect_state.spark.all_jobs import every_job, select_jobs
from connect_state.spark.streaming import job_arguments, main_of, run_catch_up, run_continuous


def parser() -> argparse.ArgumentParser:
    """The arguments of ``connect-state-jobs`` (also a Databricks wheel task's parameters)."""
    description = __doc__.split("\n\n")[0]
    parser = job_arguments("jobs", description, "one catch-up run of every job in dependency order, then stop")
    parser.add_argument(
        "--jobs",
        metavar="NAME,...",
        help=f"run only these jobs (comma-separated: {', '.join(job.name for job in every_job())})",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """The console script ``connect-state-jobs``."""
    arguments = parser()
    args = arguments.parse_args(argv)
    try:  # their check() loads the heartbeat providers and the deletion hooks once, before any start
        jobs = select_jobs(every_job(), args.jobs)
    except ConfigError as err:
        arguments.error(str(err))  # exit status 2, with the usage
    run = run_catch_up if args.available_now else run_continuous
    return main_of(
        jobs,
        args,
        "jobs",
        logging.getLogger("connect_state.jobs.all"),
        lambda spark, settings: run(jobs, spark, settings, args.max_offsets_per_trigger),
    )


if __name__ == "__main__":
    raise SystemExit(main())
