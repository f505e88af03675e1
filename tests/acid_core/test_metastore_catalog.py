"""The table catalog: databases, tables, partitions, table properties (Hive matches their keys case-insensitively),
the ACID switches, and names that can never escape the warehouse or the SQL.
"""

from __future__ import annotations

import posixpath

import pytest
import sqlalchemy as sa

from acid_core.errors import AcidError, AlreadyExistsError, MetastoreError, NoSuchObjectError, NotTransactionalError
from acid_core.metastore import Metastore, schema
from acid_core.metastore.catalog import DEFAULT_DATABASE, check_identifier
from acid_core.metastore.engine import Identity

ME = Identity(user="tester", host="testhost")
COLUMNS = [("id", "int"), ("name", "string")]
ACID = {"transactional": "true"}
BAD_NAMES = ["../x", "a b", "x;drop table TXNS", "", "x/y", "x.y", "x'--", "é", "a" * 129]


@pytest.fixture
def warehouse(tmp_path) -> str:
    return str(tmp_path / "warehouse")


def catalog_rows(ms: Metastore) -> dict[str, list]:
    tables = (schema.dbs, schema.database_params, schema.tbls, schema.columns_v2, schema.partition_keys,
              schema.bucketing_cols, schema.table_params, schema.partitions, schema.sequence_table)
    with ms.db.engine.connect() as connection:
        return {t.name: sorted(map(tuple, connection.execute(sa.select(t)).all()), key=repr) for t in tables}


# --- databases ----------------------------------------------------------------------------------------------------

def test_default_database_lives_at_the_warehouse_root(ms, warehouse):
    info = ms.catalog.get_database("DEFAULT")
    assert (info.name, info.location) == (DEFAULT_DATABASE, warehouse)
    assert ms.catalog.list_databases() == [DEFAULT_DATABASE]


def test_create_get_list_and_drop_databases(ms, warehouse, clock):
    created = ms.catalog.create_database("Sales", description="money")
    assert (created.name, created.location, created.description, created.create_time_ms) == (
        "sales", posixpath.join(warehouse, "sales.db"), "money", clock.now_ms())
    assert ms.catalog.get_database("sales") == created
    elsewhere = ms.catalog.create_database("ops", location="s3://bucket/ops")
    assert elsewhere.location == "s3://bucket/ops"
    assert ms.catalog.list_databases() == [DEFAULT_DATABASE, "ops", "sales"]
    with pytest.raises(AlreadyExistsError, match="'sales'"):
        ms.catalog.create_database("SALES")
    assert ms.catalog.create_database("sales", if_not_exists=True) == created
    assert ms.catalog.drop_database("ops") == []
    with pytest.raises(NoSuchObjectError, match="'ops'"):
        ms.catalog.get_database("ops")
    with pytest.raises(NoSuchObjectError):
        ms.catalog.drop_database("ops")
    assert ms.catalog.drop_database("ops", if_exists=True) == []


def test_drop_database_with_tables_needs_cascade(ms):
    ms.catalog.create_database("sales")
    ms.catalog.create_table("sales", "orders", COLUMNS, params=ACID)
    with pytest.raises(MetastoreError, match="not empty"):
        ms.catalog.drop_database("sales")
    dropped = ms.catalog.drop_database("sales", cascade=True)
    assert [t.full_name for t in dropped] == ["sales.orders"]
    assert ms.catalog.list_databases() == [DEFAULT_DATABASE]
    assert catalog_rows(ms)["TBLS"] == [] and catalog_rows(ms)["COLUMNS_V2"] == []


def test_the_default_database_cannot_be_dropped(ms):
    with pytest.raises(MetastoreError, match="default"):
        ms.catalog.drop_database("default", cascade=True)


# --- tables -------------------------------------------------------------------------------------------------------

