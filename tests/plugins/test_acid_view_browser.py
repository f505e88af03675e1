"""The Done-when browser checks of the ACID view: headless Chromium (Debian's package, driven by Playwright) logs in to
one `airflow standalone` started here for the whole module (set up as `make run` sets it up, on loopback, with a
metastore holding real tables with deltas, a queued compaction and six hours of real compactions), and checks that
the view renders inside Airflow's own page with Airflow's look, that its links navigate Airflow (a worker id lands on
its task instance), that Compact now shows up in the visible table without a reload and tabs refresh themselves,
that Abort asks first, that NO_AUTO_COMPACTION makes "Due" say no, and that every chart draws the history.
Screenshots (one per chart) go to the module's directory and, when ACID_TEST_ARTIFACTS is set, are copied there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from support.airflow_api import call, login_token

from acid_core.metastore import Metastore
from acid_core.operations.health import table_health

pytestmark = [pytest.mark.browser, pytest.mark.airflow, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
# a partition of ui_tables.build_history's table that Airflow compacts for real (acid_compact, wait): its worker link
WORKED = ("clicks", "ds=2026-02-06")
CHARTS = ("queue-depth", "oldest-waiting", "outcomes-per-hour", "durations", "table-scores", "score", "top-deltas",
          "top-obsolete")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _environment(home: Path, port: int) -> dict[str, str]:
    """This process's environment without the suite's Airflow, ACID and Spark settings, plus the platform's; DAGs
    are created paused (the test unpauses acid_compact and acid_table_settings, so nothing else moves the queue)."""
    environ = {name: value for name, value in os.environ.items()
               if not name.startswith(("AIRFLOW", "ACID_", "PYSPARK", "SPARK_"))}
    environ.update({"ACID_HOME": str(home), "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__HOST": "127.0.0.1",
                    "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
                    "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),
                    "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port())})
    return environ


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
        time.sleep(0.5)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """Where screenshots go; copied to ACID_TEST_ARTIFACTS/test_acid_view_browser afterwards when that is set."""
    directory = tmp_path_factory.mktemp("acid-view-screenshots")
    yield directory
    target = os.environ.get("ACID_TEST_ARTIFACTS")
    if target:
        shutil.copytree(directory, Path(target) / "test_acid_view_browser", dirs_exist_ok=True)


@pytest.fixture(scope="module")
def airflow(tmp_path_factory, artifacts):
    """`airflow standalone` with the plugin, on a metastore with ui_tables' history and tables; acid_compact and
    acid_table_settings unpaused. Yields what the checks need."""
    from support import ui_tables
    from support.processes import kill_session

    from acid_platform import load_settings, platform_environment

    directory = tmp_path_factory.mktemp("acid-view-airflow")
    home, port = directory / "home", _free_port()
    env = _environment(home, port)
    setup = subprocess.run([sys.executable, "-m", "acid_platform", "--setup-only"], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
    settings = load_settings(env)
    history = ui_tables.build_history(settings.metastore_url, settings.warehouse)
    ids = ui_tables.build(settings.metastore_url, settings.warehouse)

    log = directory / "airflow-standalone.log"
    with open(log, "w") as out:
        standalone = subprocess.Popen([str(Path(sys.executable).parent / "airflow"), "standalone"],
                                      env=platform_environment(settings, env), cwd=home, stdout=out,
                                      stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        passwords = settings.airflow_home / "simple_auth_manager_passwords.json.generated"
        _wait("the API server answering", lambda: call(base, "/api/v2/monitor/health") and passwords.exists(),
              timeout=300, log=log, standalone=standalone)
        password = json.loads(passwords.read_text())["admin"]
        token = login_token(base, "admin", password)
        for dag_id in ("acid_compact", "acid_table_settings"):
            _wait(f"{dag_id} parsed", lambda dag_id=dag_id: call(base, f"/api/v2/dags/{dag_id}", token=token),
                  timeout=240, log=log, standalone=standalone)
            call(base, f"/api/v2/dags/{dag_id}", token=token, method="PATCH", body={"is_paused": False})
        # a real compaction by Airflow's compact task (Spark), running while the first checks do: its worker link
        worked = call(base, "/api/v2/dags/acid_compact/dagRuns", token=token, method="POST", body={
            "logical_date": None, "conf": {"database": "default", "table": WORKED[0], "partition": WORKED[1],
                                           "wait": True}})
        yield {"worked_run_id": worked["dag_run_id"], "base": base, "password": password, "token": token, "ids": ids, "history": history, "log": log,
               "settings": settings, "standalone": standalone}
    finally:
        kill_session(standalone.pid)
        standalone.wait(timeout=30)
        shutil.copy(log, artifacts / "airflow-standalone.log")


@pytest.fixture(scope="module")
def page(airflow):
    """A signed-in Chromium page on the ACID view, reached from Airflow's navigation."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=30_000)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page(viewport={"width": 1600, "height": 1000})
            tab.set_default_timeout(30_000)
            tab.goto(airflow["base"] + "/")
            tab.locator("input[name=username]").fill("admin")
            tab.locator("input[name=password]").fill(airflow["password"])
            tab.locator("button[type=submit]").click()
            tab.get_by_role("link", name="ACID", exact=True).click(timeout=60_000)
            tab.wait_for_url("**/plugin/acid")
            yield tab
        finally:
            browser.close()


