"""The ACID view's endpoints on Airflow's own API server app (TestClient), over a real SQLite metastore and real table
files: what each returns, the actions' effects, and Airflow's authentication and authorization on every route."""

from __future__ import annotations

import pytest
from support.ui_auth import token_for

from acid_core.metastore.codes import CompactionType

pytestmark = pytest.mark.airflow


def _plugin_routes(api_app):
    """(method, path) of every route of the mounted ACID view app, with example path parameters."""
    from starlette.routing import Mount

    mount = next(route for route in api_app.routes if isinstance(route, Mount) and route.path == "/acid")
    found = []
    for route in mount.app.routes:
        for method in sorted(getattr(route, "methods", None) or ()):
            if method == "HEAD":
                continue
            path = route.path.replace("{database}", "default").replace("{table}", "sales")
            found.append((method, "/acid" + path.replace("{compaction_id}", "1")))
    return found


def test_the_plugin_is_registered_and_listed(as_admin, api_app):
    """A React app plugin: Airflow's UI imports the bundle (relative to its base URL) and renders it at /plugin/acid
    inside its own page; no iframe, no external view."""
    plugins = as_admin.get("/api/v2/plugins").json()["plugins"]
    mine = next(plugin for plugin in plugins if plugin["name"] == "acid_view")
    assert mine["fastapi_apps"][0]["url_prefix"] == "/acid"
    (app,) = mine["react_apps"]
    assert (app["name"], app["url_route"], app["destination"], app["bundle_url"]) == (
        "ACID", "acid", "nav", "acid/static/view.js")
    assert mine["external_views"] == []
    assert len(_plugin_routes(api_app)) >= 12


def test_every_route_refuses_anonymous_and_unknown_users(client, api_app, tables):
    for method, path in _plugin_routes(api_app):
        body = {} if method == "POST" else None
        anonymous = client.request(method, path, json=body)
        assert anonymous.status_code == 401, (method, path, anonymous.status_code)
        forged = client.request(method, path, json=body, headers={"Authorization": "Bearer not.a.jwt"})
        assert forged.status_code == 403, (method, path, forged.status_code)
        if path != "/acid/api/me":  # who-am-I needs a signed-in user, no permission
            no_role = client.request(method, path, json=body,
                                     headers={"Authorization": f"Bearer {token_for(None, 'nobody')}"})
            assert no_role.status_code == 403, (method, path, no_role.status_code)


def test_a_viewer_reads_but_cannot_act(client, tables):
    client.headers["Authorization"] = f"Bearer {token_for('viewer')}"
    assert client.get("/acid/").status_code == 200
    assert client.get("/acid/api/compactions").status_code == 200
    assert client.post(f"/acid/api/compactions/{tables['queued']}/abort").status_code == 403
    assert client.post("/acid/api/compactions", json={"database": "default", "table": "events"}).status_code == 403
    assert client.post("/acid/api/tables/default/events/settings", json={}).status_code == 403


def test_the_view_is_served_as_modules_and_its_old_page_leads_into_airflow(as_admin, tables):
    page = as_admin.get("/acid/", follow_redirects=False)
    assert page.status_code == 307 and page.headers["location"] == "../plugin/acid"
    bundle = as_admin.get("/acid/static/view.js")
    assert bundle.status_code == 200 and bundle.headers["content-type"].startswith("text/javascript")
    assert bundle.headers["cache-control"] == "no-cache" and "globalThis.AirflowPlugin = AcidView" in bundle.text
    for tab in ("Compactions", "Tables", "Charts", "Transactions", "Locks"):
        assert f'"{tab}"' in bundle.text
    for module in ("api", "queue", "tables", "charts", "scores", "pictures", "txns"):  # imported by view.js or another
        assert as_admin.get(f"/acid/static/{module}.js").status_code == 200, module
    for name in ("nope.js", "..%2Fapp.py", "view.js.map", "VIEW.JS"):
        assert as_admin.get(f"/acid/static/{name}").status_code == 404, name


