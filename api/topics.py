"""KIP-558 active topics, with Connect's exact semantics (``ConnectorsResource.getConnectorActiveTopics`` and
``resetConnectorActiveTopics``; the records are ``KafkaStatusBackingStore``'s).

* ``GET /connectors/<name>/topics`` -> 200 ``{"<name>": {"topics": [...]}}`` from the ``active_topics`` table. There
  is no existence check: an unknown connector gives an empty list. (Connect's order is unspecified; ours is sorted.)
* ``PUT /connectors/<name>/topics/reset`` -> 202, empty body, after a tombstone for every
  ``status-topic-<topic>:connector-<name>`` key of the connector has been acknowledged (``acks=all``) by the status
  topic within ``api.kafka.write.timeout.ms``. No existence check either. The ``active_topics`` job then folds the
  tombstones, as every Connect worker reading the status topic does. The topics are the connector's active topics as
  of the status topic's end offsets at the request (:func:`connect_state.api.fresh.fresh_active_topics`: the
  ``active_topics`` rows plus the records past the table's watermark), so topics recorded since the job's last batch
  are reset too; when that cannot be established within ``api.fresh.read.timeout.ms`` the reset answers 409 (503
  when Kafka cannot be reached) and writes nothing. A write whose acknowledgement times out answers 500 saying the
  outcome is unknown; the reset is idempotent, so retrying it is safe.

Both answer 403 ``"Topic tracking is disabled."`` when ``topic.tracking.enable=false``; the reset then answers 403
``"Topic tracking reset is disabled."`` when ``topic.tracking.allow.reset=false`` (checked in that order).
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from connect_state.api import live
from connect_state.api.errors import ConnectRestException, no_content
from connect_state.api.fresh import fresh_active_topics
from connect_state.api.resources import get_settings, get_tables, get_writer
from connect_state.connect.rest import RESET_DISABLED, TRACKING_DISABLED, active_topics_info
from connect_state.errors import KafkaUnavailableError, KafkaWriteTimeout
from connect_state.formats.status import topic_status_tombstone_keys
from connect_state.settings import Settings
from connect_state.tables import ACTIVE_TOPICS

bp = Blueprint("topics", __name__, url_prefix="/connectors")

ACTIVE_TOPIC_COLUMNS = ["topic", "task", "discover_timestamp", "kafka_partition", "kafka_offset"]
"""The ``active_topics`` columns the fold's state is made of (:func:`connect_state.folds.active_topics.
state_from_rows`)."""


def _require_tracking() -> None:
    if not get_settings().topic_tracking_enable:
        raise ConnectRestException(403, TRACKING_DISABLED)


def active_topics(connector: str) -> list[str]:
    """The connector's active topics, sorted, with the topic-status records the jobs have not folded yet
    (:mod:`connect_state.api.live`)."""
    rows = live.active_topics(
        connector,
        lambda: get_tables().rows(ACTIVE_TOPICS, filters=[("connector", "=", connector)], columns=ACTIVE_TOPIC_COLUMNS),
    )
    return sorted({row["topic"] for row in rows})


@bp.get("/<connector>/topics")
def get_active_topics(connector: str) -> Response:
    """Connect's ``ActiveTopicsInfo``, keyed by the connector name."""
    _require_tracking()
    return jsonify(active_topics_info(connector, active_topics(connector)))


@bp.put("/<connector>/topics/reset")
def reset_active_topics(connector: str) -> Response:
    """Tombstone the connector's topic-status records; 202 once they are acknowledged."""
    _require_tracking()
    settings = get_settings()
    if not settings.topic_tracking_allow_reset:
        raise ConnectRestException(403, RESET_DISABLED)
    topics = fresh_active_topics(connector)
    if topics:
        keys = topic_status_tombstone_keys(connector, topics)
        records = [(key.encode("utf-8"), None) for key in keys]
        try:
            get_writer().send(settings.status_storage_topic, records, settings.api_kafka_write_timeout_ms)
        except KafkaUnavailableError as err:
            raise ConnectRestException(503, f"Nothing was written for the topics reset of {connector}: {err}") from err
        except KafkaWriteTimeout as err:
            raise ConnectRestException(500, reset_outcome_unknown_message(connector, settings)) from err
    return no_content(202)


def reset_outcome_unknown_message(connector: str, settings: Settings) -> str:
    """Ours: the reset's tombstones were not all acknowledged in time."""
    return (
        f"Kafka did not acknowledge the topics reset of connector {connector} within "
        f"{settings.api_kafka_write_timeout_ms} ms (api.kafka.write.timeout.ms): the outcome is unknown, the "
        f"tombstones may still be written. Retrying PUT /connectors/{connector}/topics/reset is safe; "
        f"GET /connectors/{connector}/topics shows the topics once the active-topics job has caught up."
    )