def _tab(page, name: str) -> None:
    page.get_by_role("tab", name=name, exact=True).click()


def _metastore(airflow) -> Metastore:
    return Metastore(airflow["settings"].metastore_url, warehouse=airflow["settings"].warehouse)


def _neutral(page, row) -> bool:
    """An aborted entry shows as a neutral state: its badge is not in Airflow's failed colour, nor its note."""
    failed = page.evaluate("""() => {
        const probe = document.createElement("div");
        probe.style.background = "var(--chakra-colors-failed-solid)";
        probe.style.color = "var(--chakra-colors-failed-fg)";
        document.body.appendChild(probe);
        const found = [getComputedStyle(probe).backgroundColor, getComputedStyle(probe).color];
        probe.remove();
        return found;
    }""")
    badge = row.locator(".chakra-badge").evaluate("e => getComputedStyle(e).backgroundColor")
    note = row.locator("td").nth(11).evaluate("e => getComputedStyle(e).color")
    return badge != failed[0] and note != failed[1]


def test_the_view_renders_inside_airflow_with_its_look(page, airflow, artifacts):
    """No iframe: the view is part of Airflow's page (its React, Chakra theme and router); a state badge has
    Airflow's colour for that state; the queue and a table's health are the metastore's."""
    from playwright.sync_api import expect

    ids = airflow["ids"]
    expect(page.get_by_test_id("acid-view")).to_be_visible(timeout=60_000)
    assert page.locator("iframe").count() == 0
    queued = page.locator(f"#queue-active tr[data-id='{ids['queued']}']")
    expect(queued).to_be_visible()
    cells = queued.locator("td")
    expect(cells.nth(1)).to_have_text("default.sales")
    expect(cells.nth(2)).to_have_text("ds=2026-01-01")
    expect(cells.nth(3)).to_have_text("major")
    expect(cells.nth(4)).to_have_text("initiated")
    colours = page.evaluate("""() => {
        const probe = document.createElement("div");
        probe.style.background = "var(--chakra-colors-queued-solid)";
        document.body.appendChild(probe);
        const airflow = getComputedStyle(probe).backgroundColor;
        probe.remove();
        const badge = document.querySelector("#queue-active [data-state=initiated] .chakra-badge, "
                                             + "#queue-active .chakra-badge[data-state=initiated]");
        return {airflow, badge: getComputedStyle(badge).backgroundColor,
                font: getComputedStyle(badge).fontFamily, page: getComputedStyle(document.body).fontFamily};
    }""")
    assert colours["badge"] == colours["airflow"] and colours["airflow"] not in ("", "rgba(0, 0, 0, 0)"), colours
    assert colours["font"] == colours["page"]
    failed = page.locator(f"#queue-history tr[data-id='{ids['failed']}'] td")
    expect(failed.nth(11)).to_have_text("acid_core.errors.FileSystemError: cannot read bucket_00000: disk on fire")
    aborted = page.locator(f"#queue-history tr[data-id='{airflow['history']['aborted']}']")
    expect(aborted.locator("td").nth(4)).to_have_text("aborted")
    assert _neutral(page, aborted)
    page.screenshot(path=str(artifacts / "1-queue.png"))

    ms = _metastore(airflow)
    try:
        expected = {p.partition: p for p in table_health(ms, "default", "sales").partitions}
    finally:
        ms.close()
    _tab(page, "Tables")
    page.get_by_role("link", name="default.sales", exact=True).click()
    for partition, health in expected.items():
        row = page.locator(f"#health-table tr[data-partition='{partition}'] td")
        expect(row.nth(0)).to_have_text(partition)
        expect(row.nth(2)).to_have_text(str(health.deltas))
        expect(row.nth(3)).to_have_text(str(health.delete_deltas))
    first = page.locator("#health-table tr[data-partition='ds=2026-01-01'] td")
    expect(first.nth(7)).to_contain_text(f"waiting for a slot: compaction {ids['queued']} waits")
    expect(first.nth(8)).to_have_text(f"{ids['queued']} (initiated)")
    expect(page.locator("#health-summary")).to_contain_text("hive.compactor.delta.num.threshold = 2 (table property")
    expect(page.locator("form#settings")).to_contain_text(
        "now: 2 (table property compactorthreshold.hive.compactor.delta.num.threshold)")
    page.screenshot(path=str(artifacts / "2-health.png"))

    _tab(page, "Locks")
    expect(page.get_by_text("No locks held")).to_be_visible()
    _tab(page, "Transactions")
    expect(page.locator(f"#txn-table tr[data-txn='{ids['reader']}']")).to_contain_text("OPEN")