def test_queue_and_history_with_filters_times_one_line_errors_and_worker_links(as_admin, tables):
    listed = as_admin.get("/acid/api/compactions").json()["compactions"]
    by_id = {entry["id"]: entry for entry in listed}
    assert set(by_id) == {tables["queued"], tables["failed"], tables["compacted"]}
    queued = by_id[tables["queued"]]
    assert (queued["state"], queued["type"], queued["partition"], queued["pool"]) == (
        "initiated", "major", "ds=2026-01-01", "default")
    assert queued["enqueued"].endswith("ago)") and " UTC (" in queued["enqueued"]
    failed = by_id[tables["failed"]]
    assert failed["state"] == "failed"
    assert failed["error"] == "acid_core.errors.FileSystemError: cannot read bucket_00000: disk on fire"
    assert failed["worker_id"] == "host-airflow.acid_worker.compact[3].try1"
    assert failed["worker_task_url"] == "/dags/acid_worker/tasks/compact"  # no such task instance in Airflow's DB
    assert by_id[tables["compacted"]]["state"] == "ready for cleaning"

    def ids(**filters):
        response = as_admin.get("/acid/api/compactions", params=filters)
        assert response.status_code == 200, response.text
        return [entry["id"] for entry in response.json()["compactions"]]

    assert ids(state="initiated") == [tables["queued"]]
    assert ids(table="events") == [tables["compacted"]]
    assert ids(partition="ds=2026-01-02") == [tables["failed"]]
    assert ids(type="minor") == [tables["failed"]]
    assert ids(pool="default", database="default", limit=1) and ids(pool="other") == []
    bad = as_admin.get("/acid/api/compactions", params={"state": "sleeping"})
    assert bad.status_code == 400 and "sleeping" in bad.json()["detail"]
    assert queued["active"] and not failed["active"] and queued["duration"] is None
    assert failed["duration"].endswith("ms") and failed["duration_ms"] >= 0


def test_queued_and_working_entries_come_first_and_are_never_paged_away(as_admin, history_tables):
    """Past a page of history the waiting entries stay listed (with their Abort), working ones first; the history
    pages on; the empty queue says what it means."""
    from acid_core.metastore import Metastore

    history = history_tables["history"]
    ms = Metastore(history_tables["url"], warehouse=history_tables["warehouse"])
    try:
        ms.compactions.claim(worker_id="host-w", compaction_id=history_tables["queued"])
        waiting = ms.compactions.enqueue("default", "clicks", "ds=2026-02-06", CompactionType.MAJOR).compaction_id
    finally:
        ms.close()
    first = as_admin.get("/acid/api/compactions", params={"limit": 2}).json()
    listed = [(entry["id"], entry["state"]) for entry in first["compactions"]]
    assert listed[:2] == [(history_tables["queued"], "working"), (waiting, "initiated")]
    assert first["active"] == 2 and len(listed) == 4 and first["more"] and first["offset"] == 0
    assert first["compactions"][0]["duration"] is not None  # working: so far
    pages, offset = [entry["id"] for entry in first["compactions"][2:]], 2
    while True:
        page = as_admin.get("/acid/api/compactions", params={"limit": 2, "offset": offset}).json()
        assert [entry["id"] for entry in page["compactions"][:2]] == [history_tables["queued"], waiting]
        pages += [entry["id"] for entry in page["compactions"][2:]]
        offset += 2
        if not page["more"]:
            break
    everything = [entry["id"] for entry in as_admin.get("/acid/api/compactions", params={"limit": 500}).json()[
        "compactions"]]
    assert pages == everything[2:] and len(pages) == len(set(pages)) == 11
    assert history["aborted"] in pages and history["did_not_initiate"] in pages
    only = as_admin.get("/acid/api/compactions", params={"state": "initiated", "limit": 1}).json()
    assert [entry["id"] for entry in only["compactions"]] == [waiting] and not only["more"]
    done = as_admin.get("/acid/api/compactions", params={"state": "succeeded"}).json()
    assert done["active"] == 0 and {entry["state"] for entry in done["compactions"]} == {"succeeded"}

    initiator = first["initiator"]
    assert initiator == {"dag_id": "acid_initiator", "known": True, "paused": initiator["paused"],
                         "interval_s": 300, "schedule": "0:05:00"}


