"""HiveQL for `acid sql`: a pure parser from statement text to the value objects in `acid_cli.hiveql.ast`."""

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
