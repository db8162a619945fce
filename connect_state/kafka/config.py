"""Java-style Kafka client properties (``security.protocol``, ``sasl.jaas.config``, ...) as kafka-python arguments.

The settings carry the client properties in Kafka's own key names (``kafka.client.config.file`` and
``kafka.client.properties``); every kafka-python client of the layer (producer, admin client, consumer) is configured
through :func:`kafka_python_config`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from connect_state.core.errors import ConfigError

log = logging.getLogger(__name__)

# kafka-python arguments that are not plain values, or that a client of the layer owns; never taken from properties.
_NOT_FROM_PROPERTIES = frozenset(
    {
        "key_serializer",
        "value_serializer",
        "partitioner",
        "transactional_id",
        "kafka_client",
        "selector",
        "metric_reporters",
        "socket_options",
        "ssl_context",
        "sasl_oauth_token_provider",
        "api_version",
    }
)
# Java keys consumed by the special cases of kafka_python_config, never reported as unsupported.
_CONSUMED_JAVA_KEYS = frozenset({"ssl.truststore.type", "ssl.keystore.type"})
_JAAS_OPTION = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)""")


def _convert(java_key: str, python_key: str, value: str, default: Any) -> Any:
    """A Java property's string value as the type kafka-python expects for ``python_key``."""
    try:
        if python_key == "acks":
            return -1 if value.strip().lower() == "all" else int(value)
        if isinstance(default, bool):
            lowered = value.strip().lower()
            if lowered not in ("true", "false"):
                raise ValueError(value)
            return lowered == "true"
        if isinstance(default, int | float) or (default is None and python_key.endswith(("_ms", "_bytes"))):
            return int(value)
    except ValueError:
        raise ConfigError(f"Kafka client setting {java_key}: expected a number or boolean, got {value!r}") from None
    if python_key == "compression_type" and value.strip().lower() == "none":
        return None
    return value


def _parse_jaas(value: str) -> dict[str, str]:
    """``username``/``password`` of a ``sasl.jaas.config`` (PLAIN or SCRAM login module) as kafka-python keys."""
    options = {
        m.group(1): re.sub(r"\\(.)", r"\1", m.group(2)) if m.group(2) is not None else m.group(3)
        for m in _JAAS_OPTION.finditer(value)
    }
    mapped = {}
    if "username" in options:
        mapped["sasl_plain_username"] = options["username"]
    if "password" in options:
        mapped["sasl_plain_password"] = options["password"]
    return mapped


def kafka_python_config(
    properties: Mapping[str, str], accepted: Mapping[str, Any], *, warn: bool = True
) -> dict[str, Any]:
    """Map Java-style client properties (``security.protocol``) to kafka-python keyword arguments.

    ``accepted`` is the client class's ``DEFAULT_CONFIG`` (the keys it accepts and their default values, which give
    the type a string value is converted to). Generic rule: ``a.b.c`` -> ``a_b_c``. Special cases: PEM
    ``ssl.truststore.location`` -> ``ssl_cafile``, PEM ``ssl.keystore.location`` -> ``ssl_certfile``,
    ``ssl.key.password`` -> ``ssl_password``, ``ssl.endpoint.identification.algorithm`` -> ``ssl_check_hostname``,
    ``sasl.jaas.config`` (PLAIN/SCRAM) -> ``sasl_plain_username``/``sasl_plain_password``,
    ``compression.type=none`` -> ``None``. Keys the client does not support are logged (``warn``) and skipped.
    """
    config: dict[str, Any] = {}
    unsupported: list[str] = []
    pem_truststore = properties.get("ssl.truststore.type", "").upper() == "PEM"
    pem_keystore = properties.get("ssl.keystore.type", "").upper() == "PEM"
    for java_key, value in properties.items():
        mapped: dict[str, Any]
        if java_key in _CONSUMED_JAVA_KEYS:
            continue
        if java_key == "ssl.truststore.location" and (pem_truststore or value.endswith((".pem", ".crt"))):
            mapped = {"ssl_cafile": value}
        elif java_key == "ssl.keystore.location" and (pem_keystore or value.endswith(".pem")):
            mapped = {"ssl_certfile": value}
        elif java_key == "ssl.key.password":
            mapped = {"ssl_password": value}
        elif java_key == "ssl.endpoint.identification.algorithm":
            mapped = {"ssl_check_hostname": value.strip().lower() == "https"}
        elif java_key == "sasl.jaas.config":
            mapped = _parse_jaas(value)
            if not mapped:
                unsupported.append(java_key)
        else:
            python_key = java_key.replace(".", "_").replace("-", "_")
            if python_key in _NOT_FROM_PROPERTIES or python_key not in accepted:
                unsupported.append(java_key)
                continue
            mapped = {python_key: _convert(java_key, python_key, value, accepted[python_key])}
        config.update({k: v for k, v in mapped.items() if k in accepted})
    if unsupported and warn:
        log.warning("Kafka client settings not supported by kafka-python, ignored: %s", ", ".join(unsupported))
    return config