def test_worker_ids_link_to_their_task_instance(as_admin, tables, ui_airflow_db):
    """A worker id whose task attempt is in Airflow's database links to that task instance's page."""
    import datetime as dt
    from urllib.parse import quote

    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.types import DagRunTriggeredByType

    run = trigger_dag("acid_compact", triggered_by=DagRunTriggeredByType.TEST, conf={
        "database": "default", "table": "events", "wait": False})
    with create_session() as session:
        ti = session.query(TaskInstance).filter_by(dag_id="acid_compact", run_id=run.run_id, task_id="compact").one()
        ti.try_number, ti.start_date = 1, dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
    from acid_core.metastore import Metastore

    ms = Metastore(tables["url"], warehouse=tables["warehouse"])
    try:
        ms.compactions.claim(worker_id="host-airflow.acid_compact.compact.try1", compaction_id=tables["queued"])
    finally:
        ms.close()
    entry = next(c for c in as_admin.get("/acid/api/compactions").json()["compactions"] if c["id"] == tables["queued"])
    assert entry["worker_task_url"] == f"/dags/acid_compact/runs/{quote(run.run_id, safe='')}/tasks/compact"


def test_table_list_and_health_match_the_metastore_and_files(as_admin, tables):
    listed = {(t["database"], t["table"]): t for t in as_admin.get("/acid/api/tables").json()["tables"]}
    assert listed[("default", "sales")]["partition_keys"] == ["ds"]
    assert listed[("default", "sales")]["pending_compactions"] == 1

    sales = as_admin.get("/acid/api/tables/default/sales/health").json()
    assert sales["total_partitions"] == 2 and not sales["no_auto_compaction"]
    thresholds = {t["name"]: t for t in sales["thresholds"]}
    assert thresholds["hive.compactor.delta.num.threshold"]["value"] == 2
    assert thresholds["hive.compactor.delta.num.threshold"]["source"].startswith("table property")
    assert thresholds["hive.compactor.delta.pct.threshold"] == {
        "name": "hive.compactor.delta.pct.threshold", "value": 0.1, "source": "default"}
    first, second = sales["partitions"]
    assert (first["partition"], first["base"], first["deltas"], first["delete_deltas"]) == ("ds=2026-01-01", None, 3, 0)
    assert first["delta_bytes"] > 0 and first["base_bytes"] == 0 and first["delta_size"].endswith("B")
    assert first["due"] == "major" and "3 deltas > delta.num.threshold 2" in first["reason"]
    assert first["queued"] == [tables["queued"], "initiated"]
    assert second["last_compaction"]["id"] == tables["failed"] and second["last_compaction"]["state"] == "failed"
    assert second["consecutive_failures"] == 1 and not second["past_failed_threshold"]
    assert second["due"] is None and "1 deltas <= delta.num.threshold 2" in second["reason"]
    # why not yet, in a word, a sentence and since when
    assert (first["why"], first["since"] is not None) == ("waiting for a slot", True)
    assert first["why_detail"] == f"compaction {tables['queued']} waits for a slot of pool default: 0 queued before it"
    assert (second["why"], second["why_detail"]) == ("below threshold", second["reason"])

    page = as_admin.get("/acid/api/tables/default/sales/health", params={"offset": 1, "limit": 1}).json()
    assert [p["partition"] for p in page["partitions"]] == ["ds=2026-01-02"] and page["total_partitions"] == 2

    events = as_admin.get("/acid/api/tables/default/events/health").json()
    (whole,) = events["partitions"]
    assert whole["partition"] is None and whole["base"].startswith("base_0000004_v") and whole["deltas"] == 0
    assert len(whole["obsolete"]) == 4 and all(name.startswith("delta_") for name in whole["obsolete"])
    (holder,) = whole["held_by"]
    assert (holder["kind"], holder["txn_id"], holder["compaction_id"]) == (
        "transaction", tables["reader"], tables["compacted"])
    assert "ui test reader" in holder["detail"]

    assert as_admin.get("/acid/api/tables/default/nope/health").status_code == 404
    bad = as_admin.get("/acid/api/tables/default/sales/health", params={"partition": "ds=1/x=2"})
    assert bad.status_code == 400 and "ds=<value>" in bad.json()["detail"]
    assert as_admin.get("/acid/api/tables/default/sales/health", params={"limit": 201}).status_code == 422


