"""The web dashboard (``/ui``, issue 14) in a real headless Chromium, against the real broker, worker and jobs.

Debian's ``chromium`` and ``chromium-driver`` (installed by ``make setup``'s ``browser`` target) are driven with
Selenium. The API runs in-process behind a real HTTP server thread; the tables come from catch-up runs of the jobs
over the session's topics. The page must list the worker's real connectors, show a connector's status, topics,
offsets and timeline chart, and a pause taken in the page must be honoured by the real worker. The test saves the
screenshot the README shows (docs/dashboard.png).
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait
from werkzeug.serving import BaseWSGIServer, make_server

from connect_state.api import close_app, create_app
from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import append_lines, file_source_config
from connect_state.dev.jvm_service import free_port
from connect_state.spark import active_topics, offsets
from connect_state.spark.streaming import run_job
from tests.fixtures.spark import await_query
from tests.integration.helpers import job_settings, run_connector_states, unique, wait_state

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]
REPO_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO_ROOT / "docs" / "dashboard.png"
WAIT_S = 90.0
UI_WAIT_S = 30.0


@pytest.fixture
def settings(stack_settings: Settings, tmp_path: Path) -> Settings:
    return job_settings(stack_settings, tmp_path)


@pytest.fixture
def api_url(settings: Settings) -> Iterator[str]:
    """Our API on the session's broker behind a real HTTP server thread."""
    app = create_app(settings)
    server: BaseWSGIServer = make_server("127.0.0.1", free_port(), app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)
        close_app(app)


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver, "Debian's chromium and chromium-driver are missing: run `make setup` (target browser)"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1360,1000"):
        options.add_argument(flag)
    session = webdriver.Chrome(service=Service(driver), options=options)
    try:
        yield session
    finally:
        session.quit()


def create_source(connect: ConnectRestClient, tmp_path: Path, name: str, lines: int) -> None:
    source_file = tmp_path / f"{name}.txt"
    append_lines(source_file, [f"line {i}" for i in range(lines)])
    connect.create_connector(name, file_source_config(name, source_file, unique("ui-topic")))
    wait_state(connect, name, "RUNNING", 1, WAIT_S)


def wait_for(browser: WebDriver, css: str, text: str | None = None) -> None:
    wait = WebDriverWait(browser, UI_WAIT_S)
    if text is None:
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))
    else:
        wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))


