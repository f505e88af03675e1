"""SQLAlchemy Core tables of the ACID metastore. The `sql/` files are the source of truth; a test checks agreement."""

from __future__ import annotations

from sqlalchemy import (
    CHAR,
    BigInteger,
    Column,
    ForeignKey,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()


def _table(name: str, *columns, **kwargs) -> Table:
    return Table(name, metadata, *columns, **kwargs)


def _nn(name: str, type_, *args, **kwargs) -> Column:
    return Column(name, type_, *args, nullable=False, **kwargs)


SCHEMA_VERSION = 4
TXN_OPEN, TXN_ABORTED, TXN_COMMITTED = "o", "a", "c"  # TXNS.TXN_STATE

acid_schema_version = _table("ACID_SCHEMA_VERSION", _nn("VERSION", Integer), _nn("APPLIED_AT", BigInteger))

sequence_table = _table("SEQUENCE_TABLE", Column("SEQUENCE_NAME", String(255), primary_key=True),
                        _nn("NEXT_VAL", BigInteger))

dbs = _table("DBS", Column("DB_ID", BigInteger, primary_key=True, autoincrement=False),
             _nn("NAME", String(128), unique=True), _nn("DB_LOCATION_URI", String(4000)), Column("DESC", String(4000)),
             _nn("CREATE_TIME", BigInteger))

database_params = _table("DATABASE_PARAMS", _nn("DB_ID", BigInteger, ForeignKey("DBS.DB_ID")),
                         _nn("PARAM_KEY", String(180)), Column("PARAM_VALUE", String(4000)),
                         PrimaryKeyConstraint("DB_ID", "PARAM_KEY"))

tbls = _table("TBLS", Column("TBL_ID", BigInteger, primary_key=True, autoincrement=False),
              _nn("DB_ID", BigInteger, ForeignKey("DBS.DB_ID")), _nn("TBL_NAME", String(256)),
              _nn("LOCATION", String(4000)), _nn("NUM_BUCKETS", Integer), Column("OWNER", String(767)),
              Column("COMMENT", String(4000)), _nn("CREATE_TIME", BigInteger), UniqueConstraint("DB_ID", "TBL_NAME"))

columns_v2 = _table("COLUMNS_V2", _nn("TBL_ID", BigInteger, ForeignKey("TBLS.TBL_ID")), _nn("COLUMN_NAME", String(767)),
                    _nn("TYPE_NAME", Text), Column("COMMENT", String(4000)), _nn("INTEGER_IDX", Integer),
                    PrimaryKeyConstraint("TBL_ID", "COLUMN_NAME"))

partition_keys = _table("PARTITION_KEYS", _nn("TBL_ID", BigInteger, ForeignKey("TBLS.TBL_ID")),
                        _nn("PKEY_NAME", String(128)), _nn("PKEY_TYPE", String(767)), Column("PKEY_COMMENT", String(4000)),
                        _nn("INTEGER_IDX", Integer), PrimaryKeyConstraint("TBL_ID", "PKEY_NAME"))

bucketing_cols = _table("BUCKETING_COLS", _nn("TBL_ID", BigInteger, ForeignKey("TBLS.TBL_ID")),
                        _nn("BUCKET_COL_NAME", String(256)), _nn("INTEGER_IDX", Integer),
                        PrimaryKeyConstraint("TBL_ID", "INTEGER_IDX"))

table_params = _table("TABLE_PARAMS", _nn("TBL_ID", BigInteger, ForeignKey("TBLS.TBL_ID")), _nn("PARAM_KEY", String(256)),
                      Column("PARAM_VALUE", Text), PrimaryKeyConstraint("TBL_ID", "PARAM_KEY"))

partitions = _table("PARTITIONS", Column("PART_ID", BigInteger, primary_key=True, autoincrement=False),
                    _nn("TBL_ID", BigInteger, ForeignKey("TBLS.TBL_ID")), _nn("PART_NAME", String(767)),
                    _nn("LOCATION", String(4000)), _nn("CREATE_TIME", BigInteger), UniqueConstraint("TBL_ID", "PART_NAME"))

next_txn_id = _table("NEXT_TXN_ID", _nn("NTXN_NEXT", BigInteger))

txns = _table("TXNS", Column("TXN_ID", BigInteger, primary_key=True, autoincrement=False), _nn("TXN_STATE", CHAR(1)),
              _nn("TXN_STARTED", BigInteger), _nn("TXN_LAST_HEARTBEAT", BigInteger), _nn("TXN_USER", String(128)),
              _nn("TXN_HOST", String(128)), Column("TXN_AGENT_INFO", String(128)), Column("TXN_META_INFO", String(128)),
              Column("TXN_HEARTBEAT_COUNT", Integer), Column("TXN_TYPE", Integer))

txn_components = _table("TXN_COMPONENTS", _nn("TC_TXNID", BigInteger, ForeignKey("TXNS.TXN_ID")),
                        _nn("TC_DATABASE", String(128)), Column("TC_TABLE", String(256)),
                        Column("TC_PARTITION", String(767)), _nn("TC_OPERATION_TYPE", CHAR(1)),
                        Column("TC_WRITEID", BigInteger))

completed_txn_components = _table(
    "COMPLETED_TXN_COMPONENTS", _nn("CTC_TXNID", BigInteger), _nn("CTC_DATABASE", String(128)),
    Column("CTC_TABLE", String(256)), Column("CTC_PARTITION", String(767)), _nn("CTC_TIMESTAMP", BigInteger),
    Column("CTC_WRITEID", BigInteger), _nn("CTC_UPDATE_DELETE", CHAR(1)))

txn_to_write_id = _table("TXN_TO_WRITE_ID", _nn("T2W_TXNID", BigInteger), _nn("T2W_DATABASE", String(128)),
                         _nn("T2W_TABLE", String(256)), _nn("T2W_WRITEID", BigInteger))

txn_staging = _table("TXN_STAGING", _nn("TS_TXNID", BigInteger), _nn("TS_DATABASE", String(128)),
                     _nn("TS_TABLE", String(256)), Column("TS_PARTITION", String(767)))

next_write_id = _table("NEXT_WRITE_ID", _nn("NWI_DATABASE", String(128)), _nn("NWI_TABLE", String(256)),
                       _nn("NWI_NEXT", BigInteger))

write_set = _table("WRITE_SET", _nn("WS_DATABASE", String(128)), _nn("WS_TABLE", String(256)),
                   Column("WS_PARTITION", String(767)), _nn("WS_TXNID", BigInteger), _nn("WS_COMMIT_ID", BigInteger),
                   _nn("WS_OPERATION_TYPE", CHAR(1)))

next_lock_id = _table("NEXT_LOCK_ID", _nn("NL_NEXT", BigInteger))

hive_locks = _table(
    "HIVE_LOCKS", _nn("HL_LOCK_EXT_ID", BigInteger), _nn("HL_LOCK_INT_ID", BigInteger), _nn("HL_TXNID", BigInteger),
    _nn("HL_DB", String(128)), Column("HL_TABLE", String(256)), Column("HL_PARTITION", String(767)),
    _nn("HL_LOCK_STATE", CHAR(1)), _nn("HL_LOCK_TYPE", CHAR(1)), _nn("HL_LAST_HEARTBEAT", BigInteger),
    Column("HL_ACQUIRED_AT", BigInteger), _nn("HL_USER", String(128)), _nn("HL_HOST", String(128)),
    Column("HL_HEARTBEAT_COUNT", Integer), Column("HL_AGENT_INFO", String(128)),
    Column("HL_BLOCKEDBY_EXT_ID", BigInteger), Column("HL_BLOCKEDBY_INT_ID", BigInteger),
    PrimaryKeyConstraint("HL_LOCK_EXT_ID", "HL_LOCK_INT_ID"))

next_compaction_queue_id = _table("NEXT_COMPACTION_QUEUE_ID", _nn("NCQ_NEXT", BigInteger))


def _compaction_columns(prefix: str, *, history: bool) -> list[Column]:
    columns = [
        Column(f"{prefix}_ID", BigInteger, primary_key=True, autoincrement=False),
        _nn(f"{prefix}_DATABASE", String(128)), _nn(f"{prefix}_TABLE", String(256)),
        Column(f"{prefix}_PARTITION", String(767)), _nn(f"{prefix}_STATE", CHAR(1)), _nn(f"{prefix}_TYPE", CHAR(1)),
        Column(f"{prefix}_TBLPROPERTIES", String(2048)), Column(f"{prefix}_WORKER_ID", String(128)),
        Column(f"{prefix}_ENQUEUE_TIME", BigInteger), Column(f"{prefix}_START", BigInteger),
    ]
    if history:
        columns.append(Column(f"{prefix}_END", BigInteger))
    columns += [
        Column(f"{prefix}_RUN_AS", String(128)), Column(f"{prefix}_HIGHEST_WRITE_ID", BigInteger),
        Column(f"{prefix}_HADOOP_JOB_ID", String(32)), Column(f"{prefix}_ERROR_MESSAGE", Text),
        Column(f"{prefix}_NEXT_TXN_ID", BigInteger), Column(f"{prefix}_TXN_ID", BigInteger),
        Column(f"{prefix}_COMMIT_TIME", BigInteger), Column(f"{prefix}_INITIATOR_ID", String(128)),
        Column(f"{prefix}_INITIATOR_VERSION", String(128)), Column(f"{prefix}_WORKER_VERSION", String(128)),
    ]
    if not history:
        columns += [Column("CQ_CLEANER_START", BigInteger),
                    Column("CQ_RETRY_RETENTION", BigInteger, nullable=False, server_default="0")]
    columns += [Column(f"{prefix}_POOL_NAME", String(128)), Column(f"{prefix}_NUMBER_OF_BUCKETS", Integer),
                Column(f"{prefix}_ORDER_BY", String(4000))]
    return columns


compaction_queue = _table("COMPACTION_QUEUE", *_compaction_columns("CQ", history=False))
completed_compactions = _table("COMPLETED_COMPACTIONS", *_compaction_columns("CC", history=True))

aux_table = _table("AUX_TABLE", _nn("MT_KEY1", String(128)), _nn("MT_KEY2", BigInteger), Column("MT_COMMENT", String(255)),
                   PrimaryKeyConstraint("MT_KEY1", "MT_KEY2"))

reader_leases = _table(
    "READER_LEASES", Column("RL_ID", BigInteger, primary_key=True, autoincrement=False), _nn("RL_DATABASE", String(128)),
    _nn("RL_TABLE", String(256)), _nn("RL_NEXT_TXN_ID", BigInteger), _nn("RL_VALID_TXNS", Text),
    _nn("RL_STARTED", BigInteger), _nn("RL_LAST_HEARTBEAT", BigInteger), _nn("RL_OWNER", String(128)),
    _nn("RL_HOST", String(128)))

min_history_write_id = _table("MIN_HISTORY_WRITE_ID", _nn("MH_TXNID", BigInteger), _nn("MH_DATABASE", String(128)),
                              _nn("MH_TABLE", String(256)), _nn("MH_WRITEID", BigInteger))

stream_commits = _table("STREAM_COMMITS", _nn("SC_APP_ID", String(256)), _nn("SC_DATABASE", String(128)),
                        _nn("SC_TABLE", String(256)), _nn("SC_BATCH_ID", BigInteger), Column("SC_TXN_ID", BigInteger),
                        Column("SC_PENDING_TXN_ID", BigInteger), Column("SC_COMMIT_TIME", BigInteger),
                        UniqueConstraint("SC_DATABASE", "SC_TABLE", "SC_APP_ID"))


def same_partition(column, partition):
    """`column` names `partition`: a partition name, or NULL for an unpartitioned table (or a table-level entry)."""
    return column.is_(None) if partition is None else column == partition


def same_partition_as(column, other):
    """Two partition columns name the same partition (both NULL included), in a form both databases match by index
    (IS NOT DISTINCT FROM is not an index condition on PostgreSQL)."""
    from sqlalchemy import and_, or_

    return or_(column == other, and_(column.is_(None), other.is_(None)))