def test_failed_threshold_and_table_settings_show_in_health(as_admin, tables):
    from acid_core.metastore import Metastore
    from acid_core.metastore.codes import CompactionType

    ms = Metastore(tables["url"], warehouse=tables["warehouse"])
    try:
        again = ms.compactions.enqueue("default", "sales", "ds=2026-01-02", CompactionType.MINOR).compaction_id
        ms.compactions.mark_failed(again, "ValueError: again")
        ms.catalog.set_table_params("default", "sales", {"NO_AUTO_COMPACTION": "true"})
    finally:
        ms.close()
    sales = as_admin.get("/acid/api/tables/default/sales/health").json()
    assert sales["no_auto_compaction"] and sales["no_auto_compaction_source"] == "table"
    second = sales["partitions"][1]
    assert second["consecutive_failures"] == 2 and second["past_failed_threshold"]
    assert second["why"] == "no_auto_compaction" and "only a manual request" in second["why_detail"]


def test_due_honours_no_auto_compaction_and_settings_show_their_current_values(as_admin, tables):
    from acid_core.metastore import Metastore

    sales = as_admin.get("/acid/api/tables/default/sales/health").json()
    assert sales["settings"] == {"no_auto_compaction": None, "delta_num_threshold": "2", "delta_pct_threshold": None}
    assert sales["partitions"][0]["due"] == "major"
    ms = Metastore(tables["url"], warehouse=tables["warehouse"])
    try:
        ms.catalog.set_table_params("default", "sales", {"NO_AUTO_COMPACTION": "true"})
    finally:
        ms.close()
    sales = as_admin.get("/acid/api/tables/default/sales/health").json()
    first = sales["partitions"][0]
    assert sales["settings"]["no_auto_compaction"] == "true" and sales["no_auto_compaction_source"] == "table"
    assert (first["due"], first["thresholds_due"]) == (None, "major")
    assert first["reason"] == ("NO_AUTO_COMPACTION (table); the thresholds would ask for major: 3 deltas > "
                               "delta.num.threshold 2 and no base")


def test_transactions_open_first_filtered_and_paged(as_admin, tables):
    from acid_core.metastore import Metastore

    ms = Metastore(tables["url"], warehouse=tables["warehouse"])
    try:
        aborted = [ms.txns.open_txn(agent_info=f"gone {n}") for n in range(3)]
        for txn_id in aborted:
            ms.txns.abort(txn_id)
        later = ms.txns.open_txn(agent_info="later reader")
    finally:
        ms.close()

    def listed(**params):
        answer = as_admin.get("/acid/api/transactions", params=params)
        assert answer.status_code == 200, answer.text
        return answer.json()

    everything = listed()
    assert [(t["txn_id"], t["state"]) for t in everything["transactions"]] == [
        (tables["reader"], "OPEN"), (later, "OPEN")] + [(txn_id, "ABORTED") for txn_id in aborted]
    assert (everything["open"], everything["aborted"], everything["total"]) == (2, 3, 5)
    assert [t["txn_id"] for t in listed(state="aborted", offset=1, limit=1)["transactions"]] == [aborted[1]]
    assert [t["txn_id"] for t in listed(state="open")["transactions"]] == [tables["reader"], later]
    assert [t["txn_id"] for t in listed(offset=1, limit=2)["transactions"]] == [later, aborted[0]]
    assert as_admin.get("/acid/api/transactions", params={"state": "committed"}).status_code == 422
    assert as_admin.get("/acid/api/transactions", params={"limit": 501}).status_code == 422


