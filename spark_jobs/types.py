"""Hive column types as Spark types: the one mapping that Spark reads (`spark_jobs.read`) and writes use.

Built on acid_core's type model (`acid_core.format.types.parse_type`). The choices, which are Spark's own for Hive tables:
- `timestamp` (Hive: a date-time without a time zone) is TimestampNTZType; Spark keeps microseconds, so reads cut
  sub-microsecond digits. `timestamp with local time zone` (an instant) is TimestampType.
- `char(n)` and `varchar(n)` are StringType, as Spark reads Hive's char/varchar columns (CharType and VarcharType
  exist only in Spark's table metadata, and Arrow cannot carry them). Writes keep the ORC types: the event-file
  writer pads char values with spaces and cuts both to n characters, as Hive does; reads return what Hive stores
  (char values padded).
- uniontype has no Spark type and is refused.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from acid_core.errors import SchemaMismatchError
from acid_core.format.types import TIMESTAMP_LOCAL_TZ, HiveType, parse_type
from acid_core.metastore.catalog import TableInfo
from acid_core.read.merge import ROW_ID_COLUMN

_PRIMITIVES: dict[str, DataType] = {
    "tinyint": ByteType(), "smallint": ShortType(), "int": IntegerType(), "bigint": LongType(), "float": FloatType(),
    "double": DoubleType(), "boolean": BooleanType(), "string": StringType(), "varchar": StringType(),
    "char": StringType(), "binary": BinaryType(), "date": DateType(), "timestamp": TimestampNTZType(),
    TIMESTAMP_LOCAL_TZ: TimestampType(),
}
ROW_ID_TYPE = StructType([StructField("writeid", LongType()), StructField("bucketid", IntegerType()),
                          StructField("rowid", LongType())])


def to_spark(hive_type: HiveType | str) -> DataType:
    """The Spark type of a Hive type (a parsed one, or a type string as the catalog stores it).

    Raises:
        SchemaMismatchError: the string is not a Hive type (InvalidTypeError), or names a type Spark cannot hold
            (uniontype).
    """
    if isinstance(hive_type, str):
        hive_type = parse_type(hive_type)
    if hive_type.kind == "decimal":
        return DecimalType(hive_type.precision, hive_type.scale)
    if hive_type.kind == "array":
        return ArrayType(to_spark(hive_type.children[0]), True)
    if hive_type.kind == "map":
        return MapType(to_spark(hive_type.children[0]), to_spark(hive_type.children[1]), True)
    if hive_type.kind == "struct":
        return StructType([StructField(name, to_spark(child), True) for name, child in hive_type.fields])
    if hive_type.kind in _PRIMITIVES:
        return _PRIMITIVES[hive_type.kind]
    raise SchemaMismatchError(f"Hive type {str(hive_type)!r} has no Spark type (Spark has no union type): "
                              "read such a table with acid_core instead")


def spark_schema(table: TableInfo, *, include_row_id: bool = False,
                 include_partition_keys: bool = False) -> StructType:
    """A table as a Spark schema: [Hive's `row__id` struct,] its columns[, its partition keys]; all nullable.

    Raises:
        SchemaMismatchError: a column type Spark cannot hold.
    """
    fields = [StructField(ROW_ID_COLUMN, ROW_ID_TYPE, True)] if include_row_id else []
    fields += [StructField(c.name, to_spark(c.type), True) for c in table.columns]
    if include_partition_keys:
        fields += [StructField(k.name, to_spark(k.type), True) for k in table.partition_keys]
    return StructType(fields)


__all__ = ["ROW_ID_TYPE", "spark_schema", "to_spark"]
