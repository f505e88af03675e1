"""Table and database properties: what the catalog refuses, and the values of the settings this system reads.

Two levels, because Hive has two:

- The catalog enforces, on every create and alter whoever calls it, what Hive's metastore refuses
  (TransactionalValidationListener): 'transactional' other than true/false, an unknown 'transactional_properties'
  on a transactional table, and, on ALTER TABLE, making a transactional table non-transactional or changing its
  'transactional_properties'. Also what our readers could not use ('bucketing_version' other than 1 or 2) and what
  the metastore's columns cannot hold (an empty or too long key, a missing value).
- `check_settings`: the values of the settings this system acts on (every property of the registry,
  `acid_core.settings`: no_auto_compaction, no_cleanup, the compactorthreshold.* numbers, the compaction pool, ...,
  within its bounds) and the table kinds it can write (full ACID only). Hive's
  metastore stores any string there and its Initiator reports a bad one when it reads it (ours does too); the
  statement front ends (`acid sql`, the acid_table_settings DAG) call this first, so a typo is refused where it is
  typed.

Keys match case-insensitively, as Hive matches them. Every error is an `InvalidPropertyError` naming the property,
the value and what is allowed. Cost: linear in the number of properties; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from acid_core import settings
from acid_core.errors import InvalidPoolNameError, InvalidPropertyError, InvalidSettingError, NoSuchObjectError
from acid_core.metastore.pools import POOL_PROPERTY, check_pool_name


def _property_key(setting: settings.Setting[object]) -> str:
    """The property key of a registry setting that is a table property."""
    assert setting.property_key is not None, f"setting {setting.name} is a table property"
    return setting.property_key


TRANSACTIONAL = "transactional"
TRANSACTIONAL_PROPERTIES = "transactional_properties"
NO_AUTO_COMPACTION = _property_key(settings.NO_AUTO_COMPACTION)
NO_CLEANUP = _property_key(settings.NO_CLEANUP)
BUCKETING_VERSION = "bucketing_version"
DELTA_NUM_PROPERTY = _property_key(settings.DELTA_NUM_THRESHOLD)
DELTA_PCT_PROPERTY = _property_key(settings.DELTA_PCT_THRESHOLD)
REBALANCE_BUCKET_SIZE_PROPERTY = _property_key(settings.REBALANCE_BUCKET_SIZE)
# Hive's `compactor.` prefix for a compaction job's own settings (like compactor.mapreduce.map.memory.mb): the
# Python worker memory cap of the Spark job (spark.executor.pyspark.memory, an address-space limit).
PYSPARK_MEMORY_PROPERTY = _property_key(settings.PYSPARK_MEMORY)
PYSPARK_MEMORY_CONF = PYSPARK_MEMORY_PROPERTY.removeprefix("compactor.")
# the registry gives pyspark_memory a minimum
assert settings.PYSPARK_MEMORY.bounds is not None and settings.PYSPARK_MEMORY.bounds.minimum is not None
MIN_PYSPARK_MEMORY_MIB = int(settings.PYSPARK_MEMORY.bounds.minimum)  # below this a Python worker cannot load pyarrow
# Any `compactor.spark.<name>` property sets `spark.<name>` for the table's compaction jobs, for the names below:
# resources and tuning only. Settings that run code or pass environment or paths (extra Java options, class paths,
# jars, files, plugins, *Env.*) stay with the platform's operator: a table owner must not reach the job's credentials.
SPARK_PROPERTY_PREFIX = "compactor.spark."
ALLOWED_SPARK_CONF_PREFIXES = ("spark.executor.", "spark.driver.memory", "spark.driver.cores",
                               "spark.driver.maxResultSize", "spark.task.cpus", "spark.yarn.queue",
                               "spark.dynamicAllocation.", "spark.sql.shuffle.partitions", "spark.default.parallelism",
                               "spark.memory.", "spark.network.timeout", "spark.kubernetes.executor.request.",
                               "spark.kubernetes.executor.limit.", "spark.cores.max")
FORBIDDEN_SPARK_CONF_PARTS = ("extrajavaoptions", "extraclasspath", "extralibrarypath", "env.", "plugins",
                              "userclasspathfirst", "decommission.script")
# Hive's job queue of compaction jobs (HiveConf hive.compactor.job.queue; per table with the `compactor.` prefix,
# or MapReduce's own name): the YARN queue of the Spark job.
JOB_QUEUE_PROPERTIES = (settings.JOB_QUEUE.property_key, settings.JOB_QUEUE.hive_key, "compactor.mapred.job.queue.name")
JOB_QUEUE_CONF = "spark.yarn.queue"
# Property keys match case-insensitively (as Hive's do); Spark's setting names are case-sensitive: a name is written
# in lower case with these camel-case words of Spark's own names restored.
_SPARK_CAMEL_WORDS = {word.lower(): word for word in (
    "dynamicAllocation", "maxResultSize", "memoryOverhead", "memoryOverheadFactor", "minExecutors", "maxExecutors",
    "initialExecutors", "executorIdleTimeout", "cachedExecutorIdleTimeout", "schedulerBacklogTimeout",
    "sustainedSchedulerBacklogTimeout", "shuffleTracking", "executorAllocationRatio", "offHeap", "storageFraction",
    "heartbeatInterval", "adaptive", "coalescePartitions", "advisoryPartitionSizeInBytes", "skewJoin")}
_SPARK_VALUE = re.compile(r"[^\x00-\x1f\x7f]{1,1000}")

INSERT_ONLY = "insert_only"
FULL_ACID_KINDS = ("default", "split_update")  # what this system reads and writes ('split_update': Hive 2's name)
KNOWN_KINDS = ("default", INSERT_ONLY, "split_update")  # Hive 3's two, and Hive 2's split_update

TABLE_KEY_LENGTH = 256  # TABLE_PARAMS.PARAM_KEY
DATABASE_KEY_LENGTH = 180  # DATABASE_PARAMS.PARAM_KEY
DATABASE_VALUE_LENGTH = 4000  # DATABASE_PARAMS.PARAM_VALUE


def find(params: Mapping[str, str], key: str) -> str | None:
    """The value of `key`, matched case-insensitively (None when absent)."""
    for name, value in params.items():
        if name.lower() == key.lower():
            return value
    return None


def is_true(value: str | None) -> bool:
    """Hive's `"true".equalsIgnoreCase(value)`: anything else, a missing value included, is false."""
    return (value or "").lower() == "true"