def test_the_dashboard_shows_the_real_connectors_and_its_pause_is_honoured(
    spark,
    connect: ConnectRestClient,
    settings: Settings,
    api_url: str,
    browser: WebDriver,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    source, other = unique("ui-source"), unique("ui-other")
    create_source(connect, tmp_path, source, 3)
    create_source(connect, tmp_path, other, 1)
    deadline = time.monotonic() + WAIT_S  # the worker commits the source's offsets (offset.flush.interval.ms)
    while not connect.get(connect.connector_path(source, "offsets"))[1].get("offsets") and time.monotonic() < deadline:
        time.sleep(1)
    run_connector_states(spark, settings)
    await_query(active_topics.start(spark, settings, available_now=True))
    # The offsets job's catch-up run as connect-state-offsets --available-now runs it: it reports its progress.
    with caplog.at_level(logging.INFO, logger="connect_state.streaming"):
        assert run_job(offsets.JOB, spark, settings, available_now=True, timeout_s=300) == 0
    progress = [r.getMessage() for r in caplog.records if "source_offsets: read " in r.getMessage()]
    assert progress and re.search(r"read (\d+) of \1 records \(100%\), 0 behind, caught up", progress[-1]), progress

    browser.get(f"{api_url}/ui")
    Select(browser.find_element(By.ID, "interval")).select_by_value("0")  # no timed refresh until the end
    # The list: both real connectors, with state and type; the filter narrows it.
    wait_for(browser, f'tr[data-name="{source}"]', "RUNNING")
    row_text = browser.find_element(By.CSS_SELECTOR, f'tr[data-name="{source}"]').text
    assert "source" in row_text and "1 (RUNNING)" in row_text
    assert browser.find_elements(By.CSS_SELECTOR, f'tr[data-name="{other}"]')
    browser.find_element(By.ID, "filter").send_keys(source)
    WebDriverWait(browser, UI_WAIT_S).until(lambda b: not b.find_elements(By.CSS_SELECTOR, f'tr[data-name="{other}"]'))
    wait_for(browser, "#health", "health: ")

    # One connector: status, active topics, offsets and the timeline drawn from the tables.
    browser.find_element(By.CSS_SELECTOR, f'tr[data-name="{source}"]').click()
    wait_for(browser, "#name", source)
    wait_for(browser, "#status", "RUNNING")
    wait_for(browser, "#topic-list", "ui-topic")
    wait_for(browser, "#offsets", "position")
    wait_for(browser, "#timeline rect.band")
    bands = browser.find_elements(By.CSS_SELECTOR, "#timeline rect.band")
    assert "RUNNING" in {band.get_attribute("data-state") for band in bands}
    assert browser.find_elements(By.CSS_SELECTOR, "#timeline .offset-line")
    # Its availability chart (GET /connectors/<name>/availability): the window's stretches as SVG bands, the shares
    # beside them; and every connector's shares as bars under the list (GET /availability).
    wait_for(browser, '#availability-chart rect.segment[data-state="running"]')
    drawn = {
        seg.get_attribute("data-state")
        for seg in browser.find_elements(By.CSS_SELECTOR, "#availability-chart rect.segment")
    }
    assert drawn <= {"running", "degraded", "unknown"}, drawn  # created in the window: unknown (not existing) before
    assert "paused" not in drawn
    wait_for(browser, "#availability .legend", "running")
    wait_for(browser, f'#fleet-chart rect.fleet-bar[data-connector="{source}"][data-state="running"]')
    bar = browser.find_element(
        By.CSS_SELECTOR, f'#fleet-chart rect.fleet-bar[data-connector="{source}"][data-state="running"]'
    )
    assert float(bar.get_attribute("width")) > 100, "running most of the time it existed: over half of the 200 px bar"

    # Pause behind a confirmation: cancel writes nothing, confirm does, the server's answer is shown, and the real
    # worker pauses the connector.
    browser.find_element(By.CSS_SELECTOR, 'button[data-action="pause"]').click()
    wait_for(browser, "#confirm-text", f"Pause {source}?")
    browser.find_element(By.ID, "confirm-cancel").click()
    assert not browser.find_element(By.ID, "answer").is_displayed()
    browser.find_element(By.CSS_SELECTOR, 'button[data-action="pause"]').click()
    wait_for(browser, "#confirm-text", f"Pause {source}?")
    browser.find_element(By.ID, "confirm-ok").click()
    wait_for(browser, "#answer", f"PUT /connectors/{source}/pause → 202")
    wait_state(connect, source, "PAUSED", 1, WAIT_S)

    # Refresh without a reload: the jobs fold the pause; the page shows it on its next refresh (the button), and its
    # timed refresh updates the list.
    run_connector_states(spark, settings)
    assert browser.execute_script("window.__noReload = true; return window.__noReload;")
    browser.find_element(By.ID, "refresh").click()
    wait_for(browser, "#status", "PAUSED")
    wait_for(browser, '#availability-chart rect.segment[data-state="paused"]')  # the pause, drawn
    browser.find_element(By.ID, "filter").clear()
    Select(browser.find_element(By.ID, "interval")).select_by_value("5")
    wait_for(browser, f'tr[data-name="{source}"]', "PAUSED")
    wait_for(browser, f'tr[data-name="{other}"]', "RUNNING")
    assert browser.execute_script("return window.__noReload === true;"), "the page was reloaded"

    SCREENSHOT.parent.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOT))
    assert SCREENSHOT.stat().st_size < 400_000

    # Issue 37: the cluster picker lists GET /clusters; choosing one opens the page under /clusters/<id>/ui, which
    # asks every path there (the browser's own record of what it fetched) and shows the same connectors.
    [cluster] = requests.get(f"{api_url}/clusters", timeout=30).json()
    wait_for(browser, "#cluster option")
    picker = Select(browser.find_element(By.ID, "cluster"))
    assert [option.get_attribute("value") for option in picker.options] == [cluster["id"]]
    browser.get(f"{api_url}/clusters/{cluster['id']}/ui")
    wait_for(browser, f'tr[data-name="{other}"]', "RUNNING")
    assert Select(browser.find_element(By.ID, "cluster")).first_selected_option.get_attribute("value") == cluster["id"]
    fetched = browser.execute_script("return performance.getEntriesByType('resource').map((e) => e.name);")
    asked = [url for url in fetched if "/connectors" in url]
    assert asked and all(url.startswith(f"{api_url}/clusters/{cluster['id']}/connectors") for url in asked), asked
    for name in (source, other):
        connect.delete_connector(name)
