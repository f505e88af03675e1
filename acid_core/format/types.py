"""Hive column types: one parsed model of a type string, its canonical name and its Arrow type.

`parse_type` reads a type string as the catalog stores it (`int`, `decimal(10,2)`, `varchar(20)`,
`map<string,struct<a:int,b:array<date>>>`, ...) into a frozen `HiveType`. pyorc's parser (ORC's own
`TypeDescription` grammar, the one Hive's ORC files are written in) does the parsing; before it, the spellings Hive's
TypeInfoUtils accepts and ORC's does not are normalised: any case, spaces, `integer`/`dec`/`numeric`/`double
precision`, `decimal` without or with one parameter (Hive's `decimal(10,0)` and `decimal(p,0)`) and struct field names
that are not plain identifiers (Hive writes `struct<x y:int>` where ORC needs a back-quoted name). Hive's own limits
are then checked (HiveDecimal, HiveVarchar, HiveChar).

The Arrow mapping (`HiveType.to_arrow`) is the one acid_core reads and writes with: what pyarrow's ORC reader returns
for each ORC type. Arrow has no fixed-length strings, so `char(n)` and `varchar(n)` are Arrow strings; the event-file
writer keeps their ORC types, padding `char` values with spaces and cutting both to `n` characters as Hive does
(HiveChar, HiveVarchar). `timestamp` is Hive's date-time without a time zone: an Arrow timestamp in nanoseconds
(Hive's precision) without a time zone; `timestamp with local time zone` is an instant, a UTC Arrow timestamp.

Cost: parsing is cached per distinct type string (types are values), so per-row callers pay a dictionary lookup.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyorc

from acid_core.errors import InvalidTypeError

MAX_DECIMAL_PRECISION = 38          # HiveDecimal.MAX_PRECISION
DEFAULT_DECIMAL = (10, 0)           # HiveDecimal.USER_DEFAULT_PRECISION / USER_DEFAULT_SCALE
MAX_VARCHAR_LENGTH = 65535          # HiveVarchar.MAX_VARCHAR_LENGTH
MAX_CHAR_LENGTH = 255               # HiveChar.MAX_CHAR_LENGTH

INTEGER_KINDS = ("tinyint", "smallint", "int", "bigint")
TEXT_KINDS = ("string", "varchar", "char")
COMPLEX_KINDS = ("array", "map", "struct", "uniontype")
TIMESTAMP_LOCAL_TZ = "timestamp with local time zone"

_KIND_BY_ORC: dict[int, str] = {  # TypeDescription.kind is an int (a TypeKind)
    pyorc.TypeKind.BOOLEAN: "boolean", pyorc.TypeKind.BYTE: "tinyint", pyorc.TypeKind.SHORT: "smallint",
    pyorc.TypeKind.INT: "int", pyorc.TypeKind.LONG: "bigint", pyorc.TypeKind.FLOAT: "float",
    pyorc.TypeKind.DOUBLE: "double", pyorc.TypeKind.STRING: "string", pyorc.TypeKind.BINARY: "binary",
    pyorc.TypeKind.TIMESTAMP: "timestamp", pyorc.TypeKind.TIMESTAMP_INSTANT: TIMESTAMP_LOCAL_TZ,
    pyorc.TypeKind.DATE: "date", pyorc.TypeKind.DECIMAL: "decimal", pyorc.TypeKind.VARCHAR: "varchar",
    pyorc.TypeKind.CHAR: "char", pyorc.TypeKind.LIST: "array", pyorc.TypeKind.MAP: "map",
    pyorc.TypeKind.STRUCT: "struct", pyorc.TypeKind.UNION: "uniontype",
}
_ARROW = {
    "boolean": pa.bool_(), "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "string": pa.string(), "varchar": pa.string(),
    "char": pa.string(), "binary": pa.binary(), "date": pa.date32(), "timestamp": pa.timestamp("ns"),
    TIMESTAMP_LOCAL_TZ: pa.timestamp("ns", tz="UTC"),
}
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]+")
_UNREADABLE_NAME = re.compile(r"[`<>,:()]")
# a back-quoted name (kept), or an unquoted struct field name: whatever stands between '<' or ',' and ':'
_FIELD_NAME = re.compile(r"`(?:[^`]|``)*`|([<,])([^`<>,:()]+):")
_QUOTED = re.compile(r"(`(?:[^`]|``)*`)")
_SPELLINGS = [  # (pattern, replacement) over the lowercased text outside back-quoted names, in this order
    (re.compile(r"\s+"), " "),
    (re.compile(r" ?([<>(),:]) ?"), r"\1"),
    (re.compile(r"\binteger\b"), "int"),
    (re.compile(r"\b(?:dec|numeric)\b"), "decimal"),
    (re.compile(r"\bdouble precision\b"), "double"),
    (re.compile(r"\bdecimal\((\d+)\)"), r"decimal(\1,0)"),
    (re.compile(r"\bdecimal\b(?!\()"), f"decimal({DEFAULT_DECIMAL[0]},{DEFAULT_DECIMAL[1]})"),
]


@dataclass(frozen=True, slots=True)
class HiveType:
    """A parsed Hive column type; `str()` is its canonical name (Hive's TypeInfo.getTypeName).

    `kind` is the type's name without parameters (`int`, `decimal`, `varchar`, `array`, `struct`, ...);
    `precision`/`scale` are set for decimal, `length` for char and varchar; `children` are the element type (array),
    key and value types (map), field types (struct, named by `field_names`) or member types (uniontype).
    """

    kind: str
    precision: int | None = None
    scale: int | None = None
    length: int | None = None
    children: tuple[HiveType, ...] = ()
    field_names: tuple[str, ...] = ()

    @property
    def is_complex(self) -> bool:
        """array, map, struct or uniontype."""
        return self.kind in COMPLEX_KINDS

    @property
    def fields(self) -> tuple[tuple[str, HiveType], ...]:
        """(name, type) of each struct field; empty for other kinds."""
        return tuple(zip(self.field_names, self.children))

    def walk(self) -> Iterator[HiveType]:
        """This type and every type nested in it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    def __str__(self) -> str:
        return self._text(hive_field_name)

    def orc_name(self) -> str:
        """The type as ORC's parser (pyorc, ORC's TypeDescription) reads it: struct field names that are not plain
        identifiers back-quoted."""
        return self._text(_orc_name)

    def _text(self, name: Callable[[str], str]) -> str:
        if self.kind == "decimal":
            return f"decimal({self.precision},{self.scale})"
        if self.kind in ("varchar", "char"):
            return f"{self.kind}({self.length})"
        if self.kind == "struct":
            return "struct<" + ",".join(f"{name(field)}:{child._text(name)}" for field, child in self.fields) + ">"
        if self.children:
            return f"{self.kind}<" + ",".join(child._text(name) for child in self.children) + ">"
        return self.kind

    def to_arrow(self) -> pa.DataType:
        """The Arrow type acid_core reads and writes this Hive type as (the module docstring gives the choices)."""
        if self.kind == "decimal":
            return pa.decimal128(self.precision, self.scale)
        if self.kind == "array":
            return pa.list_(self.children[0].to_arrow())
        if self.kind == "map":
            return pa.map_(self.children[0].to_arrow(), self.children[1].to_arrow())
        if self.kind == "struct":
            return pa.struct([pa.field(name, child.to_arrow()) for name, child in self.fields])
        if self.kind == "uniontype":  # as pyarrow's ORC reader names the members
            return pa.sparse_union([pa.field(f"_union_{i}", child.to_arrow()) for i, child in enumerate(self.children)])
        return _ARROW[self.kind]


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _orc_name(name: str) -> str:
    """A struct field name as ORC's parser needs it: back-quoted unless letters, digits and underscores."""
    return name if _PLAIN_NAME.fullmatch(name) else _quoted(name)


def hive_field_name(name: str) -> str:
    """A struct field name as a canonical type name holds it: unquoted as Hive prints it (`struct<x y:int>`),
    back-quoted only where it could not be read back (a name holding one of `` ` < > , : ( ) ``)."""
    return _quoted(name) if _UNREADABLE_NAME.search(name) or name != name.strip() else name


def _orc_spelling(text: str) -> str:
    """`text` in the spelling ORC's parser accepts: lowercase keywords, no spaces, field names quoted as needed."""
    quoted = _FIELD_NAME.sub(lambda m: m.group(0) if m.group(1) is None  # names quoted, so they keep their case
                             else f"{m.group(1)}{_quoted(m.group(2).strip())}:", text)
    parts = _QUOTED.split(quoted)
    for index in range(0, len(parts), 2):  # outside back-quoted names
        part = parts[index].lower()
        for pattern, replacement in _SPELLINGS:
            part = pattern.sub(replacement, part)
        parts[index] = part
    return "".join(parts).strip()


def _from_orc(description: pyorc.TypeDescription, text: str) -> HiveType:
    kind = _KIND_BY_ORC.get(description.kind)
    if kind is None:
        raise InvalidTypeError(f"Hive type {text!r}: ORC type {description} has no Hive equivalent")
    # each kind is its own subclass of TypeDescription (the one that has its parameters and children)
    if kind == "decimal":
        assert isinstance(description, pyorc.Decimal)
        precision, scale = description.precision, description.scale
        if not 1 <= precision <= MAX_DECIMAL_PRECISION or not 0 <= scale <= precision:
            raise InvalidTypeError(f"Hive type {text!r}: decimal({precision},{scale}) needs a precision of 1.."
                                   f"{MAX_DECIMAL_PRECISION} and a scale of 0..precision")
        return HiveType(kind, precision=precision, scale=scale)
    if kind in ("varchar", "char"):
        assert isinstance(description, (pyorc.VarChar, pyorc.Char))
        limit = MAX_VARCHAR_LENGTH if kind == "varchar" else MAX_CHAR_LENGTH
        if not 1 <= description.max_length <= limit:
            raise InvalidTypeError(f"Hive type {text!r}: {kind}({description.max_length}) needs a length of "
                                   f"1..{limit}")
        return HiveType(kind, length=description.max_length)
    if kind == "array":
        assert isinstance(description, pyorc.Array)
        return HiveType(kind, children=(_from_orc(description.type, text),))
    if kind == "map":
        assert isinstance(description, pyorc.Map)
        return HiveType(kind, children=(_from_orc(description.key, text), _from_orc(description.value, text)))
    if kind == "struct":
        assert isinstance(description, pyorc.Struct)
        names = tuple(description.fields)
        if not names:
            raise InvalidTypeError(f"Hive type {text!r}: a struct needs at least one field")
        return HiveType(kind, children=tuple(_from_orc(description.fields[n], text) for n in names),
                        field_names=names)
    if kind == "uniontype":
        assert isinstance(description, pyorc.Union)
        return HiveType(kind, children=tuple(_from_orc(member, text) for member in description.cont_types))
    return HiveType(kind)


@functools.lru_cache(maxsize=4096)
def parse_type(text: str) -> HiveType:
    """The Hive type a type string names (module docstring: the spellings accepted).

    Raises:
        InvalidTypeError: the string is not a Hive type, or its parameters are outside Hive's limits; the message
            names the string.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidTypeError(f"Hive type {text!r} is empty: give a type such as int, decimal(10,2) or array<string>")
    spelling = _orc_spelling(text)
    try:
        description = pyorc.TypeDescription.from_string(spelling)
    except (ValueError, RuntimeError) as exc:
        raise InvalidTypeError(f"Hive type {text!r} is not valid ({exc}); expected a type such as int, decimal(10,2), "
                               "varchar(20), array<int>, map<string,int> or struct<a:int>") from None
    parsed = _from_orc(description, text)
    written = sum(part.count(":") for part in _QUOTED.split(spelling)[::2])  # one ':' per struct field written
    if written != sum(len(node.field_names) for node in parsed.walk()):  # pyorc keeps the last of repeated names
        raise InvalidTypeError(f"Hive type {text!r}: a struct names the same field twice")
    return parsed


def arrow_struct(columns) -> pa.StructType:
    """The Arrow struct of the `row` of events for these table columns (anything with `.name` and `.type`)."""
    return pa.struct([pa.field(c.name, parse_type(c.type).to_arrow()) for c in columns])


__all__ = ["COMPLEX_KINDS", "INTEGER_KINDS", "MAX_CHAR_LENGTH", "MAX_DECIMAL_PRECISION", "MAX_VARCHAR_LENGTH",
           "TEXT_KINDS", "TIMESTAMP_LOCAL_TZ", "HiveType", "arrow_struct", "hive_field_name", "parse_type"]
