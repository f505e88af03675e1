"""The ACID view's FastAPI app, mounted by the Airflow API server at `/acid` (plugins/acid_ui_plugin.py).

JSON endpoints under `/acid/api/` and the view's ES modules under `/acid/static/`: Airflow's UI imports
`static/view.js` as a React app plugin and renders it inside its own page (its theme, its router), so the view looks
like Airflow and its links are Airflow's own navigation. Every route depends on Airflow's own authentication (the
UI's `_token` cookie or a bearer token, `security.get_user`) and authorization (the auth manager): reading needs read
access to the DAGs, "compact now" needs to trigger runs of `acid_compact`, changing a table's settings to trigger
`acid_table_settings`, aborting a queued compaction to edit runs of `acid_compact`.
The metastore is the `acid_metastore` connection's (`AcidMetastoreHook`), opened per request and closed after it.
Actions go through the code the DAGs run: compact now and table settings trigger those DAGs with their params (Airflow
validates them as its trigger form does); abort is the queue's ABORT COMPACTIONS compare-and-swap.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, RedirectResponse
from pydantic import BaseModel, ConfigDict, Field

URL_PREFIX = "/acid"
COMPACT_DAG = "acid_compact"
SETTINGS_DAG = "acid_table_settings"
INITIATOR_DAG = "acid_initiator"
STATIC = Path(__file__).with_name("static")
BUNDLE = "view.js"  # the module Airflow's UI imports (AcidViewPlugin.react_apps)
PLUGIN_ROUTE = "acid"  # the view's page in Airflow's UI: /plugin/acid
MAX_COMPACTIONS = 500  # history entries per page
MAX_ACTIVE = 500  # queued (and, apart, working) entries listed above the history
MAX_OFFSET = 10_000
MAX_TRANSACTIONS = 500

can_read = Depends(requires_access_dag("GET"))
can_compact = Depends(requires_access_dag("POST", DagAccessEntity.RUN, param_dag_id=COMPACT_DAG))
can_abort = Depends(requires_access_dag("PUT", DagAccessEntity.RUN, param_dag_id=COMPACT_DAG))
can_change_settings = Depends(requires_access_dag("POST", DagAccessEntity.RUN, param_dag_id=SETTINGS_DAG))


def _metastore() -> Iterator[Any]:
    """The `acid_metastore` connection's metastore, for this request only."""
    from acid_plugin.hooks import AcidMetastoreHook

    with AcidMetastoreHook().metastore() as metastore:
        yield metastore


MetastoreDep = Annotated[Any, Depends(_metastore)]


def _refused(exc: Exception) -> HTTPException:
    """An AcidError as an HTTP answer: unknown objects 404, everything else the caller can fix 400."""
    from acid_core.errors import NoSuchObjectError

    code = 404 if isinstance(exc, NoSuchObjectError) else 400
    return HTTPException(code, f"{type(exc).__name__}: {exc}")


class CompactBody(BaseModel):
    """`acid_compact`'s params, as its trigger form takes them."""

    model_config = ConfigDict(extra="forbid")
    database: str = Field(max_length=128)
    table: str = Field(max_length=128)
    partition: str | None = Field(default=None, max_length=767)
    type: Literal["major", "minor", "rebalance"] = "major"
    pool: str | None = Field(default=None, max_length=128)
    wait: bool = True


class SettingsBody(BaseModel):
    """`acid_table_settings`' params (the thresholds: its registry settings, `acid_core.settings.for_dag`)."""

    model_config = ConfigDict(extra="forbid")
    no_auto_compaction: Literal["leave", "true", "false", "clear"] = "leave"
    delta_num_threshold: int | None = None
    delta_pct_threshold: float | None = None
    clear_thresholds: bool = False


def _trigger(dag_id: str, conf: dict, user, note: str) -> dict:
    """A manual run of `dag_id` with `conf`, as Airflow's trigger endpoint makes one (params validated).

    Raises:
        HTTPException: 404 the DAG is unknown, 400 its params refuse `conf`.
    """
    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.exceptions import DagNotFound, ParamValidationError
    from airflow.utils.types import DagRunTriggeredByType

    from acid_plugin.ui.present import dag_run_path

    try:
        run = trigger_dag(dag_id, conf=conf, triggered_by=DagRunTriggeredByType.UI,
                          triggering_user_name=user.get_name(), note=note)
    except DagNotFound as exc:
        raise HTTPException(404, f"DAG {dag_id} is not known to Airflow ({exc}); is dags/ its DAGs folder?") from None
    except (ParamValidationError, ValueError) as exc:
        raise HTTPException(400, f"{dag_id} refuses these params: {exc}") from None
    return {"dag_id": dag_id, "run_id": run.run_id, "conf": conf, "url": dag_run_path(dag_id, run.run_id)}


