"""Kafka Connect's REST error model, so clients of Connect can read our errors unchanged: the Flask side
(``connect/runtime/src/main/java/org/apache/kafka/connect/runtime/rest/errors/ConnectExceptionMapper.java``).

Every error is JSON ``{"error_code": <int>, "message": <str or null>}`` with ``Content-Type: application/json``,
as ``ConnectExceptionMapper`` writes it (the body and Connect's messages are in :mod:`connect_state.connect.rest`):

* :class:`ConnectRestException` (named after Connect's own exception class) -> its status;
* an unknown route -> 404 ``"HTTP 404 Not Found"``, a wrong method -> 405 ``"HTTP 405 Method Not Allowed"`` (any
  other HTTP error likewise ``"HTTP <code> <reason>"``);
* a :class:`~connect_state.herder.HerderError` -> the status of its class (:data:`HERDER_STATUS`: 404
  ``NotFoundError``, 400 ``BadRequestError``, 403, 409, 503, 500 ``ConnectError``, 501), with its message;
* :class:`~connect_state.security.guards.GuardRefusal` (a connector config naming a topic or group we refuse to act on)
  -> 400 with its message;
* :class:`~connect_state.core.errors.TableNotFoundError` -> 503, saying which table is missing and which job creates it;
* :class:`~connect_state.core.errors.KafkaWriteError` and anything else -> 500 with the exception's message (null when
  it has none), logged with its traceback.
"""

from __future__ import annotations

from collections.abc import Mapping

from flask import Flask, Response, current_app, jsonify
from werkzeug.exceptions import HTTPException

from connect_state.connect.rest import error_message, http_error_message
from connect_state.core.errors import KafkaWriteError, TableNotFoundError
from connect_state.herder import errors as herder
from connect_state.security.guards import GuardRefusal


class ConnectRestException(Exception):
    """An error answered with ``status`` and Connect's JSON body; ``message`` may be None (``"message": null``);
    ``headers`` are added to the answer (a 401's ``WWW-Authenticate``)."""

    def __init__(self, status: int, message: str | None, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


def error_response(status: int, message: str | None) -> Response:
    """Connect's ``ErrorMessage`` entity: ``{"error_code": status, "message": message}``."""
    response = jsonify(error_message(status, message))
    response.status_code = status
    return response


def _message(err: BaseException) -> str | None:
    """The exception's message as Java's ``getMessage()`` would give it: None when there is none."""
    text = str(err)
    return text or None


def handle_connect_rest_error(err: ConnectRestException) -> Response:
    response = error_response(err.status, err.message)
    response.headers.update(err.headers)
    return response


#: The status of each of the herder's errors (the most specific class wins).
HERDER_STATUS: dict[type[herder.HerderError], int] = {
    herder.NotFoundError: 404,
    herder.BadRequestError: 400,
    herder.ForbiddenError: 403,
    herder.NotEstablishedError: 409,
    herder.ConflictError: 409,
    herder.KafkaUnreachableError: 503,
    herder.ConnectError: 500,
    herder.UnsupportedError: 501,
}


def handle_herder_error(err: herder.HerderError) -> Response:
    status = next((HERDER_STATUS[kind] for kind in type(err).__mro__ if kind in HERDER_STATUS), 500)
    return error_response(status, err.message)


def handle_http_exception(err: HTTPException) -> Response:
    """Routing and protocol errors, with Jersey's messages (``"HTTP 404 Not Found"``)."""
    status = err.code or 500
    response = error_response(status, http_error_message(status, err.name))
    allow = [value for key, value in err.get_headers() if key.lower() == "allow"]
    if allow:
        response.headers["Allow"] = allow[0]
    return response


def handle_guard_refusal(err: GuardRefusal) -> Response:
    current_app.logger.warning("Refused: %s", err)
    return error_response(400, _message(err))


def handle_table_not_found(err: TableNotFoundError) -> Response:
    current_app.logger.warning("%s", err)
    return error_response(503, _message(err))


def handle_kafka_write_error(err: KafkaWriteError) -> Response:
    current_app.logger.error("Kafka write failed: %s", err, exc_info=err)
    return error_response(500, _message(err))


def handle_unexpected(err: Exception) -> Response:
    current_app.logger.error("Uncaught exception in REST call: %s", err, exc_info=err)
    return error_response(500, _message(err))


def register_error_handlers(app: Flask) -> None:
    """Install the handlers on ``app`` (the most specific class wins, as in Flask)."""
    app.register_error_handler(ConnectRestException, handle_connect_rest_error)
    app.register_error_handler(HTTPException, handle_http_exception)
    app.register_error_handler(herder.HerderError, handle_herder_error)
    app.register_error_handler(GuardRefusal, handle_guard_refusal)
    app.register_error_handler(TableNotFoundError, handle_table_not_found)
    app.register_error_handler(KafkaWriteError, handle_kafka_write_error)
    app.register_error_handler(Exception, handle_unexpected)


def no_content(status: int) -> Response:
    """An empty answer without a content type, as Connect's 202/204 carry no entity."""
    response = Response(status=status)
    del response.headers["Content-Type"]
    return response
