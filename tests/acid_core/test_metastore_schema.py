"""The metastore schema: the SQLAlchemy tables in acid_core/metastore/schema.py agree with what sql/<dialect>/schema.sql
creates, and `Metastore.init()` is idempotent, also when several processes run it at once.

The comparison reflects the real database (SQLite file or PostgreSQL) with `sqlalchemy.inspect`, so it checks what the
DDL really made, not what it says.
"""

from __future__ import annotations

import multiprocessing
import traceback

import pytest
import sqlalchemy as sa

from acid_core.errors import MetastoreError
from acid_core.metastore import Metastore, schema
from acid_core.metastore.catalog import DEFAULT_DATABASE

pytestmark = pytest.mark.empty_metastore  # these tests create the schema themselves

PROCESS_TIMEOUT_SECONDS = 60


def type_family(type_: sa.types.TypeEngine) -> str:
    """integer / bigint / char(n) / varchar(n) / text: what both dialects must agree on, whatever they call it."""
    if isinstance(type_, sa.CHAR):
        return f"char({type_.length})"
    if isinstance(type_, sa.Text):
        return "text"
    if isinstance(type_, sa.String):
        return f"varchar({type_.length})"
    if isinstance(type_, sa.BigInteger):
        return "bigint"
    if isinstance(type_, sa.Integer):
        return "integer"
    return f"unexpected type {type_!r}"


def declared_tables() -> dict[str, dict]:
    """schema.py's view: per table, its columns (family, nullable) in order and its primary key."""
    return {
        name: {
            "columns": [(c.name, type_family(c.type), c.nullable) for c in table.columns],
            "primary_key": [c.name for c in table.primary_key.columns],
        }
        for name, table in schema.metadata.tables.items()
    }


def reflected_tables(engine: sa.Engine) -> dict[str, dict]:
    """The database's view, from sqlalchemy.inspect."""
    inspector = sa.inspect(engine)
    return {
        name: {
            "columns": [(c["name"], type_family(c["type"]), c["nullable"]) for c in inspector.get_columns(name)],
            "primary_key": inspector.get_pk_constraint(name)["constrained_columns"],
        }
        for name in inspector.get_table_names()
    }


def schema_differences(declared: dict[str, dict], reflected: dict[str, dict]) -> list[str]:
    """Every disagreement, one line each, so a failure lists them all at once."""
    problems = [f"table {name} is in schema.py but not in the database" for name in sorted(set(declared) - set(reflected))]
    problems += [f"table {name} is in the database but not in schema.py" for name in sorted(set(reflected) - set(declared))]
    for name in sorted(set(declared) & set(reflected)):
        want, got = declared[name], reflected[name]
        want_names = [c[0] for c in want["columns"]]
        got_names = [c[0] for c in got["columns"]]
        if want_names != got_names:
            problems.append(f"{name}: columns {want_names} in schema.py, {got_names} in the database")
        got_by_name = {c[0]: c for c in got["columns"]}
        for column, family, nullable in want["columns"]:
            if column not in got_by_name:
                continue
            _, got_family, got_nullable = got_by_name[column]
            if family != got_family:
                problems.append(f"{name}.{column}: type {family} in schema.py, {got_family} in the database")
            if nullable != got_nullable:
                problems.append(f"{name}.{column}: nullable={nullable} in schema.py, nullable={got_nullable} in the database")
        if want["primary_key"] != got["primary_key"]:
            problems.append(f"{name}: primary key {want['primary_key']} in schema.py, {got['primary_key']} in the database")
    return problems


@pytest.fixture
def store(metastore_url, tmp_path):
    metastore = Metastore(metastore_url, warehouse=str(tmp_path / "warehouse"))
    yield metastore
    metastore.close()


def test_type_family_names_the_families_both_dialects_share():
    assert [type_family(t) for t in (sa.Integer(), sa.BigInteger(), sa.CHAR(1), sa.String(128), sa.Text())] == [
        "integer", "bigint", "char(1)", "varchar(128)", "text"]


def test_schema_py_declares_the_hive_named_tables():
    for name in ("TXNS", "TXN_COMPONENTS", "COMPLETED_TXN_COMPONENTS", "HIVE_LOCKS", "COMPACTION_QUEUE",
                 "COMPLETED_COMPACTIONS", "NEXT_TXN_ID", "NEXT_WRITE_ID", "TXN_TO_WRITE_ID", "WRITE_SET"):
        assert name in schema.metadata.tables


