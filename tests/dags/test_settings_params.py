"""The DAGs' Params of the registry's settings (acid_core/settings.py) are made from it: the same default, type and
range (in the description in words, and in the schema where the trigger refuses), and the task's check refuses what
the registry refuses, in the registry's words."""

from __future__ import annotations

import pytest

from acid_core import settings

pytestmark = pytest.mark.airflow

DAG_IDS = sorted({dag_id for setting in settings.SETTINGS for dag_id in setting.dags})
TYPES = {"integer": "integer", "number": "number", "boolean": "boolean", "string": "string", "memory": "string"}


def _type(schema: dict) -> tuple[str, bool]:
    """The Param's JSON type and whether it may be empty (null)."""
    kind = schema["type"]
    if isinstance(kind, list):
        return next(k for k in kind if k != "null"), "null" in kind
    return kind, False


@pytest.mark.parametrize("dag_id", DAG_IDS)
def test_every_setting_param_has_the_registrys_default_type_and_range(dagbag, dag_id):
    dag = dagbag.get_dag(dag_id)
    assert dag is not None, dagbag.import_errors
    for setting in settings.for_dag(dag_id):
        param = dag.params.get_param(setting.param_name)
        kind, nullable = _type(param.schema)
        assert kind == TYPES[setting.kind], setting.name
        if nullable and param.value is None:  # empty means "leave it" or "the table's": no default of its own
            assert setting.default is None or dag_id in ("acid_table_settings", "acid_compact"), setting.name
        else:
            assert param.value == setting.default, (dag_id, setting.name)
        description = param.description or ""
        if setting.kind in ("integer", "number", "memory"):
            assert f"({setting.expected()}" in description, (dag_id, setting.name, description)
        bounds = param.schema.get("allOf", [{}])[0]
        if bounds:  # refused by the trigger itself: the registry's bounds
            assert bounds == {key: value for key, value in (("minimum", setting.bounds.minimum),
                                                             ("maximum", setting.bounds.maximum)) if value is not None}
        if setting.max_length and kind == "string":
            assert param.schema["maxLength"] == setting.max_length


@pytest.mark.parametrize("dag_id", DAG_IDS)
def test_the_task_check_refuses_what_the_registry_refuses(dagbag, dag_id):
    from acid_plugin.params import check_setting_params

    dag = dagbag.get_dag(dag_id)
    for setting in settings.for_dag(dag_id):
        if setting.bounds is None or setting.kind == "memory":
            continue
        bounds = setting.bounds
        outside = bounds.minimum - 1 if bounds.minimum is not None else bounds.maximum + 1
        params = {other.param_name: dag.params.get_param(other.param_name).value
                  for other in settings.for_dag(dag_id)} | {setting.param_name: outside}
        with pytest.raises(ValueError, match=rf"^{setting.param_name} must be {bounds.words()}, got "):
            check_setting_params(params, settings.for_dag(dag_id))
