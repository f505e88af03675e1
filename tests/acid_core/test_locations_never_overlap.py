"""A table's location is its own (issue: reliability, "locations never overlap"): creating a table at another table's
location, inside it, around it, at a database's directory or at the warehouse root is refused with one line naming
the other owner, and nothing is created; DROP TABLE refuses when another table's location lies inside the dropped
one's, so neither PURGE nor the trash takes another table's files. Through the catalog API and `acid sql` (Spark's
CREATE TABLE is `acid sql`'s), on SQLite and PostgreSQL.
"""

from __future__ import annotations

import io
import os

import pytest
import sqlalchemy as sa

from acid_core.errors import AcidError, MetastoreError
from acid_core.metastore import schema

ACID = {"transactional": "true"}
COLUMNS = [("id", "int")]


def _sql(ms, text: str) -> str:
    from acid_cli.sql import run_script

    out = io.StringIO()
    run_script(text, metastore=ms, out=out)
    return out.getvalue()


@pytest.fixture
def places(ms, tmp_path):
    """Table `default.a` at a location of its own under tmp_path/data, and a database `other`."""
    data = str(tmp_path / "data")
    ms.catalog.create_table("default", "a", COLUMNS, params=ACID, location=f"{data}/a")
    ms.catalog.create_database("other")
    return {"data": data, "warehouse": ms.catalog.warehouse, "other": ms.catalog.get_database("other").location}


@pytest.mark.parametrize("where, words", [
    ("{data}/a", "is the location of table default.a"),
    ("{data}/a/", "is the location of table default.a"),
    ("{data}/a/inner", "is inside the location of table default.a"),
    ("{data}", "contains the location of table default.a"),
    ("{warehouse}", "is the directory of database default"),
    ("{other}", "is the directory of database other"),
    ("/", "contains the location of table default.a"),
])
def test_a_table_location_that_overlaps_another_owner_is_refused_and_nothing_is_created(ms, places, where, words):
    location = where.format(**places)

    with pytest.raises(MetastoreError, match="give the table a location of its own") as refused:
        ms.catalog.create_table("default", "b", COLUMNS, params=ACID, location=location)

    assert words in str(refused.value) and "\n" not in str(refused.value)
    assert ms.catalog.list_tables("default") == ["a"]


def test_names_that_only_look_alike_are_not_refused(ms, places):
    """`_` and `%` in a path are characters, not patterns: a_b is not aXb, and siblings do not overlap."""
    data = places["data"]
    ms.catalog.create_table("default", "x", COLUMNS, params=ACID, location=f"{data}/aXb/t")
    ms.catalog.create_table("default", "y", COLUMNS, params=ACID, location=f"{data}/a_b")
    ms.catalog.create_table("default", "z", COLUMNS, params=ACID, location=f"{data}/a2")  # beside a, not in it
    ms.catalog.create_table("other", "inside_db", COLUMNS, params=ACID)  # a database's directory holds its tables
    assert sorted(ms.catalog.list_tables("default")) == ["a", "x", "y", "z"]


def test_acid_sql_refuses_the_location_in_one_line_and_creates_nothing(ms, places):
    with pytest.raises(AcidError) as refused:
        _sql(ms, f"CREATE TABLE b (id int) STORED AS ORC LOCATION '{places['data']}/a/x' "
                 "TBLPROPERTIES ('transactional'='true')")
    assert "is inside the location of table default.a" in str(refused.value)
    assert ms.catalog.list_tables("default") == ["a"]
    assert not os.path.exists(f"{places['data']}/a/x")


def test_drop_refuses_a_table_whose_location_holds_another_tables_files(ms, places):
    """A layout made before the check (or by another tool): `around` around `a`. Dropping `around`, with PURGE or to
    the trash, would take a's files: refused, both tables and their files stay."""
    data = places["data"]
    ms.catalog.create_table("default", "around", COLUMNS, params=ACID, location=f"{data}/around")
    ms.db.run("move around around a", lambda conn: conn.execute(schema.tbls.update().where(
        schema.tbls.c.TBL_NAME == "around").values(LOCATION=data)))
    os.makedirs(f"{data}/a/delta_0000001_0000001_0000", exist_ok=True)

    for statement in ("DROP TABLE around PURGE", "DROP TABLE around"):
        with pytest.raises(AcidError, match=r"cannot drop default.around: the location of table default.a "):
            _sql(ms, statement)
        assert sorted(ms.catalog.list_tables("default")) == ["a", "around"]
        assert os.path.isdir(f"{data}/a/delta_0000001_0000001_0000")

    _sql(ms, "DROP TABLE a PURGE")  # once a is gone, around holds nobody else's files
    _sql(ms, "DROP TABLE around PURGE")
    assert ms.catalog.list_tables("default") == []
    assert ms.db.run("count", lambda conn: conn.execute(sa.select(sa.func.count()).select_from(schema.tbls))
                     .scalar_one(), write=False) == 0


@pytest.mark.parametrize("where, words", [
    ("{data}/a", "is the location of table default.a"),
    ("{data}/a/inner", "is inside the location of table default.a"),
    ("{data}", "contains the location of table default.a"),
    ("{other}", "is the directory of database other"),
    ("{warehouse}", "is the warehouse root"),
])
def test_a_database_directory_that_overlaps_another_owner_is_refused(ms, places, where, words):
    location = where.format(**places)
    before = sorted(ms.catalog.list_databases())
    with pytest.raises(MetastoreError) as refused:
        ms.catalog.create_database("d2", location=location)
    assert words in str(refused.value) and "\n" not in str(refused.value)
    assert sorted(ms.catalog.list_databases()) == before
    with pytest.raises(AcidError, match=words):
        _sql(ms, f"CREATE DATABASE d3 LOCATION '{location}'")
    assert sorted(ms.catalog.list_databases()) == before
