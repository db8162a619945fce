"""Every connect-state job, in dependency order: what ``connect-state-jobs`` runs in one Spark driver.

Active topics, connector states (which the offsets, heartbeats, cleanup and restarts jobs read), offsets, heartbeats,
cleanup, restarts, watch (the verdicts, over all the others' tables), alerts (which reads what the others wrote,
the verdicts included), and last the fleet's tables (which list every table's files, issue 37):
:func:`~connect_state.spark.streaming.run_catch_up` runs them one after the other in this order,
:func:`~connect_state.spark.streaming.run_continuous` side by side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from connect_state.cleanup.reconciler import DeletionHook
from connect_state.core.errors import ConfigError
from connect_state.heartbeats.provider import HeartbeatProvider
from connect_state.spark import active_topics, connector_states, offsets
from connect_state.spark.alerts import AlertsJob
from connect_state.spark.cleanup import CleanupJob
from connect_state.spark.fleet_sync import FleetTablesJob
from connect_state.spark.heartbeats import HeartbeatsJob
from connect_state.spark.restarts import RestartsJob
from connect_state.spark.streaming import Job
from connect_state.spark.watch import WatchJob


def every_job(
    hooks: Mapping[str, DeletionHook] | None = None, providers: Mapping[str, HeartbeatProvider] | None = None
) -> list[Job]:
    """The jobs in dependency order; the cleanup hooks and heartbeat providers are loaded from the settings by the
    jobs' ``check`` unless given."""
    return [
        active_topics.JOB,
        connector_states.JOB,
        offsets.JOB,
        HeartbeatsJob(providers),
        CleanupJob(hooks),
        RestartsJob(),
        WatchJob(),
        AlertsJob(),
        FleetTablesJob(),
    ]


def select_jobs(jobs: Sequence[Job], names: str | None) -> list[Job]:
    """The jobs named in ``names`` (comma-separated job names, as ``connect-state-jobs --jobs`` takes them), kept in
    the dependency order of ``jobs``; every job when ``names`` is None. A name that is no job's, or no name at all, is
    a :class:`ConfigError` that lists the job names."""
    if names is None:
        return list(jobs)
    known = [job.name for job in jobs]
    wanted = {name.strip() for name in names.split(",") if name.strip()}
    unknown = sorted(wanted - set(known))
    if unknown or not wanted:
        what = f"unknown job {', '.join(unknown)}" if unknown else "no job named"
        raise ConfigError(f"--jobs: {what}; the jobs are {', '.join(known)}")
    return [job for job in jobs if job.name in wanted]
