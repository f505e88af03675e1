"""A metastore handed to another process (a compaction's Spark driver) goes through its environment with the password
apart from the URL (`engine.driver_environment`), and `engine.default_url` there puts them together again."""

from __future__ import annotations

import pytest

from acid_core.errors import MetastoreError
from acid_core.metastore.engine import ENV_PASSWORD, ENV_URL, default_url, driver_environment


def test_the_password_travels_apart_from_the_url_and_comes_back(monkeypatch):
    environment = driver_environment("postgresql+psycopg2://acid:p%40ss@db.example:5432/acid_metastore")
    assert environment == {ENV_URL: "postgresql+psycopg2://acid@db.example:5432/acid_metastore", ENV_PASSWORD: "p@ss"}
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert default_url() == "postgresql+psycopg2://acid:p%40ss@db.example:5432/acid_metastore"


def test_a_url_without_a_password_does_not_take_an_inherited_one(monkeypatch):
    monkeypatch.setenv(ENV_PASSWORD, "the Airflow worker's own")
    environment = driver_environment("sqlite:////data/metastore.db")
    assert environment == {ENV_URL: "sqlite:////data/metastore.db", ENV_PASSWORD: ""}
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert default_url() == "sqlite:////data/metastore.db"


def test_an_unparsable_url_is_refused_without_showing_it():
    with pytest.raises(MetastoreError, match="cannot be parsed"):
        driver_environment("not a url at all")


def test_a_metastore_url_sqlalchemy_cannot_parse_is_refused_naming_the_fault_without_its_password():
    from acid_core.metastore.engine import Database

    with pytest.raises(MetastoreError, match="is not a SQLAlchemy URL") as refused:
        Database("postgresql://acid:s3cret@db.example:notaport/acid_metastore")
    message = str(refused.value)
    assert "s3cret" not in message and "acid:***@db.example" in message and "notaport" in message
    assert refused.value.__cause__ is None and "\n" not in message
