"""The judge: one connector's evidence and thresholds in, its verdict (and each task's) with the evidence behind it
out. Pure: no Spark, Kafka, Delta or Flask; the watch job (:mod:`connect_state.spark.watch`) gathers the evidence.

The rules, worst first (the first that holds is the verdict):

* no status at all: ``unknown``; target state STOPPED: ``stopped``; PAUSED: ``paused`` (since when);
* connector FAILED, or every committed task FAILED: ``failed`` (since when, the trace);
* more than ``flapping.count`` transitions to FAILED or RESTARTING (connector and tasks) within
  ``flapping.window.ms``: ``flapping``;
* RUNNING sink whose lag (log ends minus commits) has stayed above zero while its commits did not move for longer
  than ``sink.stall.ms``: ``stalled``;
* RUNNING sink whose dead-letter queue took more than ``dropping.records`` records within ``dropping.window.ms``:
  ``dropping``;
* some tasks FAILED or UNASSIGNED, fewer tasks than the config topic committed, the connector UNASSIGNED, or the
  connector or a task RUNNING on a worker that is no live member of the Connect group (a lost worker: a stopped
  worker's UNASSIGNED write may never land, and the others wait ``scheduled.rebalance.max.delay.ms`` before taking
  its work over): ``degraded``;
* connector or a task RESTARTING: ``restarting``;
* RUNNING source whose offsets have not changed value and whose output topics have not grown for longer than
  ``source.stall.ms``: KIP-910's provider answered since (a heartbeat produced, committed or "no records"): ``idle``;
  it failed or timed out since: ``stalled`` (what reads the source cannot reach it); no answer (no provider): ``quiet``,
  for the evidence cannot tell idle from stuck;
* else ``healthy``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from connect_state.verdicts.evidence import ConnectorEvidence, TaskEvidence, WorkersEvidence
from connect_state.verdicts.thresholds import Thresholds
from connect_state.verdicts.vocabulary import Verdict

__all__ = ["ANSWERED", "Judgement", "iso", "judge"]

#: Heartbeat outcomes that are the provider's answer "nothing new" (the heartbeats table's ``outcome``).
ANSWERED = frozenset({"produced", "no_records", "offsets_committed"})
#: Heartbeat outcomes where the provider could not answer.
UNANSWERED = frozenset({"failed", "timed_out"})
_PROGRESS = frozenset({Verdict.STALLED, Verdict.DROPPING, Verdict.QUIET, Verdict.IDLE})
_TASK_STATES = {
    "FAILED": Verdict.FAILED,
    "RESTARTING": Verdict.RESTARTING,
    "UNASSIGNED": Verdict.DEGRADED,
    "PAUSED": Verdict.PAUSED,
    "STOPPED": Verdict.STOPPED,
    "RUNNING": Verdict.HEALTHY,
}


@dataclass(frozen=True)
class Judgement:
    """A verdict, its evidence (a JSON object of numbers, strings and ISO-8601 UTC times), when the condition began
    where the evidence tells (epoch ms), and each task's verdict and evidence."""

    verdict: Verdict
    evidence: dict[str, Any]
    began_at_ms: int | None = None
    tasks: dict[int, tuple[Verdict, dict[str, Any]]] = field(default_factory=dict)


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as ISO-8601 UTC with ``Z``; None as None."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def judge(e: ConnectorEvidence, t: Thresholds, now_ms: int) -> Judgement:
    """``e``'s verdict at ``now_ms`` under ``t``."""
    verdict, evidence, began = _connector(e, t, now_ms)
    base = {"state": e.state, "target_state": e.target_state, **_task_counts(e)}
    tasks = {task.task: _task(task, verdict, evidence, e.workers) for task in e.tasks}
    return Judgement(verdict, {**base, **evidence}, began, tasks)