def test_create_and_read_a_table(ms, warehouse, clock):
    created = ms.catalog.create_table(
        "default", "Orders", [("ID", "int"), ("amount", "decimal(10,2)")], partition_keys=[("ds", "string")],
        bucket_columns=["id"], num_buckets=4, params={"transactional": "true", "bucketing_version": "2"},
        comment="the orders")
    table = ms.catalog.get_table("default", "ORDERS")
    assert table == created
    assert (table.database, table.name, table.full_name, table.location) == (
        "default", "orders", "default.orders", posixpath.join(warehouse, "orders"))
    assert [(c.name, c.type) for c in table.columns] == [("id", "int"), ("amount", "decimal(10,2)")]
    assert [(k.name, k.type) for k in table.partition_keys] == [("ds", "string")]
    assert (table.bucket_columns, table.num_buckets, table.bucketing_version) == (("id",), 4, 2)
    assert (table.comment, table.owner, table.create_time_ms) == ("the orders", "tester", clock.now_ms())
    assert table.is_transactional and not table.no_auto_compaction
    assert ms.catalog.list_tables("default") == ["orders"]
    assert [t.full_name for t in ms.catalog.list_all_tables()] == ["default.orders"]


def test_table_in_another_database_and_at_a_location(ms, warehouse):
    ms.catalog.create_database("sales")
    assert ms.catalog.create_table("sales", "t", COLUMNS).location == posixpath.join(warehouse, "sales.db", "t")
    assert ms.catalog.create_table("sales", "u", COLUMNS, location="/data/u").location == "/data/u"


def test_duplicate_and_missing_tables(ms):
    created = ms.catalog.create_table("default", "t", COLUMNS)
    with pytest.raises(AlreadyExistsError, match="default.t"):
        ms.catalog.create_table("default", "T", COLUMNS)
    assert ms.catalog.create_table("default", "t", [("other", "int")], if_not_exists=True) == created
    with pytest.raises(NoSuchObjectError, match="'nowhere'"):
        ms.catalog.create_table("nowhere", "t", COLUMNS)
    with pytest.raises(NoSuchObjectError, match="default.missing"):
        ms.catalog.get_table("default", "missing")
    assert ms.catalog.drop_table("default", "missing", if_exists=True) is None
    assert ms.catalog.drop_table("default", "t") == created
    with pytest.raises(NoSuchObjectError):
        ms.catalog.drop_table("default", "t")


@pytest.mark.parametrize("options,complaint", [
    ({"columns": []}, "at least one column"),
    ({"columns": [("a", "int"), ("A", "string")]}, "repeated"),
    ({"columns": [("a", "no_such_type")]}, "no_such_type"),
    ({"partition_keys": [("id", "int")]}, "both a column and a partition key"),
    ({"bucket_columns": ["nope"], "num_buckets": 2}, "nope"),
    ({"bucket_columns": ["id"], "num_buckets": 0}, "1..4096"),
    ({"bucket_columns": ["id"], "num_buckets": 4097}, "1..4096"),
])
def test_bad_table_definitions_are_refused_and_record_nothing(ms, options, complaint):
    before = catalog_rows(ms)
    arguments = {"columns": COLUMNS, **options}
    with pytest.raises(AcidError, match=complaint.replace(".", r"\.")):
        ms.catalog.create_table("default", "t", arguments.pop("columns"), **arguments)
    assert catalog_rows(ms) == before


# --- properties ---------------------------------------------------------------------------------------------------

def test_set_replaces_a_key_that_differs_only_in_case(ms):
    ms.catalog.create_table("default", "t", COLUMNS, params={"Transactional": "true", "owner_team": "a"})
    table = ms.catalog.set_table_params("default", "t", {"TRANSACTIONAL": "false", "new_key": "1"})
    assert table.params == {"TRANSACTIONAL": "false", "owner_team": "a", "new_key": "1"}
    assert table.param("transactional") == "false" and not table.is_transactional


def test_set_with_two_spellings_of_one_key_keeps_one(ms):
    ms.catalog.create_table("default", "t", COLUMNS)
    table = ms.catalog.set_table_params("default", "t", {"no_auto_compaction": "true", "NO_AUTO_COMPACTION": "false"})
    assert [key for key in table.params if key.lower() == "no_auto_compaction"] == ["NO_AUTO_COMPACTION"]
    assert not table.no_auto_compaction


