"""The statements `acid sql` accepts, read into the value objects of `acid_cli.hiveql.ast` (pure: no I/O).

Two readers, one per kind of statement: `parser` (with `tokens`, `cursor`, `literals`, `types`) is this project's own
parser of what the metastore runs (DDL, INSERT ... VALUES, SHOW, ALTER TABLE ... COMPACT, the ABORT statements);
`spark_sql` reads what Spark runs (SELECT, INSERT ... SELECT, UPDATE, DELETE, MERGE) with sqlglot's Spark dialect,
which is Hive's syntax as Spark parses it.
"""

from acid_cli.hiveql.ast import (
                                 ENGINE_KINDS,
                                 AbortCompactions,
                                 AbortTransactions,
                                 AlterTableCompact,
                                 AlterTableSetProperties,
                                 AlterTableUnsetProperties,
                                 Cast,
                                 Column,
                                 CreateDatabase,
                                 CreateTable,
                                 DescribeTable,
                                 DropDatabase,
                                 DropTable,
                                 EngineStatement,
                                 InsertValues,
                                 Literal,
                                 OrderItem,
                                 PartitionSpec,
                                 PartitionValue,
                                 Properties,
                                 ShowCompactions,
                                 ShowDatabases,
                                 ShowLocks,
                                 ShowPartitions,
                                 ShowTableProperties,
                                 ShowTables,
                                 ShowTransactions,
                                 Statement,
                                 TableName,
                                 UseDatabase,
)
from acid_cli.hiveql.parser import HiveQLSyntaxError, parse_script, parse_statement

__all__ = [
    "ENGINE_KINDS", "AbortCompactions", "AbortTransactions", "AlterTableCompact", "AlterTableSetProperties",
    "AlterTableUnsetProperties", "Cast", "Column", "CreateDatabase", "CreateTable", "DescribeTable", "DropDatabase",
    "DropTable", "EngineStatement", "HiveQLSyntaxError", "InsertValues", "Literal", "OrderItem", "PartitionSpec",
    "PartitionValue", "Properties", "ShowCompactions", "ShowDatabases", "ShowLocks", "ShowPartitions",
    "ShowTableProperties", "ShowTables", "ShowTransactions", "Statement", "TableName", "UseDatabase", "parse_script",
    "parse_statement",
]