def test_compact_now_shows_in_the_visible_table_without_a_reload(page, airflow, artifacts):
    """Compact now (acid_compact, not waiting) on a partition: its run id links to the DAG run, and the new entry
    appears in the visible health table and on top of the queue, with no reload; the view refreshes itself."""
    from playwright.sync_api import expect

    _tab(page, "Tables")
    page.get_by_role("link", name="default.sales", exact=True).click()
    page.evaluate("() => { window.acidNoReload = true; }")
    row = page.locator("#health-table tr[data-partition='ds=2026-01-02']")
    form = row.locator("form.compact")
    form.get_by_text("run it in this DAG run").click()
    expect(form.get_by_role("checkbox")).not_to_be_checked()
    form.get_by_role("button", name="Compact now").click()
    message = page.locator("#message")
    expect(message).to_contain_text("acid_compact triggered for default.sales partition ds=2026-01-02")
    run_link = message.get_by_test_id("run-link")
    assert re.fullmatch(r"/dags/acid_compact/runs/manual__[^/]+", run_link.get_attribute("href"))
    queued = row.locator("td").nth(8)
    expect(queued).to_have_text(re.compile(r"\d+ \(initiated\)"), timeout=120_000)
    new_id = int(queued.inner_text().split()[0])
    assert new_id not in airflow["ids"].values()
    page.screenshot(path=str(artifacts / "3-compact-now.png"))
    _tab(page, "Compactions")
    entry = page.locator(f"#queue-active tr[data-id='{new_id}']")
    expect(entry.locator("td").nth(4)).to_have_text("initiated")
    expect(entry.locator("td").nth(3)).to_have_text("major")
    assert page.evaluate("() => window.acidNoReload === true")  # the same page all along
    refreshed = page.locator("#refreshed")
    expect(refreshed).to_contain_text("every 5 s")  # something is queued
    before = refreshed.inner_text()
    expect(refreshed).not_to_have_text(before, timeout=15_000)  # it refreshed itself
    airflow["compacted_now"] = new_id


def test_abort_asks_first_and_shows_as_neutral(page, airflow, artifacts):
    from playwright.sync_api import expect

    target = airflow.get("compacted_now", airflow["ids"]["queued"])
    _tab(page, "Compactions")
    abort = page.get_by_role("button", name=f"Abort compaction {target}", exact=True)
    question = page.get_by_role("alertdialog", name=f"Abort compaction {target}?", exact=True)
    cancel = question.get_by_role("button", name="Cancel", exact=True)
    abort.click()
    expect(question).to_be_visible()
    expect(question).to_contain_text(f"Compaction {target} (major) of default.sales partition")
    expect(cancel).to_be_focused()
    page.screenshot(path=str(artifacts / "4-abort-asks.png"))
    cancel.click()
    expect(question).to_be_hidden()
    abort.click()
    expect(question).to_be_visible()
    page.keyboard.press("Escape")
    expect(question).to_be_hidden()
    expect(abort).to_be_focused()  # back where the operator was
    ms = _metastore(airflow)
    try:
        assert ms.compactions.get(target).state.display == "initiated"  # nothing was sent
    finally:
        ms.close()
    abort.click()
    question.get_by_role("button", name="Abort compaction", exact=True).click()
    expect(page.locator("#message")).to_have_text(f"Compaction {target} aborted")
    aborted = page.locator(f"#queue-history tr[data-id='{target}']")
    expect(aborted.locator("td").nth(4)).to_have_text("aborted")
    expect(page.locator(f"#queue-active tr[data-id='{target}']")).to_have_count(0)
    assert _neutral(page, aborted)
    page.screenshot(path=str(artifacts / "5-aborted.png"))
    ms = _metastore(airflow)
    try:
        assert ms.compactions.get(target).state.display == "aborted"
    finally:
        ms.close()


