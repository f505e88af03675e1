"""acid_table_settings: set or clear a transactional table's auto-compaction settings, on demand.

No work at import time: acid_core and the hook are imported inside the task. The rules are the core's: the values
are checked with `acid_core.metastore.properties.check_settings`, and the catalog applies Hive's ALTER TABLE rules
while it sets and unsets the properties in one metastore transaction.
"""

from __future__ import annotations

from acid_plugin.params import setting_params, table_params
from airflow.sdk import Param, dag, task

from acid_core import settings

# The registry's settings this DAG sets as table properties (empty: leave the property as it is)
SETTINGS = settings.for_dag("acid_table_settings")

DOC_MD = """
### ACID table settings

Sets or clears, on one full ACID table of the `acid_metastore` connection, the table properties Hive's Initiator
reads:

- `no_auto_compaction`: `leave` (default) keeps it, `true` / `false` sets `NO_AUTO_COMPACTION`, `clear` removes it.
{thresholds}
- `clear_thresholds` removes both threshold properties (cannot be combined with new threshold values).

`database` and `table` are required (no default). A malformed name, a choice not listed or a threshold out of range
(`-1`) is refused by the trigger itself (form or REST API: a 400 with the param's message; no run is made). An
unknown or non-transactional table fails the run with one line saying so, no traceback, and changes nothing (the
XCom `outcome` says the same: `{"ok": false, "reason": ...}`). Returns the table's resulting properties (one XCom).
""".replace("{thresholds}", "\n".join(f"- `{setting.param_name}` → `{setting.property_key}` ({setting.expected()})."
                                          for setting in SETTINGS))


@dag(
    dag_id="acid_table_settings",
    description="Set or clear a table's NO_AUTO_COMPACTION and compaction threshold overrides",
    schedule=None,
    catchup=False,
    tags=["acid", "settings"],
    doc_md=DOC_MD,
    params={
        **table_params(),
        "no_auto_compaction": Param("leave", type="string", enum=["leave", "true", "false", "clear"],
                                    description="Set NO_AUTO_COMPACTION to true/false, clear it, or leave it."),
        **setting_params(SETTINGS, nullable=True, empty="leave it as it is", refuse_on_trigger=True,
                         as_property=True),
        "clear_thresholds": Param(False, type="boolean", description="Remove both threshold properties."),
    },
)
def acid_table_settings():
    @task(multiple_outputs=False, retries=0)  # one XCom, not one per property; a refusal is final
    def apply_settings(params=None, ti=None) -> dict[str, str]:
        """Validate, then set / unset the properties; returns the table's resulting properties."""
        try:
            return _apply_settings(params)
        except ValueError as exc:
            from acid_plugin.outcomes import refuse

            raise refuse(ti, f"acid_table_settings: {exc}", database=params["database"],
                         table=params["table"]) from None

    apply_settings()


def _apply_settings(params) -> dict[str, str]:
    """Raises ValueError: a refusal, in one line (the task fails with it)."""
    import logging

    from acid_plugin.hooks import AcidMetastoreHook
    from acid_plugin.params import check_setting_params

    from acid_core.errors import AcidError
    from acid_core.metastore.properties import DELTA_NUM_PROPERTY, DELTA_PCT_PROPERTY, check_settings

    log = logging.getLogger("airflow.task")
    database, table = params["database"], params["table"]
    check_setting_params(params, SETTINGS)  # refused, not clamped
    to_set: dict[str, str] = {}
    to_unset: list[str] = []
    choice = params["no_auto_compaction"]
    if choice in ("true", "false"):
        to_set["NO_AUTO_COMPACTION"] = choice
    elif choice == "clear":
        to_unset.append("NO_AUTO_COMPACTION")
    elif choice != "leave":
        raise ValueError(f"no_auto_compaction must be leave/true/false/clear, got {choice!r}")
    num, pct = params.get("delta_num_threshold"), params.get("delta_pct_threshold")
    if params.get("clear_thresholds"):
        if num is not None or pct is not None:
            raise ValueError("clear_thresholds cannot be combined with delta_num_threshold/delta_pct_threshold")
        to_unset += [DELTA_NUM_PROPERTY, DELTA_PCT_PROPERTY]
    if num is not None:
        to_set[DELTA_NUM_PROPERTY] = str(int(num))
    if pct is not None:
        to_set[DELTA_PCT_PROPERTY] = str(pct)

    with AcidMetastoreHook().metastore() as metastore:
        try:
            info = metastore.catalog.require_transactional(database, table)  # unknown / non-ACID: fail here
        except AcidError as exc:
            raise ValueError(f"refusing {database}.{table}: {exc}") from None
        try:
            check_settings(to_set)
        except AcidError as exc:
            raise ValueError(str(exc)) from None
        info = metastore.catalog.alter_table_params(database, table, set_params=to_set, unset=to_unset,
                                                    if_exists=True)
    log.info("acid_table_settings: %s set %s, unset %s", info.full_name, to_set, to_unset)
    return dict(info.params)


acid_table_settings()