def _task_runs(compactions: list) -> dict[str, str | None]:
    """For each Airflow worker id of `compactions`, the run id of the task attempt that holds (or held) it."""
    import datetime as dt

    import sqlalchemy as sa
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.taskinstancehistory import TaskInstanceHistory
    from airflow.utils.session import create_session

    from acid_plugin.ui.present import parse_worker_id

    found: dict[str, str | None] = {}
    with create_session() as session:
        for entry in compactions:
            task = parse_worker_id(entry.worker_id)
            if task is None or entry.worker_id in found:
                continue
            run_id = None
            for model in (TaskInstance, TaskInstanceHistory):
                query = sa.select(model.run_id).where(
                    model.dag_id == task.dag_id, model.task_id == task.task_id, model.map_index == task.map_index,
                    model.try_number == task.try_number)
                if entry.start_ms:  # the attempt that claimed it started before the claim
                    started = dt.datetime.fromtimestamp(entry.start_ms / 1000 + 60, tz=dt.UTC)
                    query = query.where(model.start_date <= started)
                run_id = session.scalar(query.order_by(model.start_date.desc()).limit(1))
                if run_id is not None:
                    break
            found[entry.worker_id] = run_id
    return found


def _initiator() -> dict:
    """How often the initiator polls and whether its DAG is paused, as Airflow schedules it (the DAG's timetable
    summary, `0:01:00` for a 60 s interval): what an empty queue means."""
    import sqlalchemy as sa
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    from acid_plugin.ui.present import interval_seconds

    with create_session() as session:
        row = session.execute(sa.select(DagModel.is_paused, DagModel.timetable_summary)
                              .where(DagModel.dag_id == INITIATOR_DAG)).first()
    if row is None:
        return {"dag_id": INITIATOR_DAG, "known": False, "paused": None, "interval_s": None, "schedule": None}
    return {"dag_id": INITIATOR_DAG, "known": True, "paused": row.is_paused,
            "interval_s": interval_seconds(row.timetable_summary), "schedule": row.timetable_summary}


def _compaction_json(entry, now_ms: int, runs: dict[str, str | None]) -> dict:
    from acid_plugin.ui.present import (
        ACTIVE_STATES,
        format_duration,
        format_time,
        one_line_error,
        parse_worker_id,
        task_instance_path,
        working_ms,
    )

    task = parse_worker_id(entry.worker_id)
    state = entry.state.display
    worked = working_ms(entry, now_ms)
    return {
        "id": entry.id, "database": entry.database, "table": entry.table, "partition": entry.partition,
        "type": entry.type.display.lower(), "state": state, "active": state in ACTIVE_STATES,
        "pool": entry.pool_name or "default", "worker_id": entry.worker_id, "hadoop_job_id": entry.hadoop_job_id,
        "worker_task_url": task_instance_path(task, runs.get(entry.worker_id)) if task else None,
        "enqueued": format_time(entry.enqueue_ms, now_ms), "started": format_time(entry.start_ms, now_ms),
        "ended": format_time(entry.end_ms, now_ms), "committed": format_time(entry.commit_ms, now_ms),
        "enqueue_ms": entry.enqueue_ms, "start_ms": entry.start_ms, "end_ms": entry.end_ms,
        "commit_ms": entry.commit_ms, "duration": format_duration(worked), "duration_ms": worked,
        "error": one_line_error(entry.error_message), "highest_write_id": entry.highest_write_id,
        "initiator_id": entry.initiator_id, "number_of_buckets": entry.number_of_buckets,
    }