def test_schema_py_agrees_with_the_database_the_sql_file_creates(store):
    store.init()
    problems = schema_differences(declared_tables(), reflected_tables(store.db.engine))
    assert not problems, f"{store.db.dialect}: schema.py and sql/*/schema.sql disagree:\n" + "\n".join(problems)


def _unique_sets(engine: sa.Engine, inspector, name: str) -> set[tuple[str, ...]]:
    """Column sets the database keeps unique (primary keys aside).

    SQLite: read from PRAGMA index_list / index_info, because SQLAlchemy does not reflect a column-level UNIQUE there.
    """
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            indexes = connection.exec_driver_sql(f'PRAGMA index_list("{name}")').all()
            return {tuple(row[2] for row in connection.exec_driver_sql(f'PRAGMA index_info("{index[1]}")').all())
                    for index in indexes if index[2] and index[3] != "pk"}
    found = {tuple(u["column_names"]) for u in inspector.get_unique_constraints(name)}
    found |= {tuple(i["column_names"]) for i in inspector.get_indexes(name) if i["unique"]}
    return found


def test_uniqueness_the_code_relies_on_exists_in_the_database(store):
    """schema.py's unique constraints, plus the unique indexes the id allocation relies on (ON CONFLICT needs them)."""
    store.init()
    inspector = sa.inspect(store.db.engine)
    wanted = {name: {tuple(c.name for c in constraint.columns) for constraint in table.constraints
                     if isinstance(constraint, sa.UniqueConstraint)}
              for name, table in schema.metadata.tables.items()}
    wanted["NEXT_WRITE_ID"].add(("NWI_DATABASE", "NWI_TABLE"))
    wanted["TXN_TO_WRITE_ID"] |= {("T2W_DATABASE", "T2W_TABLE", "T2W_TXNID"), ("T2W_DATABASE", "T2W_TABLE", "T2W_WRITEID")}
    missing = [f"{name}: UNIQUE {columns}" for name, sets in sorted(wanted.items())
               for columns in sorted(sets - _unique_sets(store.db.engine, inspector, name))]
    assert not missing, "missing in the database:\n" + "\n".join(missing)


def test_foreign_keys_agree(store):
    store.init()
    inspector = sa.inspect(store.db.engine)
    declared = {(name, tuple(fk.parent.name for fk in constraint.elements), constraint.referred_table.name,
                 tuple(fk.column.name for fk in constraint.elements))
                for name, table in schema.metadata.tables.items() for constraint in table.foreign_key_constraints}
    reflected = {(name, tuple(fk["constrained_columns"]), fk["referred_table"], tuple(fk["referred_columns"]))
                 for name in inspector.get_table_names() for fk in inspector.get_foreign_keys(name)}
    assert declared == reflected


def test_primary_key_columns_refuse_null(store):
    """A primary key never holds NULL (SQLite allows it unless the column says NOT NULL: a legacy quirk)."""
    store.init()
    with store.db.engine.connect() as connection:
        with pytest.raises(sa.exc.IntegrityError):
            with connection.begin():
                connection.execute(schema.txns.insert().values(
                    TXN_ID=None, TXN_STATE="o", TXN_STARTED=0, TXN_LAST_HEARTBEAT=0, TXN_USER="u", TXN_HOST="h"))


def test_init_twice_is_idempotent(store):
    first = store.init()
    with store.db.engine.connect() as connection:
        counters_before = _counter_rows(connection)
    second = store.init()
    assert first == second == schema.SCHEMA_VERSION
    with store.db.engine.connect() as connection:
        assert _counter_rows(connection) == counters_before
        assert connection.execute(sa.select(sa.func.count()).select_from(schema.acid_schema_version)).scalar_one() == schema.SCHEMA_VERSION  # one row per version
        names = connection.execute(sa.select(schema.dbs.c.NAME)).scalars().all()
    assert names == [DEFAULT_DATABASE]


def test_init_keeps_existing_data(store):
    store.init()
    txn_id = store.txns.open_txn()
    store.catalog.create_database("sales")
    store.init()
    assert [t.txn_id for t in store.txns.show_transactions()] == [txn_id]
    assert store.catalog.list_databases() == [DEFAULT_DATABASE, "sales"]
    assert store.txns.open_txn() == txn_id + 1


