"""The Done-when browser test of the ACID view: headless Chromium (Debian's package, driven by Playwright) logs in to
`airflow standalone` started here (set up as `make run` sets it up, on loopback, with a metastore holding real tables
with deltas and a queued compaction), opens the ACID view from the navigation, checks a queue entry and a table's
health against the metastore, clicks "compact now" and sees the new entry appear, and checks that Abort asks first
(naming the compaction and its partition), that dismissing the question changes nothing, and that confirming aborts.
Screenshots go to the test's directory and, when ACID_TEST_ARTIFACTS is set, are copied there.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from acid_core.health import table_health
from acid_core.metastore import Metastore

pytestmark = [pytest.mark.browser, pytest.mark.airflow, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _environment(home: Path, port: int) -> dict[str, str]:
    """This process's environment without the suite's Airflow, ACID and Spark settings, plus the platform's; DAGs
    are created paused (only acid_compact is unpaused, so nothing but the test moves the queue)."""
    environ = {name: value for name, value in os.environ.items()
               if not name.startswith(("AIRFLOW", "ACID_", "PYSPARK", "SPARK_"))}
    environ.update({"ACID_HOME": str(home), "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__HOST": "127.0.0.1",
                    "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
                    "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),
                    "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port())})
    return environ


def _api(base: str, path: str, *, token: str | None = None, method: str = "GET", body=None):
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    request = urllib.request.Request(base + path, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _wait(what: str, check, *, timeout: float, log: Path, standalone: subprocess.Popen):
    deadline = time.monotonic() + timeout
    while True:
        assert standalone.poll() is None, f"airflow standalone exited; {log} ends with:\n{log.read_text()[-3000:]}"
        try:
            found = check()
        except (OSError, ValueError, KeyError):
            found = None
        if found:
            return found
        assert time.monotonic() < deadline, f"{what} within {timeout} s; {log} ends with:\n{log.read_text()[-3000:]}"
        time.sleep(2)


@pytest.fixture
def artifacts(tmp_path, request):
    """Where screenshots go; copied to ACID_TEST_ARTIFACTS/<test name> afterwards when that is set."""
    directory = tmp_path / "screenshots"
    directory.mkdir()
    yield directory
    target = os.environ.get("ACID_TEST_ARTIFACTS")
    if target:
        shutil.copytree(directory, Path(target) / request.node.name, dirs_exist_ok=True)


def test_acid_view_in_airflow_shows_the_queue_and_health_and_compacts_now(tmp_path, artifacts):
    from acid_platform import load_settings, platform_environment
    from playwright.sync_api import expect, sync_playwright
    from processes import kill_session
    import ui_tables

    home, port = tmp_path / "home", _free_port()
    env = _environment(home, port)
    setup = subprocess.run([sys.executable, "-m", "acid_platform", "--setup-only"], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
    settings = load_settings(env)
    ids = ui_tables.build(settings.metastore_url, settings.warehouse)

    log = tmp_path / "airflow-standalone.log"
    airflow_env = platform_environment(settings, env)
    with open(log, "w") as out:
        standalone = subprocess.Popen([str(Path(sys.executable).parent / "airflow"), "standalone"], env=airflow_env,
                                      cwd=home, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        passwords = settings.airflow_home / "simple_auth_manager_passwords.json.generated"
        _wait("the API server answering", lambda: _api(base, "/api/v2/monitor/health") and passwords.exists(),
              timeout=300, log=log, standalone=standalone)
        password = json.loads(passwords.read_text())["admin"]
        token = _api(base, "/auth/token", method="POST", body={"username": "admin", "password": password})[
            "access_token"]
        _wait("acid_compact parsed", lambda: _api(base, "/api/v2/dags/acid_compact", token=token),
              timeout=240, log=log, standalone=standalone)
        _api(base, "/api/v2/dags/acid_compact", token=token, method="PATCH", body={"is_paused": False})

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                page.goto(base + "/")
                page.locator("input[name=username]").fill("admin")
                page.locator("input[name=password]").fill(password)
                page.locator("button[type=submit]").click()
                nav = page.get_by_role("link", name="ACID", exact=True).or_(
                    page.get_by_role("button", name="ACID", exact=True)).first
                nav.wait_for(timeout=60_000)
                page.screenshot(path=str(artifacts / "0-home.png"))
                nav.click()
                page.wait_for_url("**/plugin/acid", timeout=30_000)
                view = page.frame_locator("iframe")

                # A queue entry, as the metastore has it.
                queued = view.locator(f"#queue-table tr[data-id='{ids['queued']}']")
                expect(queued).to_be_visible(timeout=60_000)
                cells = queued.locator("td")
                expect(cells.nth(2)).to_have_text("sales")
                expect(cells.nth(3)).to_have_text("ds=2026-01-01")
                expect(cells.nth(4)).to_have_text("major")
                expect(cells.nth(5)).to_have_text("initiated")
                failed = view.locator(f"#queue-table tr[data-id='{ids['failed']}'] td")
                expect(failed.nth(11)).to_have_text(
                    "acid_core.errors.FileSystemError: cannot read bucket_00000: disk on fire")
                page.screenshot(path=str(artifacts / "1-queue.png"), full_page=True)

                # A table's health, as acid_core.health computes it from the metastore and the files.
                ms = Metastore(settings.metastore_url, warehouse=settings.warehouse)
                try:
                    expected = {p.partition: p for p in table_health(ms, "default", "sales").partitions}
                finally:
                    ms.close()
                view.get_by_role("button", name="Tables").click()
                view.get_by_role("link", name="default.sales").click()
                for partition, health in expected.items():
                    row = view.locator(f"#health-table tr[data-partition='{partition}'] td")
                    expect(row.nth(0)).to_have_text(partition, timeout=30_000)
                    expect(row.nth(2)).to_have_text(str(health.deltas))
                    expect(row.nth(3)).to_have_text(str(health.delete_deltas))
                first = view.locator("#health-table tr[data-partition='ds=2026-01-01'] td")
                expect(first.nth(2)).to_have_text("3")
                expect(first.nth(7)).to_contain_text(f"waiting for a slot: compaction {ids['queued']} waits")
                expect(first.nth(8)).to_have_text(f"{ids['queued']} (initiated)")
                expect(view.locator("#health-summary")).to_contain_text(
                    "hive.compactor.delta.num.threshold = 2 (table property")
                page.screenshot(path=str(artifacts / "2-health.png"), full_page=True)

                # Compact now: acid_compact queues a major compaction of ds=2026-01-02, which appears in the queue.
                form = view.locator("#health-table tr[data-partition='ds=2026-01-02'] form.compact")
                form.locator("input[name=wait]").uncheck()
                form.get_by_role("button", name="Compact now").click()
                expect(view.locator("#message")).to_contain_text("acid_compact triggered", timeout=30_000)
                page.screenshot(path=str(artifacts / "3-triggered.png"), full_page=True)
                view.get_by_role("button", name="Compactions").click()
                new_entry = view.locator("#queue-table tr", has=view.locator("td", has_text="ds=2026-01-02")).filter(
                    has_text="initiated")
                deadline = time.monotonic() + 240
                while new_entry.count() == 0:
                    assert time.monotonic() < deadline, f"no new entry; {log} ends with:\n{log.read_text()[-3000:]}"
                    time.sleep(3)
                    view.get_by_role("button", name="Compactions").click()
                expect(new_entry.locator("td").nth(4)).to_have_text("major")
                page.screenshot(path=str(artifacts / "4-new-entry.png"), full_page=True)

                # Abort asks first, naming the compaction and its partition; Cancel (which has the focus) and Escape
                # change nothing; confirming aborts it.
                abort = view.get_by_role("button", name=f"Abort compaction {ids['queued']}", exact=True)
                question = view.get_by_role("dialog", name=f"Abort compaction {ids['queued']}?", exact=True)
                cancel = question.get_by_role("button", name="Cancel", exact=True)
                abort.click()
                expect(question).to_be_visible()
                expect(question).to_contain_text(
                    f"Compaction {ids['queued']} (major) of default.sales partition ds=2026-01-01")
                expect(cancel).to_be_focused()
                page.screenshot(path=str(artifacts / "5-abort-asks.png"), full_page=True)
                cancel.click()
                expect(question).to_be_hidden()
                abort.click()
                expect(question).to_be_visible()
                page.keyboard.press("Escape")
                expect(question).to_be_hidden()
                expect(abort).to_be_focused()  # back where the operator was
                expect(view.locator("#message")).not_to_contain_text("aborted")
                expect(queued.locator("td").nth(5)).to_have_text("initiated")
                ms = Metastore(settings.metastore_url, warehouse=settings.warehouse)
                try:
                    assert ms.compactions.get(ids["queued"]).state.display == "initiated"  # nothing was sent
                finally:
                    ms.close()
                abort.click()
                question.get_by_role("button", name="Abort compaction", exact=True).click()
                expect(view.locator("#message")).to_have_text(f"Compaction {ids['queued']} aborted", timeout=30_000)
                expect(queued.locator("td").nth(5)).to_have_text("aborted")
                page.screenshot(path=str(artifacts / "6-aborted.png"), full_page=True)
            finally:
                browser.close()
        ms = Metastore(settings.metastore_url, warehouse=settings.warehouse)
        try:
            (entry,) = [e for e in ms.compactions.show(partition="ds=2026-01-02", table="sales")
                        if e.state.display == "initiated"]
        finally:
            ms.close()
        assert entry.id not in ids.values() and entry.type.display == "MAJOR"
    finally:
        kill_session(standalone.pid)
        standalone.wait(timeout=30)
        shutil.copy(log, artifacts / "airflow-standalone.log")
