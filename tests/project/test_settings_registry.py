"""The settings registry (acid_core/settings.py) is the one place a setting's key, default, bounds and description
live: README.md's settings table and docs/settings.md are its rendering, every default lies within its bounds, the
property checks refuse what its bounds refuse (in one line naming the key, the value and the range), and the core's
defaults are the registry's. The DAG Params made from it: tests/dags/test_settings_params.py."""

from __future__ import annotations

import difflib
import inspect
from pathlib import Path

import pytest

from acid_core import settings
from acid_core.errors import InvalidPropertyError, InvalidSettingError, UsageError
from acid_core.metastore.properties import check_settings

REPOSITORY = next(parent for parent in Path(__file__).resolve().parents if (parent / "pyproject.toml").is_file())
PROPERTY_SETTINGS = [setting for setting in settings.SETTINGS if setting.property_key]
BOUNDED = [setting for setting in PROPERTY_SETTINGS if setting.bounds is not None and setting.kind != "memory"]


def _differences(expected: str, found: str, name: str) -> str:
    return "".join(difflib.unified_diff(found.splitlines(True), expected.splitlines(True), f"{name} (as it is)",
                                        f"{name} (from the registry)"))


def test_the_readme_settings_table_is_the_registrys():
    text = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    assert settings.README_BEGIN in text and settings.README_END in text, (
        "README.md has lost the comment lines around its settings table; put back the output of "
        "`.venv/bin/python -m acid_core.settings --markdown` in its Settings section")
    start = text.index(settings.README_BEGIN)
    found = text[start:text.index(settings.README_END, start) + len(settings.README_END) + 1]
    assert found == settings.readme_block(), (
        "README.md's settings table differs from acid_core/settings.py: replace it (the lines from "
        f"{settings.README_BEGIN!r} to {settings.README_END!r}) with the output of "
        "`.venv/bin/python -m acid_core.settings --markdown`\n" + _differences(settings.readme_block(), found,
                                                                               "README.md"))


def test_the_settings_page_is_the_registrys():
    found = (REPOSITORY / "docs" / "settings.md").read_text(encoding="utf-8")
    assert found == settings.docs_page(), (
        "docs/settings.md differs from acid_core/settings.py: regenerate it with "
        "`.venv/bin/python -m acid_core.settings --docs > docs/settings.md`\n"
        + _differences(settings.docs_page(), found, "docs/settings.md"))


def test_the_registry_prints_both_tables(capsys):
    assert settings.main(["--markdown"]) == 0
    assert capsys.readouterr().out == settings.readme_block()
    assert settings.main(["--docs"]) == 0
    assert capsys.readouterr().out == settings.docs_page()


@pytest.mark.parametrize("setting", settings.SETTINGS, ids=lambda setting: setting.name)
def test_every_default_lies_within_its_bounds(setting):
    if setting.default is None:
        return
    assert setting.check(setting.default) == setting.default
    if setting.bounds is not None and setting.kind in ("integer", "number"):
        assert setting.bounds.contains(setting.default)
    text = str(setting.default).lower() if setting.kind == "boolean" else str(setting.default)
    assert setting.parse(text) == setting.default  # as a property or environment variable gives it


def test_every_setting_has_one_entry_and_says_where_it_is_set():
    names = [setting.name for setting in settings.SETTINGS]
    assert len(names) == len(set(names))
    for key in ("property_key", "env_var", "hive_key"):
        values = [getattr(setting, key) for setting in settings.SETTINGS if getattr(setting, key)]
        assert len(values) == len(set(values)), key
    for setting in settings.SETTINGS:
        assert setting.scopes, setting.name
        assert setting.section in settings.SECTIONS, setting.name
        assert setting.description and "|" not in setting.description, setting.name
    for dag_id in {dag for setting in settings.SETTINGS for dag in setting.dags}:
        params = [setting.param_name for setting in settings.for_dag(dag_id)]
        assert len(params) == len(set(params)), dag_id


@pytest.mark.parametrize("setting", BOUNDED, ids=lambda setting: setting.name)
def test_the_property_check_refuses_a_value_out_of_bounds_in_one_line(setting):
    bounds = setting.bounds
    outside = bounds.minimum - 1 if bounds.minimum is not None else bounds.maximum + 1
    value = str(int(outside)) if bounds.integer else str(outside)
    with pytest.raises(InvalidPropertyError) as refused:
        check_settings({setting.property_key: value})
    message = str(refused.value)
    assert "\n" not in message
    assert message == f"table property {setting.property_key!r} must be {bounds.words()}, got {value!r}"
    check_settings({setting.property_key.upper(): str(setting.default)})  # keys match in any case, as Hive's do


@pytest.mark.parametrize("setting", [s for s in PROPERTY_SETTINGS if s.kind == "boolean"], ids=lambda s: s.name)
def test_the_property_check_takes_true_or_false_only(setting):
    check_settings({setting.property_key: "TRUE"}, what="database")
    with pytest.raises(InvalidPropertyError, match=rf"^table property '{setting.property_key}' must be 'true' or "
                                                   r"'false', got 'yes'$"):
        check_settings({setting.property_key: "yes"})