def test_unset_is_case_insensitive(ms):
    ms.catalog.create_table("default", "t", COLUMNS, params={"NO_AUTO_COMPACTION": "true", "keep": "1"})
    table = ms.catalog.unset_table_params("default", "t", ["no_auto_compaction"])
    assert table.params == {"keep": "1"}
    with pytest.raises(NoSuchObjectError, match="'missing'"):
        ms.catalog.unset_table_params("default", "t", ["missing", "keep"])
    assert ms.catalog.get_table("default", "t").params == {"keep": "1"}  # all or nothing
    assert ms.catalog.unset_table_params("default", "t", ["missing", "keep"], if_exists=True).params == {}


def test_properties_of_a_missing_table(ms):
    with pytest.raises(NoSuchObjectError, match="default.nope"):
        ms.catalog.set_table_params("default", "nope", {"a": "b"})
    with pytest.raises(NoSuchObjectError, match="default.nope"):
        ms.catalog.unset_table_params("default", "nope", ["a"])


@pytest.mark.parametrize("params,expected", [
    ({}, False), ({"no_auto_compaction": "true"}, True), ({"NO_AUTO_COMPACTION": "TRUE"}, True),
    ({"No_Auto_Compaction": "True"}, True), ({"no_auto_compaction": "false"}, False), ({"no_auto_compaction": "yes"}, False),
])
def test_no_auto_compaction(ms, params, expected):
    assert ms.catalog.create_table("default", "t", COLUMNS, params=params).no_auto_compaction is expected


def test_require_transactional(ms):
    ms.catalog.create_table("default", "acid", COLUMNS, params={"TRANSACTIONAL": "TRUE"})
    ms.catalog.create_table("default", "plain", COLUMNS)
    ms.catalog.create_table("default", "off", COLUMNS, params={"transactional": "false"})
    ms.catalog.create_table("default", "mm", COLUMNS, params={"transactional": "true",
                                                              "transactional_properties": "insert_only"})
    assert ms.catalog.require_transactional("default", "acid").name == "acid"
    for name in ("plain", "off", "mm"):
        with pytest.raises(NotTransactionalError) as info:
            ms.catalog.require_transactional("default", name)
        assert f"default.{name}" in str(info.value) and "'transactional'='true'" in str(info.value)
    with pytest.raises(NoSuchObjectError, match="default.ghost"):
        ms.catalog.require_transactional("default", "ghost")


# --- names --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_identifiers_are_refused_with_a_clear_message(name):
    with pytest.raises(MetastoreError) as info:
        check_identifier(name, "table")
    assert repr(name) in str(info.value)
    assert "letters, digits and underscores" in str(info.value)


def test_bad_identifiers_change_nothing_anywhere(ms):
    ms.catalog.create_table("default", "t", COLUMNS, params=ACID)
    before = catalog_rows(ms)
    attempts = [
        lambda n: ms.catalog.create_database(n),
        lambda n: ms.catalog.get_database(n),
        lambda n: ms.catalog.drop_database(n),
        lambda n: ms.catalog.create_table("default", n, COLUMNS),
        lambda n: ms.catalog.create_table(n, "t", COLUMNS),
        lambda n: ms.catalog.create_table("default", "u", [(n, "int")]),
        lambda n: ms.catalog.create_table("default", "u", COLUMNS, partition_keys=[(n, "string")]),
        lambda n: ms.catalog.get_table("default", n),
        lambda n: ms.catalog.drop_table("default", n),
        lambda n: ms.catalog.set_table_params("default", n, {"a": "b"}),
        lambda n: ms.catalog.list_partitions("default", n),
        lambda n: ms.catalog.list_tables(n),
    ]
    for name in BAD_NAMES:
        for attempt in attempts:
            with pytest.raises(MetastoreError) as info:
                attempt(name)
            assert repr(name) in str(info.value)
    assert catalog_rows(ms) == before
    # The metastore's own tables are all still there.
    assert set(sa.inspect(ms.db.engine).get_table_names()) == set(schema.metadata.tables)
    ms.txns.commit(ms.txns.open_txn())


# --- partitions ---------------------------------------------------------------------------------------------------

@pytest.fixture
def partitioned(ms):
    return ms.catalog.create_table("default", "events", COLUMNS, partition_keys=[("ds", "string"), ("hr", "int")],
                                   params=ACID)


