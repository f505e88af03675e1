"""Forms that refuse bad input before a run (issue 24, item 5).

Triggers go through Airflow's own REST API (`POST /api/v2/dags/{dag_id}/dagRuns`, the endpoint the trigger form
posts to) on the API server app built in-process as `airflow api-server` builds it, with a SimpleAuthManager token:
a malformed partition, a negative threshold, a missing or malformed name get a 400 carrying the Param's message and
no DAG run is made; a valid trigger is accepted. What only the run can find out (an unknown table) ends it with one
line and no traceback.
"""

from __future__ import annotations

import os
import secrets

import pytest
from support.dag_support import task_states

pytestmark = pytest.mark.airflow

COMPACT = {"database": "default", "table": "sales", "partition": "ds=2026-11-01", "type": "major", "wait": False}
SETTINGS = {"database": "default", "table": "sales", "no_auto_compaction": "leave", "delta_num_threshold": None,
            "delta_pct_threshold": None, "clear_thresholds": False}


@pytest.fixture(scope="module")
def api(airflow_db, dagbag):
    """A TestClient of Airflow's API server app, as an admin, with this repo's DAGs serialized (as the DAG processor
    would write them)."""
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import sync_bag_to_db
    from fastapi.testclient import TestClient

    assert dagbag.import_errors == {}
    with pytest.MonkeyPatch.context() as patch:
        if not os.environ.get("AIRFLOW__API_AUTH__JWT_SECRET"):  # long enough for HS512: PyJWT warns otherwise
            patch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", secrets.token_hex(64))
        DagBundlesManager().sync_bundles_to_db()
        sync_bag_to_db(dagbag, "dags-folder", None)
        with TestClient(create_app(), base_url="http://localhost") as client:
            token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
            client.headers["Authorization"] = f"Bearer {token}"
            yield client


def _runs(dag_id: str) -> dict[str, dict]:
    """The conf of every run of `dag_id`, by run id, from Airflow's database."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        return {run.run_id: run.conf for run in session.query(DagRun).filter(DagRun.dag_id == dag_id)}


def _trigger(api, dag_id: str, conf: dict, **headers):
    return api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf}, headers=headers)


@pytest.mark.parametrize("dag_id, conf, message", [
    ("acid_compact", {**COMPACT, "partition": "day 2026-11-01"},
     "Invalid input for param partition: 'day 2026-11-01' does not match"),
    ("acid_table_settings", {**SETTINGS, "delta_num_threshold": -1},
     "Invalid input for param delta_num_threshold: -1 is less than the minimum of 0"),
    ("acid_table_settings", {**SETTINGS, "delta_pct_threshold": -0.5},
     "Invalid input for param delta_pct_threshold: -0.5 is less than the minimum of 0"),
    ("acid_compact", {**COMPACT, "partition": "ds=2026-11-01/"}, "Invalid input for param partition:"),
    ("acid_compact", {**COMPACT, "partition": "../x"}, "Invalid input for param partition: '../x' does not match"),
    ("acid_compact", {key: value for key, value in COMPACT.items() if key != "database"},
     "Invalid input for param database: No value passed"),
    ("acid_table_settings", {key: value for key, value in SETTINGS.items() if key != "table"},
     "Invalid input for param table: No value passed"),
    ("acid_compact", {**COMPACT, "table": "sales; DROP TABLE sales"},
     "Invalid input for param table: 'sales; DROP TABLE sales' does not match"),
    ("acid_table_settings", {**SETTINGS, "database": "x" * 129}, "Invalid input for param database: 'xxxx"),
    ("acid_compact", {**COMPACT, "type": "full"}, "Invalid input for param type: 'full' is not one of"),
    ("acid_compact", {**COMPACT, "pool": "etl pool"}, "Invalid input for param pool: 'etl pool' does not match"),
    ("acid_compact", {**COMPACT, "type": "rebalance", "number_of_buckets": 0},
     "Invalid input for param number_of_buckets: 0 is less than the minimum of 1"),
    ("acid_compact", {**COMPACT, "type": "rebalance", "number_of_buckets": 4097},
     "Invalid input for param number_of_buckets: 4097 is greater than the maximum of 4096"),
    ("acid_table_settings", {**SETTINGS, "no_auto_compaction": "yes"},
     "Invalid input for param no_auto_compaction: 'yes' is not one of"),
])
def test_a_bad_trigger_is_refused_with_the_params_message_and_makes_no_run(api, dag_id, conf, message):
    before = _runs(dag_id)

    answer = _trigger(api, dag_id, conf)

    assert answer.status_code == 400, answer.text
    detail = answer.json()["detail"]
    assert detail.startswith(message), detail
    assert _runs(dag_id) == before


def test_the_trigger_form_is_refused_the_same_way(api):
    """The UI's form posts to the same endpoint (with a Referer): same 400, same message, no run."""
    before = _runs("acid_table_settings")

    answer = _trigger(api, "acid_table_settings", {**SETTINGS, "delta_num_threshold": -1},
                      referer="http://localhost/dags/acid_table_settings/trigger")

    assert answer.status_code == 400
    assert answer.json()["detail"].startswith("Invalid input for param delta_num_threshold: -1 is less than the "
                                              "minimum of 0")
    assert _runs("acid_table_settings") == before