def _task(
    task: TaskEvidence, connector: Verdict, evidence: dict[str, Any], workers: WorkersEvidence | None
) -> tuple[Verdict, dict[str, Any]]:
    verdict = _TASK_STATES.get(task.state.upper(), Verdict.UNKNOWN)
    details: dict[str, Any] = {"state": task.state, "since": iso(task.since_ms)}
    if verdict is Verdict.FAILED:
        details["trace"] = task.trace
    if verdict is Verdict.HEALTHY and _lost(task.state, task.worker_id, workers):
        return Verdict.DEGRADED, {**details, "departed_worker": task.worker_id}
    if verdict is Verdict.HEALTHY and connector in _PROGRESS:
        return connector, {**details, "from_connector": True, **evidence}
    return verdict, details


def _task_counts(e: ConnectorEvidence) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for task in e.tasks:
        counts[task.state.lower()] = counts.get(task.state.lower(), 0) + 1
    return {"task_count": e.task_count, "tasks": counts}


Rule = tuple[Verdict, dict[str, Any], int | None]


def _connector(e: ConnectorEvidence, t: Thresholds, now: int) -> Rule:
    state = (e.state or "").upper()
    target = (e.target_state or "").upper()
    if not state and not target:
        return Verdict.UNKNOWN, {"reason": "no status or config record"}, None
    if target == "STOPPED" or state == "STOPPED":
        return Verdict.STOPPED, {"since": iso(e.state_since_ms)}, e.state_since_ms
    if target == "PAUSED" and state in ("PAUSED", ""):
        return Verdict.PAUSED, {"since": iso(e.state_since_ms)}, e.state_since_ms
    if state == "FAILED":
        return Verdict.FAILED, {"since": iso(e.state_since_ms), "trace": e.trace}, e.state_since_ms
    if not state:
        return Verdict.UNKNOWN, {"reason": "no connector status yet"}, None
    for rule in (_all_tasks_failed, _flapping, _sink_stalled, _dropping, _degraded, _restarting, _source_silent):
        found = rule(e, t, now)
        if found is not None:
            return found
    return Verdict.HEALTHY, {}, None


def _all_tasks_failed(e: ConnectorEvidence, t: Thresholds, now: int) -> Rule | None:
    failed = [task for task in e.tasks if task.state.upper() == "FAILED"]
    if not failed or len(failed) < len(e.tasks) or len(failed) < (e.task_count or 0):
        return None
    since = max((task.since_ms for task in failed if task.since_ms is not None), default=None)
    traces = {str(task.task): task.trace for task in failed}
    evidence = {"since": iso(since), "failed_tasks": sorted(task.task for task in failed), "traces": traces}
    return Verdict.FAILED, evidence, since


def _flapping(e: ConnectorEvidence, t: Thresholds, now: int) -> Rule | None:
    start = now - t.flapping_window_ms
    failures = [ms for ms in e.failures_ms if ms >= start]
    restarts = [ms for ms in e.restarts_ms if ms >= start]
    if len(failures) + len(restarts) <= t.flapping_count:
        return None
    times = sorted(failures + restarts)
    evidence = {
        "failures": len(failures),
        "restarts": len(restarts),
        "threshold": t.flapping_count,
        "window_ms": t.flapping_window_ms,
        "first": iso(times[0]),
        "last": iso(times[-1]),
    }
    return Verdict.FLAPPING, evidence, times[t.flapping_count]


def _running(e: ConnectorEvidence) -> bool:
    return (e.state or "").upper() == "RUNNING"


def _sink_stalled(e: ConnectorEvidence, t: Thresholds, now: int) -> Rule | None:
    sink = e.sink
    if sink is None or not _running(e) or sink.lag <= 0 or sink.lag_since_ms is None:
        return None
    since = max(x for x in (sink.lag_since_ms, sink.committed_moved_at_ms, e.running_since_ms) if x is not None)
    if now - since <= t.sink_stall_ms:
        return None
    evidence = {
        "group": sink.group,
        "topics": list(sink.topics),
        "lag": sink.lag,
        "commits_moved_at": iso(sink.committed_moved_at_ms),
        "lag_since": iso(sink.lag_since_ms),
        "stalled_for_ms": now - since,
        "threshold_ms": t.sink_stall_ms,
    }
    return Verdict.STALLED, evidence, since + t.sink_stall_ms