def test_history_stats_draw_the_metastore_history(as_admin, history_tables):
    stats = as_admin.get("/acid/api/stats/history", params={"hours": 12}).json()
    assert stats["outcomes"] == ["succeeded", "failed", "refused", "aborted", "did not initiate"]
    totals = [sum(hour["counts"][index] for hour in stats["hours"]) for index in range(5)]
    assert totals == [6, 2, 1, 1, 1]  # with ui_tables.build's compacted and failed entries
    assert max(step["waiting"] for step in stats["queue"]) == 3 and stats["waiting_now"] == 1
    assert stats["oldest_waiting_thresholds_s"] == {"warning": 3600, "critical": 43200}
    clicks = as_admin.get("/acid/api/stats/history", params={"database": "default", "table": "clicks"}).json()
    assert clicks["ended"] == 9 and clicks["waiting_now"] == 0 and clicks["hours_asked"] == 12
    assert as_admin.get("/acid/api/stats/history", params={"hours": 169}).status_code == 422
    refused = as_admin.get("/acid/api/stats/history", params={"table": "clicks"})
    assert refused.status_code == 400 and "without its database" in refused.json()["detail"]


def test_score_and_top_partitions(as_admin, history_tables):
    score = as_admin.get("/acid/api/tables/default/clicks/score", params={"top": 3}).json()
    assert [(p["partition"], p["deltas"]) for p in score["most_deltas"]] == [
        ("ds=2026-02-05", 9), ("ds=2026-02-06", 6), ("ds=2026-02-03", 1)]
    assert [(p["partition"], p["obsolete"]) for p in score["most_obsolete"]] == [("ds=2026-02-02", 3)]
    assert [c["name"] for c in score["components"]] == ["deltas", "delta/base size", "obsolete directories",
                                                        "failures"]
    assert 0 < score["score"] < 100 and score["examined"] == score["total_partitions"] == 6
    page = as_admin.get("/acid/api/tables/default/clicks/score", params={"offset": 4, "limit": 2}).json()
    assert (page["examined"], page["offset"]) == (2, 4)
    events = as_admin.get("/acid/api/tables/default/events/score").json()
    assert events["most_obsolete"][0]["obsolete"] == 4 and events["most_deltas"] == []
    assert as_admin.get("/acid/api/tables/default/nope/score").status_code == 404
    assert as_admin.get("/acid/api/tables/default/clicks/score", params={"top": 51}).status_code == 422


def test_empty_metastore_says_what_it_means(as_admin, tmp_path, monkeypatch):
    """No tables, no queue, no transactions, no locks: empty lists (the view words them), not errors."""
    import json

    from acid_core.metastore import Metastore

    url = f"sqlite:///{tmp_path}/empty.db"
    Metastore(url, warehouse=str(tmp_path / "w")).init()
    monkeypatch.setenv("AIRFLOW_CONN_ACID_METASTORE", json.dumps(
        {"conn_type": "generic", "host": url, "extra": {"warehouse": str(tmp_path / "w")}}))
    queue = as_admin.get("/acid/api/compactions").json()
    assert (queue["compactions"], queue["active"], queue["more"]) == ([], 0, False)
    assert queue["initiator"]["interval_s"] == 300
    assert as_admin.get("/acid/api/tables").json()["tables"] == []
    assert as_admin.get("/acid/api/transactions").json()["total"] == 0
    assert as_admin.get("/acid/api/locks").json()["locks"] == []
    stats = as_admin.get("/acid/api/stats/history").json()
    assert stats["ended"] == 0 and not any(step["waiting"] for step in stats["queue"])


def test_transactions_and_locks(as_admin, tables):
    from acid_core.metastore import Metastore
    from acid_core.metastore.locks import LockComponent, LockType

    ms = Metastore(tables["url"], warehouse=tables["warehouse"])
    try:
        ms.locks.lock([LockComponent("default", "events", None, LockType.SHARED_READ)], txn_id=tables["reader"])
    finally:
        ms.close()
    (txn,) = as_admin.get("/acid/api/transactions").json()["transactions"]
    assert (txn["txn_id"], txn["state"], txn["agent_info"]) == (tables["reader"], "OPEN", "ui test reader")
    assert "UTC" in txn["started"]
    (lock,) = as_admin.get("/acid/api/locks", params={"table": "events"}).json()["locks"]
    assert (lock["txn_id"], lock["table"], lock["state"], lock["type"]) == (
        tables["reader"], "events", "ACQUIRED", "SHARED_READ")
    assert as_admin.get("/acid/api/locks", params={"table": "sales"}).json()["locks"] == []