@pytest.mark.parametrize("hive_table", ["VERSION", "SDS"])
def test_init_refuses_a_database_holding_a_hive_metastore(metastore_url, tmp_path, hive_table):
    engine = sa.create_engine(metastore_url)
    with engine.begin() as connection:  # what Hive's schematool leaves (one of its tables is enough)
        connection.exec_driver_sql(f'CREATE TABLE "{hive_table}" ("VER_ID" bigint PRIMARY KEY)')
    engine.dispose()
    store = Metastore(metastore_url, warehouse=str(tmp_path / "warehouse"))
    try:
        with pytest.raises(MetastoreError, match=rf"refusing to initialise .*: it holds a Hive metastore's own schema "
                                                 rf"\(tables {hive_table}\); this ACID metastore is a separate one"):
            store.init()
        names = set(sa.inspect(store.db.engine).get_table_names())
        assert names == {hive_table}  # nothing created beside it
    finally:
        store.close()


VERSION_2_INDEXES = ("CTC_TIMESTAMP_IDX", "T2W_TXNID_IDX", "WRITE_SET_COMMIT_IDX", "COMPLETED_COMPACTIONS_STATE_IDX",
                     "COMPLETED_COMPACTIONS_END_IDX")


def test_init_upgrades_a_version_1_metastore_in_place(store):
    store.init()
    txn_id = store.txns.open_txn()
    with store.db.engine.begin() as connection:  # what version 1 had: none of version 2's indexes
        for name in VERSION_2_INDEXES:
            connection.exec_driver_sql(f'DROP INDEX "{name}"')
        connection.execute(schema.acid_schema_version.delete().where(schema.acid_schema_version.c.VERSION == 2))
    assert store.init() == schema.SCHEMA_VERSION
    indexes = set()
    inspector = sa.inspect(store.db.engine)
    for table in inspector.get_table_names():
        indexes |= {index["name"] for index in inspector.get_indexes(table)}
    assert set(VERSION_2_INDEXES) <= indexes
    assert [t.txn_id for t in store.txns.show_transactions()] == [txn_id]


def test_init_upgrades_a_version_2_metastore_in_place(store):
    store.init()
    txn_id = store.txns.open_txn()
    with store.db.engine.begin() as connection:  # what version 2 had: no MIN_HISTORY_WRITE_ID
        connection.exec_driver_sql('DROP TABLE "MIN_HISTORY_WRITE_ID"')
        connection.exec_driver_sql('DROP TABLE "STREAM_COMMITS"')
        connection.execute(schema.acid_schema_version.delete().where(schema.acid_schema_version.c.VERSION >= 3))
    assert store.init() == schema.SCHEMA_VERSION
    assert {"MIN_HISTORY_WRITE_ID", "STREAM_COMMITS"} <= set(sa.inspect(store.db.engine).get_table_names())
    assert [t.txn_id for t in store.txns.show_transactions()] == [txn_id]


def test_init_upgrades_a_version_3_metastore_in_place(store):
    store.init()
    txn_id = store.txns.open_txn()
    with store.db.engine.begin() as connection:  # what version 3 had: no STREAM_COMMITS
        connection.exec_driver_sql('DROP TABLE "STREAM_COMMITS"')
        connection.execute(schema.acid_schema_version.delete().where(schema.acid_schema_version.c.VERSION == 4))
    assert store.init() == 4
    store.streams.begin_batch("query", "default", "t", txn_id)
    assert store.streams.state("query", "default", "t").pending_txn_id == txn_id


def _counter_rows(connection) -> dict[str, list]:
    return {table.name: sorted(tuple(r) for r in connection.execute(sa.select(table)).all())
            for table in (schema.next_txn_id, schema.next_lock_id, schema.next_compaction_queue_id,
                          schema.sequence_table)}


def _init_in_process(url: str, warehouse: str, barrier, results) -> None:
    """Child process: wait for the others, then init; report 'ok' or the error."""
    try:
        metastore = Metastore(url, warehouse=warehouse)
        barrier.wait(timeout=PROCESS_TIMEOUT_SECONDS)
        try:
            results.put(("ok", metastore.init()))
        finally:
            metastore.close()
    except BaseException:  # report everything: the parent asserts on it
        results.put(("error", traceback.format_exc()))