def normalized(what: str, params: Mapping[str, object] | None, *, key_length: int,
               value_length: int | None = None) -> dict[str, str]:
    """The properties as strings, one entry per key: of two spellings of one key, the last one wins (as ALTER does).

    Raises:
        InvalidPropertyError: an empty or too long key, a missing (None) or too long value.
    """
    found: dict[str, tuple[str, str]] = {}
    for key, value in (params or {}).items():
        key = str(key)
        if not key.strip() or len(key) > key_length:
            raise InvalidPropertyError(f"{what}: property key {key!r} must be 1 to {key_length} characters")
        if value is None:
            raise InvalidPropertyError(f"{what}: property {key!r} has no value; give a string ('' for empty)")
        value = str(value)
        if value_length is not None and len(value) > value_length:
            raise InvalidPropertyError(f"{what}: the value of property {key!r} is {len(value)} characters long; "
                                       f"the metastore holds at most {value_length}")
        found[key.lower()] = (key, value)
    return dict(found.values())


def _check_values(what: str, params: Mapping[str, str], *, transactional: bool) -> None:
    """The catalog's value rules for the properties being written to a table that is (or stays) `transactional`."""
    for key, value in params.items():
        name = key.lower()
        if name == TRANSACTIONAL and value.lower() not in ("true", "false"):
            raise InvalidPropertyError(f"{what}: property {key!r} must be 'true' or 'false', got {value!r}")
        if name == TRANSACTIONAL_PROPERTIES and transactional and value.lower() not in KNOWN_KINDS:
            raise InvalidPropertyError(f"{what}: property {key!r} of a transactional table must be one of "
                                       f"{', '.join(map(repr, KNOWN_KINDS))}, got {value!r}")
        if name == PYSPARK_MEMORY_PROPERTY:
            spark_memory_mib(value, what=f"{what}: property {key!r}")
        if name == BUCKETING_VERSION and value not in ("1", "2"):
            raise InvalidPropertyError(f"{what}: property {key!r} must be 1 or 2 (Hive's bucketing versions), "
                                       f"got {value!r}")