def _dropping(e: ConnectorEvidence, t: Thresholds, now: int) -> Rule | None:
    drops = e.dead_letters
    if drops is None or not _running(e) or drops.records <= t.dropping_records:
        return None
    evidence = {
        "dead_letter_topic": drops.topic,
        "records": drops.records,
        "counted_from": iso(drops.window_from_ms),
        "threshold": t.dropping_records,
        "window_ms": t.dropping_window_ms,
    }
    return Verdict.DROPPING, evidence, None


def _lost(state: str | None, worker: str | None, workers: WorkersEvidence | None) -> bool:
    """RUNNING according to its status record, on a worker the Connect group's live members do not include."""
    return workers is not None and (state or "").upper() == "RUNNING" and bool(worker) and worker not in workers.live


def _degraded(e: ConnectorEvidence, t: Thresholds, now: int) -> Rule | None:
    states = [task.state.upper() for task in e.tasks]
    failed = [task.task for task in e.tasks if task.state.upper() == "FAILED"]
    unassigned = [task.task for task in e.tasks if task.state.upper() == "UNASSIGNED"]
    lost = [task for task in e.tasks if _lost(task.state, task.worker_id, e.workers)]
    lost_connector = _lost(e.state, e.worker_id, e.workers)
    running = states.count("RUNNING") - len(lost)
    short = e.task_count is not None and _running(e) and running < e.task_count and "RESTARTING" not in states
    if not (failed or unassigned or lost or lost_connector or short or (e.state or "").upper() == "UNASSIGNED"):
        return None
    evidence: dict[str, Any] = {"failed_tasks": failed, "unassigned_tasks": unassigned, "running": running}
    if failed:
        evidence["traces"] = {str(task.task): task.trace for task in e.tasks if task.state.upper() == "FAILED"}
    began = None
    if (lost or lost_connector) and e.workers is not None:
        departed = sorted({str(task.worker_id) for task in lost} | ({str(e.worker_id)} if lost_connector else set()))
        missing = [e.workers.missing_since_ms[w] for w in departed if w in e.workers.missing_since_ms]
        began = min(missing, default=None)
        evidence.update(
            lost_tasks=sorted(task.task for task in lost),
            lost_connector=lost_connector,
            departed_workers=departed,
            live_workers=sorted(e.workers.live),
            connect_group=e.workers.group,
            members_seen_at=iso(e.workers.seen_at_ms),
            missing_since=iso(began),
        )
    return Verdict.DEGRADED, evidence, began


def _restarting(e: ConnectorEvidence, t: Thresholds, now: int) -> Rule | None:
    if (e.state or "").upper() != "RESTARTING" and all(task.state.upper() != "RESTARTING" for task in e.tasks):
        return None
    return Verdict.RESTARTING, {"since": iso(e.state_since_ms)}, None


def _source_silent(e: ConnectorEvidence, t: Thresholds, now: int) -> Rule | None:
    source = e.source
    if source is None or not _running(e):
        return None
    marks = [x for x in (source.offsets_moved_at_ms, source.topics_moved_at_ms, e.running_since_ms) if x is not None]
    if not marks:
        return None
    since = max(marks)
    if now - since <= t.source_stall_ms:
        return None
    evidence: dict[str, Any] = {
        "offsets_moved_at": iso(source.offsets_moved_at_ms),
        "topics": list(source.topics),
        "topics_moved_at": iso(source.topics_moved_at_ms),
        "silent_for_ms": now - since,
        "threshold_ms": t.source_stall_ms,
        "heartbeat_provider": source.has_provider,
    }
    beat = source.heartbeat
    if beat is not None and beat.at_ms >= since:
        evidence.update(heartbeat_outcome=beat.outcome, heartbeat_at=iso(beat.at_ms))
        if beat.outcome in ANSWERED:
            return Verdict.IDLE, evidence, since + t.source_stall_ms
        if beat.outcome in UNANSWERED:
            evidence["heartbeat_error"] = beat.error
            return Verdict.STALLED, evidence, since + t.source_stall_ms
    evidence["reason"] = "nothing moves and no heartbeat provider answered since: idle and stuck look alike"
    return Verdict.QUIET, evidence, since + t.source_stall_ms