def test_no_auto_compaction_makes_due_say_no(page, airflow, artifacts):
    from playwright.sync_api import expect

    _tab(page, "Tables")
    page.get_by_role("link", name="default.sales", exact=True).click()
    settings = page.locator("form#settings")
    expect(settings).to_contain_text("now: false (not set)")
    settings.locator("select[name=no_auto_compaction]").select_option("true")
    settings.get_by_role("button", name="Apply").click()
    expect(page.locator("#message")).to_contain_text("acid_table_settings triggered for default.sales")
    due = page.locator("#health-table tr[data-partition='ds=2026-01-01'] td").nth(6)
    expect(due).to_have_text(re.compile(r"^no: NO_AUTO_COMPACTION \(table\); the thresholds would ask for major: "),
                             timeout=120_000)
    expect(settings).to_contain_text("now: true (table property)")
    expect(page.locator("#message .chakra-badge")).to_have_text("success")
    page.screenshot(path=str(artifacts / "6-no-auto-compaction.png"))


def test_a_worker_link_lands_on_its_task_instance(page, airflow, artifacts):
    """The compaction Airflow's compact task ran (triggered at start-up, with `wait`): its worker id links to that
    task instance's page, which Airflow's router opens in the same page."""
    from playwright.sync_api import expect

    table, partition = WORKED
    _tab(page, "Compactions")
    rows = page.locator("#queue-active tr, #queue-history tr").filter(has_text=f"default.{table}").filter(
        has_text=partition)
    link = rows.get_by_role("link", name=re.compile(r"-airflow\.acid_compact\.compact\[0\]\.try1$")).first
    expect(link).to_be_visible(timeout=180_000)
    page.screenshot(path=str(artifacts / "7-worker.png"))
    link.click()
    page.wait_for_url(re.compile(r".*/dags/acid_compact/runs/[^/]+/tasks/compact/mapped/0$"))
    assert airflow["worked_run_id"] in urllib.parse.unquote(page.url)
    expect(page.get_by_test_id("header-card").get_by_text("AcidCompactionOperator")).to_be_visible()
    page.screenshot(path=str(artifacts / "8-task-instance.png"))
    page.go_back()
    expect(page.get_by_test_id("acid-view")).to_be_visible()


def test_every_chart_draws_the_history(page, airflow, artifacts):
    """Each chart renders with data from six hours of compactions; a screenshot of each is kept. A top partition's
    name opens its health."""
    from playwright.sync_api import expect

    page.goto(airflow["base"] + "/plugin/acid?tab=charts")
    for name in CHARTS[:5]:
        chart = page.locator(f"[data-chart='{name}']")
        expect(chart).to_have_attribute("data-empty", "false")
    for name in CHARTS[:5]:
        expect(page.locator(f"[data-chart='{name}'] [data-value]").first).to_be_attached()
    succeeded = sum(float(value) for value in page.locator(
        "[data-chart='outcomes-per-hour'] rect[data-series=succeeded]").evaluate_all(
        "bars => bars.map(bar => bar.dataset.value)"))
    assert succeeded >= 5
    waiting = [int(v) for v in page.locator("[data-chart='queue-depth'] rect[data-series=waiting]").evaluate_all(
        "bars => bars.map(bar => bar.dataset.value)")]
    assert max(waiting) >= 3  # the burst of three
    expect(page.locator("[data-chart='table-scores'] [data-bar]")).to_have_count(5)  # 3 default, 2 demo tables
    for name in CHARTS[:5]:
        page.locator(f"[data-chart='{name}']").screenshot(path=str(artifacts / f"chart-{name}.png"))
    page.get_by_label("Table", exact=True).select_option(f"default.{WORKED[0]}")
    for name in CHARTS[5:]:
        expect(page.locator(f"[data-chart='{name}']")).to_have_attribute("data-empty", "false")
    expect(page.locator("#health-score")).to_have_text(re.compile(r"^\d+$"))
    top = page.locator("[data-chart='top-deltas'] [data-bar]").first
    expect(top).to_have_attribute("data-bar", "ds=2026-02-05")
    expect(top).to_have_attribute("data-value", "9")
    for name in CHARTS[5:]:
        page.locator(f"[data-chart='{name}']").screenshot(path=str(artifacts / f"chart-{name}.png"))
    top.get_by_role("link", name="ds=2026-02-05").click()
    expect(page.locator("#health-table tr[data-partition='ds=2026-02-05'] td").nth(2)).to_have_text("9")
    expect(page.locator("#health-table tbody tr")).to_have_count(1)
    for name in CHARTS:
        assert (artifacts / f"chart-{name}.png").stat().st_size > 2000