def check_new_table(table: str, params: Mapping[str, object] | None) -> dict[str, str]:
    """The properties of a table being created, checked as Hive's metastore checks them; returns them normalized.

    Raises:
        InvalidPropertyError: see the module docstring.
    """
    result = normalized(f"table {table}", params, key_length=TABLE_KEY_LENGTH)
    _check_values(f"table {table}", result, transactional=is_true(find(result, TRANSACTIONAL)))
    return result


def _kind(params: Mapping[str, str]) -> str:
    return (find(params, TRANSACTIONAL_PROPERTIES) or "default").lower()


def is_full_acid(params: Mapping[str, str]) -> bool:
    """'transactional'='true' and not insert-only: a table this system reads, writes and compacts."""
    return is_true(find(params, TRANSACTIONAL)) and _kind(params) != INSERT_ONLY


def changed_table(table: str, current: Mapping[str, str], *, set_params: Mapping[str, object] | None = None,
                  unset: Sequence[str] = (), if_exists: bool = False, transitions: bool = True) -> dict[str, str]:
    """A table's properties after ALTER TABLE ... SET / UNSET TBLPROPERTIES, checked; `current` is left as it is.

    A key set replaces the current one that differs from it only in case. With `transitions` (ALTER TABLE), Hive's
    rules for a full ACID table apply too (TransactionalValidationListener.handleAlterTableTransactionalProp):
    once transactional, always transactional, and its 'transactional_properties' never change (insert-only tables
    are exempt, as in Hive).

    Raises:
        InvalidPropertyError: a value the catalog refuses, a key both set and unset, or a change Hive forbids.
        NoSuchObjectError: a key to unset is not there (unless `if_exists`).
    """
    what = f"table {table}"
    wanted = normalized(what, set_params, key_length=TABLE_KEY_LENGTH)
    both = {key.lower() for key in wanted} & {key.lower() for key in unset}
    if both:
        raise InvalidPropertyError(f"{what}: properties {sorted(both)} are both set and unset in one change")
    replaced = {key.lower() for key in wanted}
    after = {key: value for key, value in current.items() if key.lower() not in replaced}
    after.update(wanted)
    for key in unset:
        matches = [old for old in after if old.lower() == key.lower()]
        if not matches and not if_exists:
            raise NoSuchObjectError(f"table {table} has no property {key!r}")
        for old in matches:
            del after[old]
    transactional_after = is_true(find(after, TRANSACTIONAL))
    checked = dict(wanted)
    converting = transactional_after and not is_true(find(current, TRANSACTIONAL))
    if converting and find(wanted, TRANSACTIONAL_PROPERTIES) is None and (
            kind_after := find(after, TRANSACTIONAL_PROPERTIES)):
        checked[TRANSACTIONAL_PROPERTIES] = kind_after
    _check_values(what, checked, transactional=transactional_after)
    if transitions and is_full_acid(current):
        if any(key.lower() in (TRANSACTIONAL, TRANSACTIONAL_PROPERTIES) for key in unset):
            raise InvalidPropertyError(f"cannot unset 'transactional' or 'transactional_properties' of ACID table "
                                       f"{table}: it stays transactional, of the kind it was created as")
        if not transactional_after:
            raise InvalidPropertyError(f"{what}: a transactional table cannot be made non-transactional "
                                       f"('transactional'={find(after, TRANSACTIONAL)!r}); Hive refuses it too")
        if _kind(after) != _kind(current):
            raise InvalidPropertyError(f"{what}: 'transactional_properties' cannot change from {_kind(current)!r} to "
                                       f"{_kind(after)!r} after the table is created (Hive refuses it too)")
    return after


def check_database(database: str, params: Mapping[str, object] | None) -> dict[str, str]:
    """Database properties (DBPROPERTIES), normalized. Hive puts no rule on their values.

    Raises:
        InvalidPropertyError: an empty or too long key, a missing or too long value.
    """
    return normalized(f"database {database}", params, key_length=DATABASE_KEY_LENGTH,
                      value_length=DATABASE_VALUE_LENGTH)