def test_add_and_list_partitions(ms, partitioned, clock):
    added = ms.catalog.add_partition("default", "events", {"hr": 3, "DS": "2024-01-01"})
    assert (added.name, added.location, added.create_time_ms) == (
        "ds=2024-01-01/hr=3", posixpath.join(partitioned.location, "ds=2024-01-01/hr=3"), clock.now_ms())
    assert added.spec == {"ds": "2024-01-01", "hr": "3"}
    clock.advance(5)
    assert ms.catalog.add_partition("default", "events", {"ds": "2024-01-01", "hr": "3"}) == added  # existing
    ms.catalog.add_partition("default", "events", {"ds": "2023-12-31", "hr": 23})
    assert [p.name for p in ms.catalog.list_partitions("default", "events")] == [
        "ds=2023-12-31/hr=23", "ds=2024-01-01/hr=3"]
    assert ms.catalog.get_partition("default", "events", {"ds": "2024-01-01", "hr": 3}) == added
    with pytest.raises(NoSuchObjectError, match="ds=2024-01-02/hr=3"):
        ms.catalog.get_partition("default", "events", {"ds": "2024-01-02", "hr": 3})


@pytest.mark.parametrize("spec,complaint", [
    ({"ds": "2024-01-01"}, "must give exactly the partition keys"),
    ({"ds": "2024-01-01", "hr": 1, "extra": 2}, "must give exactly the partition keys"),
    ({"ds": "", "hr": 1}, "empty value"),
    ({"ds": None, "hr": 1}, "empty value"),
    ({}, "must give exactly the partition keys"),
])
def test_partition_spec_validation(ms, partitioned, spec, complaint):
    before = catalog_rows(ms)
    with pytest.raises(MetastoreError, match=complaint):
        ms.catalog.add_partition("default", "events", spec)
    assert catalog_rows(ms) == before


def test_partition_values_cannot_escape_the_table(ms, partitioned):
    for value in ("../../etc", "a/b", "..", "x;drop table TXNS"):
        added = ms.catalog.add_partition("default", "events", {"ds": value, "hr": 1})
        relative = posixpath.relpath(posixpath.normpath(added.location), partitioned.location)
        assert not relative.startswith(".."), added.location
        assert relative.count("/") == 1, added.location  # exactly ds=…/hr=…
        assert added.spec["ds"] == value


def test_unpartitioned_tables_take_no_spec(ms):
    table = ms.catalog.create_table("default", "flat", COLUMNS, params=ACID)
    assert table.partition_name({}) is None
    with pytest.raises(MetastoreError, match="not partitioned"):
        table.partition_name({"ds": "x"})
    with pytest.raises(MetastoreError, match="not partitioned"):
        ms.catalog.add_partition("default", "flat", {})
    with pytest.raises(NoSuchObjectError):
        ms.catalog.add_partition("default", "ghost", {"ds": "x"})


def test_drop_table_forgets_its_partitions_and_properties(ms, partitioned):
    ms.catalog.add_partition("default", "events", {"ds": "a", "hr": 1})
    ms.catalog.drop_table("default", "events")
    rows = catalog_rows(ms)
    assert all(rows[name] == [] for name in ("TBLS", "COLUMNS_V2", "PARTITION_KEYS", "TABLE_PARAMS", "PARTITIONS"))


def test_drop_table_forgets_its_transactional_records(ms):
    """Hive's CleanupRecordsFunction: a table created again under the same name starts from write id 1."""
    from acid_core.metastore.codes import CompactionType
    from acid_core.metastore.txns import Operation

    for name in ("t", "u"):
        ms.catalog.create_table("default", name, COLUMNS, params=ACID)
        txn_id = ms.txns.open_txn()
        ms.txns.allocate_write_ids([txn_id], "default", name)
        ms.txns.add_components(txn_id, "default", name, [None], Operation.UPDATE)
        ms.txns.commit(txn_id)
        ms.compactions.enqueue("default", name, None, CompactionType.MAJOR)
        ms.leases.acquire("default", name)
    ms.catalog.drop_table("default", "t")
    with ms.db.engine.connect() as connection:
        for table, prefix in ((schema.completed_txn_components, "CTC"), (schema.compaction_queue, "CQ"),
                              (schema.txn_to_write_id, "T2W"), (schema.next_write_id, "NWI"),
                              (schema.write_set, "WS"), (schema.reader_leases, "RL")):
            tables = connection.execute(sa.select(table.c[f"{prefix}_TABLE"])).scalars().all()
            assert sorted(set(tables)) == ["u"], (table.name, tables)
    ms.catalog.create_table("default", "t", COLUMNS, params=ACID)
    txn_id = ms.txns.open_txn()
    assert ms.txns.allocate_write_ids([txn_id], "default", "t") == {txn_id: 1}
    assert ms.txns.allocate_write_ids([txn_id], "default", "u") == {txn_id: 2}


