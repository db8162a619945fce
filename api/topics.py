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
``"Topic tracking reset is disabled."`` when ``topic.tracking.allow.reset=false`` (checked in that order). The
reset is decided by the herder (:meth:`connect_state.herder.Herder.reset_active_topics`).
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from connect_state.api import live
from connect_state.api.errors import no_content
from connect_state.api.herder_io import get_herder
from connect_state.api.openapi import documented, empty, json_answer
from connect_state.api.resources import get_tables
from connect_state.connect.rest import active_topics_info
from connect_state.tables.schemas import ACTIVE_TOPICS

bp = Blueprint("topics", __name__, url_prefix="/connectors")

ACTIVE_TOPIC_COLUMNS = ["topic", "task", "discover_timestamp", "kafka_partition", "kafka_offset"]
"""The ``active_topics`` columns the fold's state is made of (:func:`connect_state.folds.active_topics.
state_from_rows`)."""


def active_topics(connector: str) -> list[str]:
    """The connector's active topics, sorted, with the topic-status records the jobs have not folded yet
    (:mod:`connect_state.api.live`)."""
    rows = live.active_topics(
        connector,
        lambda: get_tables().rows(ACTIVE_TOPICS, filters=[("connector", "=", connector)], columns=ACTIVE_TOPIC_COLUMNS),
    )
    return sorted({row["topic"] for row in rows})


@bp.get("/<connector>/topics")
@documented(
    "KIP-558 active topics", {"200": json_answer({"type": "object"}, "ActiveTopicsInfo by connector")}, 403, 404
)
def get_active_topics(connector: str) -> Response:
    """Connect's ``ActiveTopicsInfo``, keyed by the connector name."""
    get_herder().check_topic_tracking()
    return jsonify(active_topics_info(connector, active_topics(connector)))


@bp.put("/<connector>/topics/reset")
@documented("KIP-558 reset of the active topics", {"202": empty("Reset")}, 403, 404, 409)
def reset_active_topics(connector: str) -> Response:
    """Tombstone the connector's topic-status records; 202 once they are acknowledged."""
    get_herder().reset_active_topics(connector)
    return no_content(202)
