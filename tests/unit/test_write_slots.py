"""Write slots (issue 33, finding 7): writes never hold every thread. The held-on-Kafka case runs against the real
server in tests/integration/test_api_server_starvation.py."""

from __future__ import annotations

from flask import Flask

from connect_state.api.server import build_parser, gunicorn_options, with_threads
from connect_state.core.settings import Settings


def test_threads_default_to_the_setting_and_leave_threads_to_reads(settings: Settings) -> None:
    assert settings.api_threads == 16 and settings.api_write_concurrency == 8
    assert build_parser().parse_args([]).threads is None
    assert gunicorn_options(with_threads(settings, None), Flask(__name__))["threads"] == 16
    four = with_threads(settings, 4)  # --threads 4: writes lowered below it
    assert (four.api_threads, four.api_write_concurrency) == (4, 3)
    assert gunicorn_options(four, Flask(__name__))["threads"] == 4
    one = with_threads(settings.with_overrides(**{"api.threads": "1"}), None)
    assert (one.api_threads, one.api_write_concurrency) == (1, 1)
    kept = with_threads(settings.with_overrides(**{"api.write.concurrency": "3"}), None)
    assert (kept.api_threads, kept.api_write_concurrency) == (16, 3)