# --- two clients creating the same object at once (PostgreSQL; SQLite runs one writer at a time) -------------------

def _interleaved(postgres_url: str, tmp_path, table_name: str, first_call, second_call):
    """Run `first_call` on handle A; right after A's first look at `table_name` (a SELECT), handle B runs
    `second_call` to completion; then A goes on. Returns (A's result, B's result)."""
    first = Metastore(postgres_url, identity=ME, warehouse=str(tmp_path / "warehouse"))
    second = Metastore(postgres_url, identity=ME, warehouse=str(tmp_path / "warehouse"))
    try:
        first.init()
        first.catalog.create_table("default", "events", COLUMNS, partition_keys=[("ds", "string")], params=ACID)
        fired = []

        def after_execute(conn, cursor, statement, parameters, context, executemany):
            if (not fired and statement.lstrip().upper().startswith("SELECT")
                    and f'FROM "{table_name}"' in statement):
                fired.append(statement)
                fired.append(second_call(second))

        sa.event.listen(first.db.engine, "after_cursor_execute", after_execute)
        result = first_call(first)
        assert fired, "the interleaving hook never ran"
        return result, fired[1]
    finally:
        first.close()
        second.close()


@pytest.mark.postgres
def test_two_writers_adding_the_same_new_partition_both_get_it(postgres_url, tmp_path):
    """Parallel writers of one new dynamic partition (Hive's add_partitions with ifNotExists) must both succeed."""
    spec = {"ds": "2024-01-01"}
    mine, theirs = _interleaved(postgres_url, tmp_path, "PARTITIONS",
                                   lambda ms: ms.catalog.add_partition("default", "events", spec),
                                   lambda ms: ms.catalog.add_partition("default", "events", spec))
    assert mine.name == theirs.name == "ds=2024-01-01"


@pytest.mark.postgres
def test_two_create_table_if_not_exists_at_once_both_succeed(postgres_url, tmp_path):
    mine, theirs = _interleaved(postgres_url, tmp_path, "TBLS",
                                   lambda ms: ms.catalog.create_table("default", "t", COLUMNS, if_not_exists=True),
                                   lambda ms: ms.catalog.create_table("default", "t", COLUMNS, if_not_exists=True))
    assert mine.full_name == theirs.full_name == "default.t"


@pytest.mark.postgres
def test_two_create_table_at_once_the_loser_gets_already_exists(postgres_url, tmp_path):
    with pytest.raises(AlreadyExistsError, match="default.t"):
        _interleaved(postgres_url, tmp_path, "TBLS",
                     lambda ms: ms.catalog.create_table("default", "t", COLUMNS),
                     lambda ms: ms.catalog.create_table("default", "t", COLUMNS))


def test_database_properties_carry_no_auto_compaction(metastore_url, tmp_path):
    from acid_core.metastore import Metastore

    store = Metastore(metastore_url, warehouse=str(tmp_path / "wh"))
    store.init()
    try:
        info = store.catalog.create_database("db1", params={"NO_AUTO_COMPACTION": "true", "owner": "ops"})
        assert info.no_auto_compaction and info.param("Owner") == "ops"
        info = store.catalog.set_database_params("db1", {"no_auto_compaction": "false"})
        assert not info.no_auto_compaction and dict(info.params) == {"owner": "ops", "no_auto_compaction": "false"}
        assert store.catalog.get_database("db1").params == info.params
    finally:
        store.close()