def test_abort_a_queued_compaction(as_admin, tables):
    done = as_admin.post(f"/acid/api/compactions/{tables['queued']}/abort")
    assert done.status_code == 200 and done.json()["message"] == "Successfully aborted compaction"
    entry = next(c for c in as_admin.get("/acid/api/compactions").json()["compactions"] if c["id"] == tables["queued"])
    assert entry["state"] == "aborted"
    again = as_admin.post(f"/acid/api/compactions/{tables['queued']}/abort")
    assert again.status_code == 409 and "aborted" in again.json()["detail"]
    assert as_admin.post(f"/acid/api/compactions/{tables['failed']}/abort").status_code == 409
    assert as_admin.post("/acid/api/compactions/99999/abort").status_code == 404
    assert "Aborted by admin from the ACID view" in entry["error"]


def _runs(dag_id: str):
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        return {run.run_id: (run.conf, run.triggering_user_name, run.note)
                for run in session.query(DagRun).filter(DagRun.dag_id == dag_id)}


def test_compact_now_triggers_acid_compact_with_its_params(as_admin, tables):
    from urllib.parse import quote

    before = _runs("acid_compact")
    answer = as_admin.post("/acid/api/compactions", json={
        "database": "default", "table": "sales", "partition": "ds=2026-01-02", "type": "minor", "wait": False})
    assert answer.status_code == 200, answer.text
    run_id = answer.json()["run_id"]
    assert run_id not in before and answer.json()["url"] == f"/dags/acid_compact/runs/{quote(run_id, safe='')}"
    conf, user, note = _runs("acid_compact")[run_id]
    assert conf == {"database": "default", "table": "sales", "partition": "ds=2026-01-02", "type": "minor",
                    "pool": None, "wait": False}
    assert user == "admin" and "default.sales partition ds=2026-01-02" in note

    for body, code, words in (
            ({"database": "default", "table": "nope"}, 404, "nope"),
            ({"database": "default", "table": "sales", "partition": "day=1"}, 400, "ds=<value>"),
            ({"database": "default", "table": "sales", "type": "huge"}, 422, None),
            ({"database": "default", "table": "sales", "pool": "bad pool!"}, 400, "'bad pool!' is not valid")):
        refused = as_admin.post("/acid/api/compactions", json=body)
        assert refused.status_code == code, (body, refused.text)
        if words:
            assert words in str(refused.json()["detail"])
    assert len(_runs("acid_compact")) == len(before) + 1


def test_table_settings_trigger_acid_table_settings(as_admin, tables):
    answer = as_admin.post("/acid/api/tables/default/events/settings",
                           json={"no_auto_compaction": "true", "delta_num_threshold": 4})
    assert answer.status_code == 200, answer.text
    conf, user, _ = _runs("acid_table_settings")[answer.json()["run_id"]]
    assert conf == {"database": "default", "table": "events", "no_auto_compaction": "true",
                    "delta_num_threshold": 4, "delta_pct_threshold": None, "clear_thresholds": False}
    before = len(_runs("acid_table_settings"))
    negative = as_admin.post("/acid/api/tables/default/events/settings", json={"delta_pct_threshold": -1})
    assert negative.status_code == 400 and "must be a number >= 0, got '-1.0'" in negative.json()["detail"]
    both = as_admin.post("/acid/api/tables/default/events/settings",
                         json={"delta_num_threshold": 3, "clear_thresholds": True})
    assert both.status_code == 400 and "cannot be combined" in both.json()["detail"]
    assert len(_runs("acid_table_settings")) == before
    assert as_admin.post("/acid/api/tables/default/nope/settings", json={}).status_code == 404