def test_init_from_four_processes_at_once(metastore_url, tmp_path):
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    results = context.Queue()
    processes = [context.Process(target=_init_in_process, args=(metastore_url, str(tmp_path / "wh"), barrier, results))
                 for _ in range(4)]
    for process in processes:
        process.start()
    try:
        outcomes = [results.get(timeout=PROCESS_TIMEOUT_SECONDS) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=PROCESS_TIMEOUT_SECONDS)
            if process.is_alive():
                process.kill()
    assert outcomes == [("ok", schema.SCHEMA_VERSION)] * 4, outcomes
    metastore = Metastore(metastore_url, warehouse=str(tmp_path / "wh"))
    try:
        assert metastore.catalog.list_databases() == [DEFAULT_DATABASE]
        with metastore.db.engine.connect() as connection:
            counters = _counter_rows(connection)
        assert counters["NEXT_TXN_ID"] == [(1,)]
        assert counters["NEXT_LOCK_ID"] == [(1,)]
        assert counters["NEXT_COMPACTION_QUEUE_ID"] == [(1,)]
        assert sorted(name for name, _ in counters["SEQUENCE_TABLE"]) == ["DBS", "PARTITIONS", "READER_LEASES", "TBLS"]
        assert set(sa.inspect(metastore.db.engine).get_table_names()) == set(schema.metadata.tables)
    finally:
        metastore.close()


@pytest.mark.postgres
def test_default_database_created_once_when_two_inits_interleave(postgres_url, tmp_path):
    """Two processes starting at once both find no `default` database and both insert it; the loser must not fail.

    The interleaving is forced: right after handle A has looked for `default` (and found none), handle B runs its
    whole ensure_default_database; then A goes on.
    """
    first = Metastore(postgres_url, warehouse=str(tmp_path / "wh"))
    second = Metastore(postgres_url, warehouse=str(tmp_path / "wh"))
    try:
        first.db.init_schema()
        fired = []

        def after_execute(conn, cursor, statement, parameters, context, executemany):
            if not fired and statement.lstrip().upper().startswith("SELECT") and '"DBS"' in statement:
                fired.append(statement)
                second.catalog.ensure_default_database()

        sa.event.listen(first.db.engine, "after_cursor_execute", after_execute)
        first.catalog.ensure_default_database()
        assert fired, "the interleaving hook never ran"
        assert first.catalog.list_databases() == [DEFAULT_DATABASE]
    finally:
        first.close()
        second.close()


def test_credentials_split_off_a_url_and_put_back():
    from acid_core.metastore.engine import split_credentials, with_credentials

    url, login, password = split_credentials("postgresql+psycopg2://acid:p%40ss@db.example:5433/acid")
    assert (url, login, password) == ("postgresql+psycopg2://db.example:5433/acid", "acid", "p@ss")
    assert with_credentials(url, login, password) == "postgresql+psycopg2://acid:p%40ss@db.example:5433/acid"
    assert split_credentials("sqlite:////data/m.db") == ("sqlite:////data/m.db", None, None)
    with pytest.raises(MetastoreError, match=r"metastore URL postgresql://u:\*\*\*@h/d holds a password"):
        with_credentials("postgresql://u:pw@h/d", "u", "pw")
    with pytest.raises(MetastoreError, match="cannot be parsed"):
        split_credentials("not a url")


def test_the_environments_password_joins_a_url_without_one(monkeypatch):
    """ACID_METASTORE_PASSWORD keeps the password out of ACID_METASTORE_URL (docker-compose, make run); a URL that
    names its own password keeps it, as libpq uses PGPASSWORD only for a connection that names none."""
    from acid_core.metastore.engine import default_url

    monkeypatch.setenv("ACID_METASTORE_URL", "postgresql+psycopg2://acid@db:5432/acid_metastore")
    monkeypatch.delenv("ACID_METASTORE_PASSWORD", raising=False)
    assert default_url() == "postgresql+psycopg2://acid@db:5432/acid_metastore"
    monkeypatch.setenv("ACID_METASTORE_PASSWORD", "p@ss:/")
    assert default_url() == "postgresql+psycopg2://acid:p%40ss%3A%2F@db:5432/acid_metastore"
    monkeypatch.setenv("ACID_METASTORE_URL", "postgresql+psycopg2://acid:own@db/acid_metastore")
    assert default_url() == "postgresql+psycopg2://acid:own@db/acid_metastore"
    monkeypatch.setenv("ACID_METASTORE_URL", "not a url")
    with pytest.raises(MetastoreError, match="ACID_METASTORE_URL <unparsable URL> cannot be parsed"):
        default_url()