def test_a_param_value_out_of_bounds_is_refused_in_words():
    with pytest.raises(InvalidSettingError, match="^fetch_size must be a whole number from 1 to 5000, got 0$"):
        settings.FETCH_SIZE.check(0)
    with pytest.raises(ValueError, match="^small_delta_pct must be a number from 0 to 1, got 1.5$"):
        settings.SMALL_DELTA_PCT.check(1.5)
    with pytest.raises(ValueError, match="^max_compactions must be a whole number from 0 to 10000, got True$"):
        settings.MAX_COMPACTIONS.check(True)
    assert settings.DELTA_PCT_THRESHOLD.check(2) == 2 and settings.TRASH_DIR.check(None) is None
    with pytest.raises(InvalidSettingError, match="^trash_dir must be text of at most 4096 characters, got 4097"):
        settings.TRASH_DIR.check("/" * 4097)


def test_an_environment_variable_is_read_as_make_run_reads_it():
    assert settings.WORKER_THREADS.from_environ({}) == 1
    assert settings.WORKER_THREADS.from_environ({"ACID_WORKER_THREADS": " 4 "}) == 4
    with pytest.raises(UsageError, match=r"^ACID_WORKER_THREADS=0 is out of range; give a number in 1\.\.1024$"):
        settings.WORKER_THREADS.from_environ({"ACID_WORKER_THREADS": "0"})
    with pytest.raises(UsageError, match="^AIRFLOW__API__PORT='x' is not a whole number; give one in 1..65535 "
                                         r"\(or unset it for the default 8080\)$"):
        settings.API_PORT.from_environ({"AIRFLOW__API__PORT": "x"})
    assert settings.DEMO_WRITER.from_environ({"ACID_DEMO_WRITER": "OFF"}) == "off"


def test_the_cores_defaults_are_the_registrys():
    """No default of a setting is typed twice: what the core's functions and constants default to is the entry."""
    from acid_cli.sql.session import Session
    from acid_core.compaction import cleaner, initiator
    from acid_core.format.orc_columnar import DEFAULT_STRIPE_BYTES
    from acid_core.metastore import pools
    from acid_core.metastore.compaction_history import HistoryRetention
    from acid_core.metastore.locks import LockManager
    from acid_core.metastore.txns import DEFAULT_TXN_TIMEOUT_MS
    from acid_core.operations.housekeeping import housekeep
    from acid_core.write.table_write import TableWrite
    from acid_deploy import job_conf

    def default(function, name):
        return inspect.signature(function).parameters[name].default

    cycle = initiator.initiator_cycle
    assert default(cycle, "fetch_size") == settings.FETCH_SIZE.default
    assert default(cycle, "delta_num_threshold") == settings.DELTA_NUM_THRESHOLD.default
    assert default(cycle, "delta_pct_threshold") == settings.DELTA_PCT_THRESHOLD.default
    assert default(cycle, "aborted_threshold") == settings.ABORTED_THRESHOLD.default
    assert default(cycle, "aborted_time_threshold_ms") == settings.ABORTED_TIME_THRESHOLD.default * 1000
    assert default(cycle, "failed_threshold") == settings.FAILED_THRESHOLD.default
    assert default(cycle, "failed_retry_time_ms") == settings.FAILED_RETRY_TIME.default * 1000
    assert default(cycle, "rebalance_bucket_bytes") == settings.REBALANCE_BUCKET_SIZE.default
    assert default(cycle, "budget_bytes") == settings.BUDGET.default
    assert default(cleaner.clean, "retention_ms") == settings.RETENTION.default * 1000
    assert default(cleaner.clean, "retry_retention_ms") == settings.RETRY_RETENTION.default * 1000
    assert default(cleaner.clean, "max_attempts") == settings.MAX_ATTEMPTS.default
    assert default(housekeep, "worker_timeout_ms") == settings.WORKER_TIMEOUT.default * 1000
    assert default(housekeep, "lease_timeout_ms") == settings.LEASE_TIMEOUT.default * 1000
    assert HistoryRetention() == HistoryRetention(
        settings.HISTORY_SUCCEEDED.default, settings.HISTORY_FAILED.default, settings.HISTORY_DID_NOT_INITIATE.default,
        settings.HISTORY_REFUSED.default, settings.HISTORY_TIMEOUT.default * 1000)
    assert DEFAULT_TXN_TIMEOUT_MS == settings.TXN_TIMEOUT.default * 1000
    assert DEFAULT_STRIPE_BYTES == settings.STRIPE_SIZE.default
    assert job_conf.DEFAULT_PYSPARK_MEMORY == settings.PYSPARK_MEMORY.default
    assert pools.POOL_TIMEOUT_MS == settings.POOL_TIMEOUT.default * 1000
    assert default(LockManager.acquire, "timeout_ms") == settings.LOCK_TIMEOUT.default * 1000
    assert default(TableWrite.open, "lock_timeout_ms") == settings.LOCK_TIMEOUT.default * 1000
    assert Session.__dataclass_fields__["wait_timeout_ms"].default == settings.WAIT_TIMEOUT.default * 1000
