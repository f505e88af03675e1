"""`acid`: inspect and read Hive ACID table directories.

    acid inspect PATH --write-ids STR [--txns STR] [--compactor] [--json]
    acid read PATH [--write-ids STR] [--txns STR] [--row-id] [--columns a,b] [--format jsonl|table]
    acid metastore init [--metastore URL]
    acid sql "STATEMENT; ..." | -f FILE [--metastore URL] [--format table|jsonl]
    acid compact run COMPACTION_ID [--metastore URL] [--master SPARK_MASTER]

The metastore URL comes from --metastore, else ACID_METASTORE_URL, else a SQLite file under $ACID_HOME/warehouse.

Exit status: 0 on success, 1 when the operation fails (the message names the thing and the problem), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from collections.abc import Sequence

import pyarrow as pa

from acid_cli.output import report_error, write_jsonl, write_table
from acid_core.errors import AcidError, UsageError
from acid_core.format.validity import ValidCompactorWriteIdList, ValidTxnList, ValidWriteIdList
from acid_core.metastore.engine import redact
from acid_core.read.merge import DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY, read_batches
from acid_core.read.state import get_acid_state


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="acid", description="Hive-ACID-compatible table tools")
    commands = parser.add_subparsers(dest="command", required=True)

    inspect = commands.add_parser("inspect", help="show which directories a snapshot reads (Hive's getAcidState)")
    inspect.add_argument("path", help="partition or unpartitioned table directory (path or URI)")
    inspect.add_argument("--write-ids", required=True,
                         help="Hive ValidWriteIdList string <db.table>:<hwm>:<minOpen>:<open>:<aborted>")
    inspect.add_argument("--txns", help="Hive ValidTxnList string <hwm>:<minOpen>:<open>:<aborted> (default: all committed)")
    inspect.add_argument("--compactor", action="store_true", help="interpret --write-ids as the compactor's list")
    inspect.add_argument("--json", action="store_true", help="print one JSON object")

    read = commands.add_parser("read", help="print the rows a snapshot sees (merge-on-read)")
    read.add_argument("path", help="partition or unpartitioned table directory (path or URI)")
    read.add_argument("--write-ids", help="Hive ValidWriteIdList string (default: every write id committed)")
    read.add_argument("--txns", help="Hive ValidTxnList string (default: all committed)")
    read.add_argument("--row-id", action="store_true", help="include row__id {writeid, bucketid, rowid}")
    read.add_argument("--columns", help="comma-separated names for the data columns (Hive's files say _col0, ...)")
    read.add_argument("--format", choices=("jsonl", "table"), default="table")
    read.add_argument("--max-delete-events", type=int, default=DEFAULT_MAX_DELETE_EVENTS_IN_MEMORY,
                      help="above this many delete events, stream them in a sort-merge (hive.transactional.events.mem)")

    metastore = commands.add_parser("metastore", help="manage the metastore database")
    metastore_commands = metastore.add_subparsers(dest="metastore_command", required=True)
    init = metastore_commands.add_parser("init", help="create or upgrade the schema (idempotent)")
    init.add_argument("--metastore", help="SQLAlchemy URL (default: ACID_METASTORE_URL or SQLite under ACID_HOME)")

    sql = commands.add_parser("sql", help="run HiveQL statements against the metastore and warehouse")
    sql.add_argument("statements", nargs="?", help="';'-separated statements")
    sql.add_argument("-f", "--file", help="read the statements from a file")
    sql.add_argument("--metastore", help="SQLAlchemy URL (default: ACID_METASTORE_URL or SQLite under ACID_HOME)")
    sql.add_argument("--format", choices=("table", "jsonl"), default="table")

    compact = commands.add_parser("compact", help="run queued compactions")
    compact_commands = compact.add_subparsers(dest="compact_command", required=True)
    run = compact_commands.add_parser("run", help="run one queued compaction through spark-submit and wait")
    run.add_argument("compaction_id", type=int)
    run.add_argument("--metastore", help="SQLAlchemy URL (default: ACID_METASTORE_URL or SQLite under ACID_HOME)")
    run.add_argument("--master", help="Spark master (default: ACID_SPARK_MASTER or local[*])")
    return parser


def _inspect(args: argparse.Namespace) -> int:
    list_type = ValidCompactorWriteIdList if args.compactor else ValidWriteIdList
    state = get_acid_state(args.path, write_ids=list_type.parse(args.write_ids), txns=ValidTxnList.parse(args.txns))
    document = state.to_json()
    if args.json:
        print(json.dumps(document))
        return 0
    rows = [("base", document["base"] or "")]
    rows += [("delta", name) for name in document["deltas"]]
    rows += [("obsolete", name) for name in document["obsolete"]]
    rows += [("aborted", name) for name in document["aborted"]]
    rows += [("original", name) for name in state.original_files]
    write_table(("role", "directory"), rows, sys.stdout)
    return 0


_M_ARENA_MAX = -8  # glibc's mallopt parameter


def use_system_allocator() -> None:
    """Make pyarrow allocate with the C library's malloc in this process, as Spark's Python workers do
    (spark_jobs/session.py): for a long streamed read it gives memory back as batches come and go, where jemalloc
    and mimalloc keep freed pages (bench_scale, `read_batches` over a Hive-shaped partition of 1M and 32M base rows:
    198 and 247 MiB peak, against 212 and 303 on jemalloc and 261 and 370 on mimalloc, and no slower). malloc keeps
    at most two arenas (glibc's M_ARENA_MAX, what MALLOC_ARENA_MAX=2 sets for the workers): an arena per reading
    thread held freed memory of its own (237 and 319 MiB)."""
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 2)
    except (OSError, AttributeError):  # not glibc: its own arena policy stays
        pass


def _read(args: argparse.Namespace) -> int:
    use_system_allocator()
    write_ids = ValidWriteIdList.parse(args.write_ids) if args.write_ids else None
    names = [n.strip() for n in args.columns.split(",")] if args.columns else None
    batches = read_batches(args.path, write_ids=write_ids, txns=ValidTxnList.parse(args.txns),
                           include_row_id=args.row_id, order_by_row_id=True, column_names=names,
                           max_delete_events_in_memory=args.max_delete_events)
    header = batches.schema.names
    if args.format == "jsonl":
        for batch in batches:  # a batch at a time: memory does not grow with the partition
            write_jsonl(batch.to_pylist(), sys.stdout)
        return 0
    widths = None
    for batch in batches:
        rows = ([row[name] for name in header] for row in batch.to_pylist())
        widths = write_table(header, rows, sys.stdout, widths=widths)
    if widths is None:
        write_table(header, [], sys.stdout)
    return 0


def _metastore(args: argparse.Namespace) -> int:
    from acid_core.metastore import Metastore

    store = Metastore(args.metastore)
    try:
        version = store.init()
    finally:
        store.close()
    print(f"metastore {redact(store.url)} is at schema version {version}")
    return 0


def _sql(args: argparse.Namespace) -> int:
    from acid_cli.sql import run_script

    if (args.statements is None) == (args.file is None):
        raise UsageError("give the statements either as an argument or with -f FILE (exactly one)")
    if args.file:
        try:
            with open(args.file, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise UsageError(f"cannot read {args.file!r}: {exc.strerror}") from exc
    else:
        text = args.statements
    return run_script(text, metastore_url=args.metastore, output_format=args.format, out=sys.stdout)


def _compact(args: argparse.Namespace) -> int:
    from acid_cli.compact import run

    return run(args.compaction_id, metastore=args.metastore, master=args.master)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handlers = {"inspect": _inspect, "read": _read, "metastore": _metastore, "sql": _sql, "compact": _compact}
    try:
        return handlers[args.command](args)
    except AcidError as exc:
        return report_error(f"acid {args.command}: error", exc)
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