def spark_conf_of(key: str, value: str, *, what: str) -> tuple[str, str] | None:
    """The Spark setting a compaction property stands for (`compactor.spark.<name>` -> `spark.<name>`, a job queue
    property -> spark.yarn.queue), checked; None for any other property.

    Raises:
        InvalidPropertyError: the setting is not one a table may choose, or its value is empty, too long or holds a
            control character.
    """
    name = key.lower()
    if name in JOB_QUEUE_PROPERTIES:
        conf = JOB_QUEUE_CONF
    elif name.startswith(SPARK_PROPERTY_PREFIX) and len(name) > len(SPARK_PROPERTY_PREFIX):
        conf = "spark." + ".".join(_SPARK_CAMEL_WORDS.get(word, word)
                                   for word in name.strip()[len(SPARK_PROPERTY_PREFIX):].split("."))
    else:
        return None
    lowered = conf.lower()
    if (not lowered.startswith(tuple(p.lower() for p in ALLOWED_SPARK_CONF_PREFIXES))
            or any(part in lowered for part in FORBIDDEN_SPARK_CONF_PARTS)):
        raise InvalidPropertyError(f"{what} property {key!r}: {conf} is not a Spark setting a table may choose for "
                                   "its compactions (resources and tuning only: spark.executor.*, spark.driver.memory"
                                   "/cores, spark.task.cpus, spark.yarn.queue, spark.dynamicAllocation.*, ...)")
    text = str(value).strip()
    if not _SPARK_VALUE.fullmatch(text):
        raise InvalidPropertyError(f"{what} property {key!r} must be 1 to 1000 printable characters, got {value!r}")
    if conf == PYSPARK_MEMORY_CONF:
        spark_memory_mib(text, what=f"{what} property {key!r}")
    return conf, text


def spark_memory_mib(text: str, *, what: str) -> int:
    """A Spark memory size (`768m`, `2g`, `2048`: MiB without a unit, as spark.executor.pyspark.memory reads it).

    Raises:
        InvalidPropertyError: not a size, or below the registry's minimum (512 MiB).
    """
    try:
        return settings.memory_mib(text, what=what, minimum=MIN_PYSPARK_MEMORY_MIB,
                                   why=settings.PYSPARK_MEMORY.why_minimum)
    except InvalidSettingError as exc:
        raise InvalidPropertyError(str(exc)) from None


def check_settings(params: Mapping[str, str], *, what: str = "table") -> None:
    """The values of the settings this system acts on, as a statement front end checks them before the catalog.

    Raises:
        InvalidPropertyError: a value a setting of the registry (`acid_core.settings.for_property`) does not allow,
            in one line naming the property, the value and what is allowed (a boolean other than 'true' / 'false', a
            number out of its range, a compaction pool name no pool may have, ...), 'transactional' other than
            'true' / 'false', or a table kind other than full ACID (insert-only tables are not supported).
    """
    for key, value in params.items():
        name, text = key.lower(), str(value)
        if name == TRANSACTIONAL and text.lower() not in ("true", "false"):
            raise InvalidPropertyError(f"{what} property {name!r} must be 'true' or 'false', got {text!r}")
        if name == TRANSACTIONAL_PROPERTIES and text.lower() not in FULL_ACID_KINDS:
            raise InvalidPropertyError(f"transactional_properties={text!r} is not supported: only full ACID tables "
                                       "('default') are (insert-only tables are not)")
        if spark_conf_of(key, text, what=what) is not None:  # the job's Spark settings: checked there
            continue
        setting = settings.for_property(name)
        if setting is settings.COMPACTION_POOL:
            if text.strip():  # blank: no pool, as Hive reads it
                try:
                    check_pool_name(text, what=f"{what} property {POOL_PROPERTY!r}: pool name")
                except InvalidPoolNameError as exc:
                    raise InvalidPropertyError(str(exc)) from None
        elif setting is not None:
            try:
                setting.parse(text, what=f"{what} property {name!r}")
            except InvalidSettingError as exc:
                raise InvalidPropertyError(str(exc)) from None