def create_app() -> FastAPI:
    """The app the plugin mounts; importing and building it touches neither database."""
    app = FastAPI(title="ACID view", description="Compaction queue, table health, transactions and locks of the "
                  "acid_metastore connection", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", dependencies=[can_read])
    def page() -> RedirectResponse:
        """The view lives in Airflow's UI (a React app plugin): `/acid/` sends the browser there."""
        return RedirectResponse(f"../plugin/{PLUGIN_ROUTE}", status_code=307)

    @app.get("/static/{name}", dependencies=[can_read])
    def static(name: str) -> FileResponse:
        """The view's ES modules (static/*.js), revalidated on every load so a deployment takes effect at once."""
        path = STATIC / name
        if not re.fullmatch(r"[a-z_]+\.js", name) or not path.is_file():
            raise HTTPException(404, f"no module {name!r} in the ACID view")
        return FileResponse(path, media_type="text/javascript", headers={"Cache-Control": "no-cache"})

    @app.get("/api/compactions", dependencies=[can_read])
    def compactions(metastore: MetastoreDep, database: str | None = None, table: str | None = None,
                    partition: str | None = None, state: str | None = None, type: str | None = None,
                    pool: str | None = None, offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
                    limit: Annotated[int, Query(ge=1, le=MAX_COMPACTIONS)] = 100) -> dict:
        """SHOW COMPACTIONS with its filters: the working and queued entries first (working by start, queued in
        queue order; all of them up to MAX_ACTIVE each, never paged away), then one page of the others, newest
        activity first."""
        from acid_core.errors import AcidError
        from acid_core.metastore.codes import CompactionState, CompactionType
        from acid_plugin.ui.present import ACTIVE_STATES

        try:
            filters = dict(database=database or None, table=table or None, partition=partition or None,
                           pool=pool or None, compaction_type=CompactionType.parse(type) if type else None)
            wanted = CompactionState.parse(state) if state else None
            active, more_active = [], False
            for kind in (CompactionState.WORKING, CompactionState.INITIATED):
                if wanted in (None, kind):
                    found = metastore.compactions.show(state=kind, limit=MAX_ACTIVE + 1, **filters)
                    more_active |= len(found) > MAX_ACTIVE
                    active += sorted(found[:MAX_ACTIVE], key=lambda e: (e.start_ms or 0, e.enqueue_ms or 0, e.id))
            history, more = [], False
            if wanted is None or wanted.display not in ACTIVE_STATES:
                # at most len(active) of the newest rows are active ones, left out here
                found = [e for e in metastore.compactions.show(state=wanted, limit=offset + limit + 1 + len(active),
                                                                **filters) if e.state.display not in ACTIVE_STATES]
                history, more = found[offset:offset + limit], len(found) > offset + limit
        except AcidError as exc:
            raise _refused(exc) from None
        now = metastore.db.clock.now_ms()
        runs = _task_runs(active + history)
        return {"compactions": [_compaction_json(entry, now, runs) for entry in active + history],
                "active": len(active), "more_active": more_active, "offset": offset, "limit": limit,
                "more": more, "now_ms": now, "initiator": _initiator()}

    @app.post("/api/compactions", dependencies=[can_compact])
    def compact_now(body: CompactBody, user: GetUserDep, metastore: MetastoreDep) -> dict:
        """Compact now: checks the table and partition, then triggers `acid_compact` with these params."""
        from acid_core.errors import AcidError
        from acid_core.metastore.pools import check_pool_name

        try:
            info = metastore.catalog.require_transactional(body.database, body.table)
            if body.partition is not None:
                info.check_partition_name(body.partition)
            if body.pool:
                check_pool_name(body.pool)
        except AcidError as exc:
            raise _refused(exc) from None
        conf = {"database": info.database, "table": info.name, "partition": body.partition, "type": body.type,
                "pool": body.pool, "wait": body.wait}
        where = info.full_name + (f" partition {body.partition}" if body.partition else "")
        return _trigger(COMPACT_DAG, conf, user, f"{body.type} compaction of {where}, from the ACID view")

    @app.post("/api/compactions/{compaction_id}/abort", dependencies=[can_abort])
    def abort(compaction_id: int, user: GetUserDep, metastore: MetastoreDep) -> dict:
        """ABORT COMPACTIONS for one entry, waiting (`initiated`) or running (`working`: its transaction is aborted
        with it, so nothing it writes becomes visible); the entry records who aborted it."""
        message = metastore.compactions.abort_compactions([compaction_id], by=f"{user.get_name()} from the ACID view",
                                                          working=True)[compaction_id]
        entry = metastore.compactions.get(compaction_id)
        aborted = message.startswith("Successfully")
        if not aborted:
            raise HTTPException(404 if entry is None else 409, message)
        return {"id": compaction_id, "message": message}

    @app.get("/api/tables", dependencies=[can_read])
    def tables(metastore: MetastoreDep) -> dict:
        """The transactional tables, with their pending queue entries."""
        from acid_core.metastore.codes import CompactionState

        pending = {}
        for entry in metastore.compactions.show(state=CompactionState.INITIATED, limit=MAX_COMPACTIONS) + \
                metastore.compactions.show(state=CompactionState.WORKING, limit=MAX_COMPACTIONS):
            pending[(entry.database, entry.table)] = pending.get((entry.database, entry.table), 0) + 1
        found = []
        for info in metastore.catalog.list_all_tables():
            if not info.is_transactional:
                continue
            found.append({"database": info.database, "table": info.name,
                          "partition_keys": [key.name for key in info.partition_keys],
                          "no_auto_compaction": info.no_auto_compaction,
                          "pending_compactions": pending.get((info.database, info.name), 0)})
        return {"tables": found, "now_ms": metastore.db.clock.now_ms()}

    @app.get("/api/tables/{database}/{table}/health", dependencies=[can_read])
    def health(database: str, table: str, metastore: MetastoreDep, partition: str | None = None,
               offset: Annotated[int, Query(ge=0)] = 0, limit: Annotated[int, Query(ge=1, le=200)] = 50) -> dict:
        """Per-partition health of one page of the table's partitions (acid_core.operations.health), and the table's current
        settings (its own properties; None where the default or the database's applies) with the settings form's
        fields (from the registry: `acid_core.settings`)."""
        from dataclasses import asdict

        from acid_core import settings as registry
        from acid_core.errors import AcidError
        from acid_core.metastore.properties import find
        from acid_core.operations.health import table_health
        from acid_plugin.ui.present import format_bytes, format_time, setting_fields

        try:
            found = table_health(metastore, database, table, offset=offset, limit=limit, partition=partition or None)
        except AcidError as exc:
            raise _refused(exc) from None
        now = metastore.db.clock.now_ms()
        document = asdict(found)
        for part, shown in zip(found.partitions, document["partitions"]):
            shown["base_size"] = format_bytes(part.base_bytes)
            shown["delta_size"] = format_bytes(part.delta_bytes)
            shown["since"] = format_time(part.since_ms, now)
            if part.last_compaction is not None:
                shown["last_compaction"]["ended"] = format_time(part.last_compaction.end_ms, now)
        form = registry.for_dag(SETTINGS_DAG)
        document["settings"] = {setting.param_name: find(found.params, setting.property_key)
                                for setting in (registry.NO_AUTO_COMPACTION, *form)}
        document["form"] = setting_fields(form)
        document["now_ms"] = now
        return document

    @app.get("/api/tables/{database}/{table}/score", dependencies=[can_read])
    def score(database: str, table: str, metastore: MetastoreDep, offset: Annotated[int, Query(ge=0)] = 0,
              limit: Annotated[int, Query(ge=1, le=200)] = 200, top: Annotated[int, Query(ge=1, le=50)] = 10) -> dict:
        """The table's health score and breakdown over one page of its partitions, and the partitions with the most
        deltas and obsolete directories (acid_core.operations.health_score)."""
        from dataclasses import asdict

        from acid_core.errors import AcidError
        from acid_core.operations.health_score import table_score

        try:
            return asdict(table_score(metastore, database, table, offset=offset, limit=limit, top=top))
        except AcidError as exc:
            raise _refused(exc) from None

    @app.get("/api/stats/history", dependencies=[can_read])
    def history(metastore: MetastoreDep, hours: Annotated[int, Query(ge=1, le=168)] = 12,
                database: str | None = None, table: str | None = None) -> dict:
        """The queue, outcomes and working times of the last hours, from the metastore's own history
        (acid_core.operations.history_stats), with the alert thresholds of the oldest waiting entry."""
        from dataclasses import asdict

        from acid_core.errors import AcidError
        from acid_core.operations.alerts import DEFAULT_RULES
        from acid_core.operations.history_stats import OUTCOMES, history_stats

        try:
            document = asdict(history_stats(metastore, hours=hours, database=database or None, table=table or None))
        except AcidError as exc:
            raise _refused(exc) from None
        rule = next((r for r in DEFAULT_RULES if r.metric == "compaction_oldest_enqueue_age_in_sec"), None)
        document.update(outcomes=list(OUTCOMES), hours_asked=hours, oldest_waiting_thresholds_s={
            "warning": getattr(rule, "warning", None), "critical": getattr(rule, "critical", None)})
        return document

    @app.post("/api/tables/{database}/{table}/settings", dependencies=[can_change_settings])
    def settings(database: str, table: str, body: SettingsBody, user: GetUserDep, metastore: MetastoreDep) -> dict:
        """Change a table's auto-compaction settings: triggers `acid_table_settings` (its checks and ALTER TABLE)."""
        from acid_core import settings as registry
        from acid_core.errors import AcidError
        from acid_core.metastore.properties import check_settings

        thresholds = {setting.property_key: str(getattr(body, setting.param_name))
                      for setting in registry.for_dag(SETTINGS_DAG) if getattr(body, setting.param_name) is not None}
        if body.clear_thresholds and thresholds:
            raise HTTPException(400, "clear_thresholds cannot be combined with delta_num_threshold/"
                                     "delta_pct_threshold")
        try:
            info = metastore.catalog.require_transactional(database, table)
            check_settings(thresholds)  # the catalog's rules, before a run is made (the DAG checks them again)
        except AcidError as exc:
            raise _refused(exc) from None
        conf = {"database": info.database, "table": info.name, **body.model_dump()}
        return _trigger(SETTINGS_DAG, conf, user, f"settings of {info.full_name}, from the ACID view")

    @app.get("/api/transactions", dependencies=[can_read])
    def transactions(metastore: MetastoreDep, state: Literal["open", "aborted"] | None = None,
                     offset: Annotated[int, Query(ge=0)] = 0,
                     limit: Annotated[int, Query(ge=1, le=MAX_TRANSACTIONS)] = 50) -> dict:
        """SHOW TRANSACTIONS, open ones first (oldest first: they hold the cleaner back), then aborted ones, one page
        of them read by index (`TxnStore.transactions_page`); `state` keeps one kind."""
        from acid_core.metastore.txns import TXN_ABORTED, TXN_OPEN
        from acid_plugin.ui.present import format_time

        now = metastore.db.clock.now_ms()
        states = {"open": (TXN_OPEN,), "aborted": (TXN_ABORTED,)}.get(state, (TXN_OPEN, TXN_ABORTED))
        page, counts = metastore.txns.transactions_page(states, offset=offset, limit=limit)
        return {"transactions": [{
            "txn_id": txn.txn_id, "state": txn.state_name, "started": format_time(txn.started_ms, now),
            "last_heartbeat": format_time(txn.last_heartbeat_ms, now), "user": txn.user, "host": txn.host,
            "agent_info": txn.agent_info} for txn in page],
            "open": counts[TXN_OPEN], "aborted": counts[TXN_ABORTED], "total": sum(counts[s] for s in states),
            "offset": offset, "limit": limit, "now_ms": now}

    @app.get("/api/locks", dependencies=[can_read])
    def locks(metastore: MetastoreDep, database: str | None = None, table: str | None = None) -> dict:
        """SHOW LOCKS, optionally of one database or table."""
        from acid_core.metastore.locks import LockType
        from acid_plugin.ui.present import format_time

        now = metastore.db.clock.now_ms()
        return {"locks": [{
            "lock_id": lock.lock_id, "database": lock.database, "table": lock.table, "partition": lock.partition,
            "state": {"a": "ACQUIRED", "w": "WAITING"}.get(lock.state, lock.state),
            "blocked_by": lock.blocked_by_lock_id, "type": LockType(lock.lock_type).name, "txn_id": lock.txn_id,
            "last_heartbeat": format_time(lock.last_heartbeat_ms, now),
            "acquired_at": format_time(lock.acquired_at_ms, now), "user": lock.user, "host": lock.host,
            "agent_info": lock.agent_info} for lock in metastore.locks.show_locks(database=database or None,
                                                                                table=table or None)],
            "now_ms": now}

    @app.get("/api/me")
    def me(user: GetUserDep, request: Request) -> dict:
        """Who is signed in (any authenticated user)."""
        return {"user": user.get_name()}

    return app