# Airflow 3.3's DAGDetailsResponse serializes its deprecated `concurrency` field (pydantic warns "deprecated")
@pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning")
def test_the_forms_schema_bounds_numbers_without_letting_the_form_clamp_them(api):
    """The form gives a top-level `minimum` / `maximum` to its number field, which clamps -1 to 0 without a word: the
    bounds are under `allOf`, checked when the run is made. `database` has no default."""
    params = api.get("/api/v2/dags/acid_table_settings/details").json()["params"]

    schema = params["delta_num_threshold"]["schema"]
    assert "minimum" not in schema and schema["allOf"] == [{"minimum": 0}]
    assert params["database"]["value"] is None and params["database"]["schema"]["type"] == "string"
    compact = api.get("/api/v2/dags/acid_compact/details").json()["params"]
    assert compact["number_of_buckets"]["schema"]["allOf"] == [{"minimum": 1, "maximum": 4096}]
    assert compact["type"]["schema"]["enum"] == ["major", "minor", "rebalance"]


@pytest.mark.parametrize("dag_id, conf", [
    ("acid_compact", COMPACT),
    ("acid_compact", {**COMPACT, "partition": "ds=2026-11-01/hr=03", "type": "rebalance", "number_of_buckets": 8,
                      "pool": "etl.hot-1"}),
    ("acid_compact", {**COMPACT, "partition": None, "pool": ""}),
    ("acid_table_settings", {**SETTINGS, "delta_num_threshold": 0, "delta_pct_threshold": 0.25}),
])
def test_a_valid_trigger_is_accepted(api, dag_id, conf):
    before = _runs(dag_id)

    answer = _trigger(api, dag_id, conf)

    assert answer.status_code == 200, answer.text
    run_id = answer.json()["dag_run_id"]
    assert set(_runs(dag_id)) == set(before) | {run_id} and _runs(dag_id)[run_id] == conf
    assert api.delete(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}").status_code == 204  # no scheduler here: tidy up


def test_the_identifier_pattern_is_the_catalogs_rule():
    """The Params' pattern for names is the one `check_identifier` applies (the catalog is too heavy to import when a
    DAG file is parsed)."""
    import re

    from acid_plugin.params import IDENTIFIER, MAX_IDENTIFIER

    from acid_core.errors import AcidError
    from acid_core.metastore.catalog import check_identifier

    def catalog_takes(name: str) -> bool:
        try:
            check_identifier(name, "table")
        except AcidError:
            return False
        return True

    for name in ("sales", "_t", "T2", "a" * 128, "a" * 129, "2t", "", "a-b", "a b", "a.b", "t;", "é", "../x"):
        schema_takes = re.search(IDENTIFIER, name) is not None and len(name) <= MAX_IDENTIFIER
        assert schema_takes == catalog_takes(name), name


def test_the_tasks_own_checks_apply_the_same_rules_in_words():
    """Should a run be made without the trigger's validation, the task refuses by the same rules, in words."""
    from acid_plugin.params import Bounds, check_partition, check_pool

    from acid_core.errors import InvalidPoolNameError

    with pytest.raises(ValueError, match=r"^partition 'day 2026-11-01' is malformed: expected key=value\[/key="):
        check_partition("day 2026-11-01")
    assert check_partition("ds=2026-11-01/hr=03") == "ds=2026-11-01/hr=03"
    with pytest.raises(ValueError, match="^delta_num_threshold must be a whole number >= 0, got -1$"):
        Bounds(0).check("delta_num_threshold", -1)
    with pytest.raises(InvalidPoolNameError, match="^pool 'etl pool' is not valid: use 1 to 128 letters"):
        check_pool("etl pool")
    assert check_pool("") is None and check_pool("etl.hot-1") == "etl.hot-1"


@pytest.mark.parametrize("dag_id, conf, reason", [
    ("acid_compact", {**COMPACT, "table": "nope", "pool": None, "number_of_buckets": None, "pyspark_memory": None,
                      "properties": {}},
     "acid_compact: refusing default.nope: table default.nope does not exist"),
    ("acid_table_settings", {**SETTINGS, "table": "nope"},
     "acid_table_settings: refusing default.nope: table default.nope does not exist"),
])
def test_what_only_the_run_can_find_ends_it_with_one_line_and_no_traceback(acid_connection, make_ms, dagbag, capfd,
                                                                          dag_id, conf, reason):
    make_ms()

    run = dagbag.get_dag(dag_id).test(run_conf=conf)

    assert run.state == "failed" and "failed" in task_states(run).values()
    output = "".join(capfd.readouterr())
    assert f"exit_code='{reason}'" in output  # "Task exited exit_code=...": the log's last line names the problem
    assert "Traceback" not in output and "Task failed with exception" not in output
