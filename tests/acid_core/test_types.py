"""acid_core.format.types: Hive type strings parsed (on pyorc's parser) into one model, named canonically, mapped to Arrow."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.orc as pa_orc
import pyorc
import pytest

from acid_core.errors import InvalidTypeError, SchemaMismatchError
from acid_core.format.orc_events import Column
from acid_core.format.types import HiveType, arrow_struct, parse_type

PRIMITIVES = {"tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
              "float": pa.float32(), "double": pa.float64(), "boolean": pa.bool_(), "string": pa.string(),
              "binary": pa.binary(), "date": pa.date32(), "timestamp": pa.timestamp("ns"),
              "timestamp with local time zone": pa.timestamp("ns", tz="UTC")}


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitives(name):
    parsed = parse_type(name)
    assert parsed == HiveType(name) and str(parsed) == name and not parsed.is_complex
    assert parsed.to_arrow() == PRIMITIVES[name]
    assert parse_type(name.upper()) == parsed


@pytest.mark.parametrize("text, canonical", [
    ("INTEGER", "int"), (" Double  Precision ", "double"), ("decimal", "decimal(10,0)"), ("DEC(7)", "decimal(7,0)"),
    ("numeric( 38 , 38 )", "decimal(38,38)"), ("Timestamp", "timestamp"),
    ("map < string , array < int > >", "map<string,array<int>>"),
])
def test_hive_spellings_are_normalised(text, canonical):
    assert str(parse_type(text)) == canonical


def test_decimal_char_and_varchar_parameters():
    assert parse_type("decimal(12,3)") == HiveType("decimal", precision=12, scale=3)
    assert parse_type("decimal(12,3)").to_arrow() == pa.decimal128(12, 3)
    assert parse_type("varchar(20)") == HiveType("varchar", length=20)
    assert parse_type("char(4)") == HiveType("char", length=4)
    assert str(parse_type("VARCHAR(65535)")) == "varchar(65535)" and str(parse_type("char(255)")) == "char(255)"
    # Arrow has no fixed-length strings; the event-file writer keeps the ORC types
    assert parse_type("char(4)").to_arrow() == parse_type("varchar(4)").to_arrow() == pa.string()


def test_nested_types():
    parsed = parse_type("map<string,struct<a:int,B:array<decimal(5,2)>,`x y`:uniontype<int,string>>>")
    key, value = parsed.children
    assert parsed.kind == "map" and key == HiveType("string") and value.kind == "struct"
    assert value.field_names == ("a", "B", "x y")  # field names keep their case
    assert value.fields[1] == ("B", HiveType("array", children=(HiveType("decimal", precision=5, scale=2),)))
    assert str(parsed) == "map<string,struct<a:int,B:array<decimal(5,2)>,x y:uniontype<int,string>>>"
    assert parsed.orc_name() == "map<string,struct<a:int,B:array<decimal(5,2)>,`x y`:uniontype<int,string>>>"
    assert [t.kind for t in parsed.walk()] == ["map", "string", "struct", "int", "array", "decimal", "uniontype",
                                                "int", "string"]
    assert parsed.to_arrow() == pa.map_(pa.string(), pa.struct([
        ("a", pa.int32()), ("B", pa.list_(pa.decimal128(5, 2))),
        ("x y", pa.sparse_union([pa.field("_union_0", pa.int32()), pa.field("_union_1", pa.string())]))]))


@pytest.mark.parametrize("text", [
    "struct<a:int,b:array<struct<c:string,d:map<int,date>>>>", "struct<x y:int>", "struct<`a:b`:int,`c``d`:int>",
    "array<map<bigint,array<varchar(3)>>>", "uniontype<int,string,array<bigint>>",
])
def test_canonical_names_parse_back_to_the_same_type(text):
    parsed = parse_type(text)
    assert parse_type(str(parsed)) == parsed and parse_type(parsed.orc_name()) == parsed


def test_arrow_mapping_is_what_pyarrows_orc_reader_returns():
    """A file written by pyorc with every type reads back through pyarrow with exactly the Arrow types of the model."""
    columns = [Column(f"c{i}", text) for i, text in enumerate(
        [*PRIMITIVES, "decimal(12,3)", "char(4)", "varchar(9)", "array<int>", "map<string,bigint>",
         "struct<x:int,y:array<string>>", "uniontype<int,string>"])]
    stream = io.BytesIO()
    writer = pyorc.Writer(stream, "struct<" + ",".join(f"{c.name}:{parse_type(c.type).orc_name()}" for c in columns)
                          + ">")
    writer.close()
    stream.seek(0)
    assert pa_orc.ORCFile(stream).schema == pa.schema(list(arrow_struct(columns)))


@pytest.mark.parametrize("text, problem", [
    ("", "empty"), ("not_a_type", "not valid"), ("array<int", "not valid"), ("int extra", "not valid"),
    ("decimal(a)", "not valid"), ("map<int>", "not valid"), ("uniontype", "not valid"), ("varchar", "not valid"),
    ("decimal(39,2)", "precision of 1..38"), ("decimal(5,6)", "scale of 0..precision"),
    ("varchar(0)", "length of 1..65535"), ("char(256)", "length of 1..255"), ("struct<>", "at least one field"),
    ("struct<a:int,a:string>", "same field twice"),
])
def test_bad_type_strings_raise_one_clear_error(text, problem):
    with pytest.raises(InvalidTypeError, match=problem) as caught:
        parse_type(text)
    message = str(caught.value)
    assert f"Hive type {text!r}" in message and "\n" not in message
    assert isinstance(caught.value, SchemaMismatchError)


def test_types_are_frozen_values():
    parsed = parse_type("decimal(10,2)")
    with pytest.raises(AttributeError):
        parsed.scale = 3  # type: ignore[misc]
    assert parsed is parse_type("decimal(10,2)") and hash(parsed) == hash(HiveType("decimal", precision=10, scale=2))
