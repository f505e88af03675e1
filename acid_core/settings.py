"""Every setting this system reads, in one registry: Hive's key, the table or database property, the DAG Param and the
environment variable it may be set as, its default (Hive's, where Hive has the setting), its bounds and what it does.

The way pyiceberg's `TableProperties` keeps each property beside its default: the DAGs' Params
(`acid_plugin.params.setting_param`), the ACID view's settings form, the property checks
(`acid_core.metastore.properties.check_settings`), the core's defaults and the settings tables of README.md and
docs/settings.md are made from these entries (`python -m acid_core.settings --markdown` prints README's table,
`--docs` the page; tests/project/test_settings_registry.py checks both). Imports only the standard library and
`acid_core.errors`: DAG files read it at parse time. Cost: no I/O.

Over 500 lines for one reason: most of it is the entries themselves (59 settings, each with its names, default,
bounds and description); the code is the entry type, its bounds and checks, and the two renderings.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import KW_ONLY, dataclass
from typing import Generic, TypeVar

from acid_core.errors import InvalidSettingError, UsageError


class Scope(str, enum.Enum):
    """Where a setting may be set."""

    TABLE = "table property"
    DATABASE = "database property"
    REQUEST = "compaction request"  # ALTER TABLE ... COMPACT ... WITH OVERWRITE TBLPROPERTIES, acid_compact's params
    PARAM = "DAG param"
    ENVIRONMENT = "environment variable"
    API = "Python API keyword"


@dataclass(frozen=True, slots=True)
class Bounds:
    """The range of a number setting (both ends included)."""

    minimum: float | None = None
    maximum: float | None = None
    integer: bool = True

    def words(self) -> str:
        """`a whole number from 0 to 100`, `a number >= 0`, ..."""
        kind = "a whole number" if self.integer else "a number"
        if self.minimum is not None and self.maximum is not None:
            return f"{kind} from {_number(self.minimum)} to {_number(self.maximum)}"
        if self.minimum is not None:
            return f"{kind} >= {_number(self.minimum)}"
        if self.maximum is not None:
            return f"{kind} <= {_number(self.maximum)}"
        return kind

    def contains(self, value: object) -> bool:
        """Whether `value` is a finite number (a whole one if `integer`; not a bool) within the bounds."""
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return False
        if self.integer and not float(value).is_integer():
            return False
        return (self.minimum is None or value >= self.minimum) and (self.maximum is None or value <= self.maximum)

    def check(self, name: str, value):
        """`value` (None passes) if it is a number in range, as an int when `integer`.

        Raises:
            InvalidSettingError: `<name> must be <words>, got <value>` (a ValueError too).
        """
        if value is None:
            return None
        if not self.contains(value):
            raise InvalidSettingError(f"{name} must be {self.words()}, got {value!r}")
        return int(value) if self.integer else value


# Spark's memory sizes as spark.executor.pyspark.memory reads them: MiB without a unit
_MEMORY = re.compile(r"(\d{1,9})([kmgt]?)b?", re.IGNORECASE)
_WHOLE = re.compile(r"[+-]?[0-9]+")
KINDS = ("integer", "number", "boolean", "string", "memory")
# The type of a setting's default: int, float, bool, str, or None for a setting that has no default
DefaultT = TypeVar("DefaultT", covariant=True)


def memory_mib(text: object, *, what: str, minimum: int = 0, why: str = "") -> int:
    """A Spark memory size (`768m`, `2g`, `2048`: MiB without a unit) in MiB.

    Raises:
        InvalidSettingError: not a size, or below `minimum` MiB (the message says `why`, when given).
    """
    match = _MEMORY.fullmatch(str(text).strip())
    if match is None:
        raise InvalidSettingError(f"{what} must be a Spark memory size such as '2g' or '768m', got {text!r}")
    number, unit = int(match.group(1)), match.group(2).lower() or "m"
    mib = {"k": number / 1024, "m": number, "g": number * 1024, "t": number * 1024 * 1024}[unit]
    if mib < minimum:
        raise InvalidSettingError(f"{what} must be at least {minimum}m{f' ({why})' if why else ''}, got {text!r}")
    return int(mib)


@dataclass(frozen=True, slots=True)
class Setting(Generic[DefaultT]):
    """One setting: its names in every place it may be set, its kind, default, bounds and what it does.

    `default` is in the setting's `unit` (seconds, bytes, MiB for a memory size's bounds) and is Hive's default
    where Hive has the setting, unless `description` says why ours differs. `dags` are the DAGs that take it as a
    Param named `param` (else `name`), with this default and these bounds.
    """

    name: str
    kind: str
    default: DefaultT
    description: str
    section: str
    _: KW_ONLY
    hive_key: str | None = None
    property_key: str | None = None
    database_property: bool = False  # `property_key` may be set on the database too (the table's wins)
    request_property: bool = False  # a compaction request may set `property_key` for itself (it wins)
    env_var: str | None = None
    dags: tuple[str, ...] = ()
    param: str | None = None
    api: str | None = None  # the Python API's keyword where that is the only way to set it
    bounds: Bounds | None = None
    choices: tuple[str, ...] = ()
    max_length: int | None = None
    unit: str = ""
    why_minimum: str = ""  # said when a memory size is below the minimum
    main: bool = False  # listed in README.md's settings table (all are in docs/settings.md)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"setting {self.name}: kind {self.kind!r} is not one of {KINDS}")

    @property
    def param_name(self) -> str:
        """The name of its DAG Params."""
        return self.param or self.name

    @property
    def key(self) -> str:
        """The name an administrator looks for: Hive's key, else the property, environment variable or Param."""
        return self.hive_key or self.property_key or self.env_var or self.api or self.param_name

    @property
    def scopes(self) -> tuple[Scope, ...]:
        """Where it may be set, most specific first."""
        found = [Scope.REQUEST] if self.request_property else []
        if self.property_key:
            found.append(Scope.TABLE)
        if self.database_property:
            found.append(Scope.DATABASE)
        if self.dags:
            found.append(Scope.PARAM)
        if self.env_var:
            found.append(Scope.ENVIRONMENT)
        if self.api:
            found.append(Scope.API)
        return tuple(found)

    @property
    def default_ms(self) -> int:
        """The default of a setting in seconds, in milliseconds (negative stays -1: off)."""
        if self.unit != "seconds":
            raise ValueError(f"setting {self.name} is not in seconds")
        default = self.default
        assert isinstance(default, (int, float)), f"setting {self.name} in seconds has a number default"
        return int(default) * 1000 if default >= 0 else -1

    def expected(self) -> str:
        """What a value must be, in words: `a whole number >= 0`, `'true' or 'false'`, `on or off`, ..."""
        if self.kind in ("integer", "number"):
            return (self.bounds or Bounds(integer=self.kind == "integer")).words()
        if self.kind == "boolean":
            return "'true' or 'false'"
        if self.kind == "memory":
            assert self.bounds is not None, f"memory setting {self.name} has bounds (its minimum)"
            return f"a Spark memory size such as '2g' or '768m', at least {_number(self.bounds.minimum)}m"
        if self.choices:
            return " or ".join(self.choices)
        return f"text of at most {self.max_length} characters" if self.max_length else "text"

    def parse(self, text: object, *, what: str | None = None):
        """The value of `text` as a property or environment variable gives it: a number, a bool, a memory size's
        text or a string, checked against the bounds, choices and length.

        Raises:
            InvalidSettingError: `<what> must be <expected>, got <text>` in one line (`what` defaults to the key).
        """
        what = what or self.key
        raw = str(text)
        stripped = raw.strip()
        if self.kind == "memory":
            assert self.bounds is not None and self.bounds.minimum is not None, f"memory setting {self.name} has bounds"
            memory_mib(stripped, what=what, minimum=int(self.bounds.minimum), why=self.why_minimum)
            return stripped
        if self.kind == "boolean":
            if stripped.lower() not in ("true", "false"):
                raise InvalidSettingError(f"{what} must be {self.expected()}, got {raw!r}")
            return stripped.lower() == "true"
        if self.kind in ("integer", "number"):
            try:
                value = int(stripped) if _WHOLE.fullmatch(stripped) else float(stripped)
            except ValueError:
                value = None
            if value is None or not (self.bounds or Bounds(integer=self.kind == "integer")).contains(value):
                raise InvalidSettingError(f"{what} must be {self.expected()}, got {raw!r}")
            return int(value) if self.kind == "integer" else float(value)
        if self.choices and stripped.lower() not in self.choices:
            raise InvalidSettingError(f"{what} must be {self.expected()}, got {raw!r}")
        if self.max_length is not None and len(raw) > self.max_length:
            raise InvalidSettingError(f"{what} must be {self.expected()}, got {len(raw)} characters")
        return stripped.lower() if self.choices else raw

    def read(self, text: str | None, *, what: str | None = None):
        """The value a property's `text` gives (`parse`); the default when it is not set (None).

        Raises:
            InvalidSettingError: as `parse`.
        """
        return self.default if text is None else self.parse(text, what=what)

    def check(self, value, *, what: str | None = None):
        """A value as a Param gives it (a number, a bool, a string; None passes), checked like `parse` checks text.

        Raises:
            InvalidSettingError: `<what> must be <expected>, got <value>` (`what` defaults to the Param's name).
        """
        what = what or self.param_name
        if value is None:
            return None
        if self.kind in ("integer", "number"):
            return (self.bounds or Bounds(integer=self.kind == "integer")).check(what, value)
        if self.kind == "boolean":
            if not isinstance(value, bool):
                raise InvalidSettingError(f"{what} must be true or false, got {value!r}")
            return value
        return self.parse(value, what=what)

    def from_environ(self, environ) -> object:
        """The value of `env_var` in `environ` (unset or blank: the default), as `make run` reads it.

        Raises:
            UsageError: naming the variable and its value, and what to give instead.
        """
        text = environ.get(self.env_var, "").strip()
        if not text:
            return self.default
        if self.kind == "integer" and self.bounds is not None:
            low, high = _number(self.bounds.minimum), _number(self.bounds.maximum)
            if not _WHOLE.fullmatch(text):
                raise UsageError(f"{self.env_var}={text!r} is not a whole number; give one in {low}..{high} "
                                 f"(or unset it for the default {self.default})")
            if not self.bounds.contains(int(text)):
                raise UsageError(f"{self.env_var}={int(text)} is out of range; give a number in {low}..{high}")
            return int(text)
        if self.choices and text.lower() not in self.choices:
            raise UsageError(f"{self.env_var} must be {self.expected()}, got {environ.get(self.env_var)!r}")
        return self.parse(text, what=f"environment variable {self.env_var}")


def _number(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else str(value)


INITIATOR, WORKER, CLEANER, TABLES, HOUSEKEEPING, PLATFORM, SPARK = (
    "Initiator", "Worker", "Cleaner", "Tables", "Housekeeping and metrics", "Platform", "Spark jobs")
SECTIONS = (TABLES, INITIATOR, WORKER, CLEANER, HOUSEKEEPING, PLATFORM, SPARK)
DAY = 24 * 3600

# --- Initiator (Hive's Initiator; HiveConf / MetastoreConf) ---------------------------------------------------------
FETCH_SIZE = Setting(
    "fetch_size", "integer", 1000, "Candidates one initiator poll looks at; the next poll continues with the rest",
    INITIATOR, hive_key="metastore.compactor.fetch.size", dags=("acid_initiator",), bounds=Bounds(1, 5000))
DELTA_NUM_THRESHOLD = Setting(
    "delta_num_threshold", "integer", 10, "More deltas than this in a partition queue a minor compaction (a major "
    "one when it has no base)", INITIATOR, hive_key="hive.compactor.delta.num.threshold",
    property_key="compactorthreshold.hive.compactor.delta.num.threshold", dags=("acid_initiator", "acid_table_settings"),
    bounds=Bounds(0), main=True)
DELTA_PCT_THRESHOLD = Setting(
    "delta_pct_threshold", "number", 0.1, "Delta bytes over base bytes above this queue a major compaction",
    INITIATOR, hive_key="hive.compactor.delta.pct.threshold",
    property_key="compactorthreshold.hive.compactor.delta.pct.threshold", dags=("acid_initiator", "acid_table_settings"),
    bounds=Bounds(0, integer=False), main=True)
ABORTED_THRESHOLD = Setting(
    "aborted_threshold", "integer", 1000, "More aborted transactions than this in a partition queue a major "
    "compaction", INITIATOR, hive_key="hive.compactor.abortedtxn.threshold", dags=("acid_initiator",),
    bounds=Bounds(0))
ABORTED_TIME_THRESHOLD = Setting(
    "aborted_time_threshold_seconds", "integer", 12 * 3600, "An aborted transaction older than this queues a minor "
    "compaction of its partition; -1 disables it", INITIATOR, hive_key="hive.compactor.aborted.txn.time.threshold",
    dags=("acid_initiator",), bounds=Bounds(-1), unit="seconds")
FAILED_THRESHOLD = Setting(
    "failed_threshold", "integer", 2, "After this many consecutive failed compactions of a partition the initiator "
    "queues none until failed_retry_seconds passed; 0 disables it (Hive takes 1 to 20)", INITIATOR,
    hive_key="metastore.compactor.initiator.failed.compacts.threshold", dags=("acid_initiator",), bounds=Bounds(0))
FAILED_RETRY_TIME = Setting(
    "failed_retry_seconds", "integer", 7 * DAY, "When a partition past failed_threshold is tried again; 0: never",
    INITIATOR, hive_key="metastore.compactor.initiator.failed.retry.time", dags=("acid_initiator",),
    bounds=Bounds(0), unit="seconds")
BUDGET = Setting(
    "budget_bytes", "integer", 0, "Bytes the compactions of one pool may rewrite per poll, queued by benefit over "
    "cost; the rest go first at the next poll. 0: no budget (not in Hive)", INITIATOR, dags=("acid_initiator",),
    bounds=Bounds(0), unit="bytes")
REBALANCE_BUCKET_SIZE = Setting(
    "rebalance_bucket_size", "integer", 1 << 30, "A due major compaction of an unbucketed partition whose biggest "
    "bucket holds more than twice this becomes a rebalance into buckets of about this size; 0: never (not in Hive, "
    "whose initiator never rebalances)", INITIATOR,
    property_key="compactorthreshold.acid.compactor.rebalance.bucket.size", bounds=Bounds(0), unit="bytes")
INITIATOR_INTERVAL = Setting(
    "initiator_interval_seconds", "integer", 300, "How often acid_initiator polls (`make run` sets 60 unless it is "
    "set)", INITIATOR, hive_key="hive.compactor.check.interval", env_var="ACID_INITIATOR_INTERVAL_SECONDS",
    bounds=Bounds(1, 10**9), unit="seconds", main=True)

# --- Worker ----------------------------------------------------------------------------------------------------------
WORKER_THREADS = Setting(
    "worker_threads", "integer", 1, "Compactions at once: the slots of the acid_compaction pool, and the workers an "
    "acid_worker run starts (Hive's default, 0, runs no worker)", WORKER, hive_key="hive.compactor.worker.threads",
    env_var="ACID_WORKER_THREADS", dags=("acid_worker",), param="workers", bounds=Bounds(1, 1024), main=True)
COMPACTION_POOLS = Setting(
    "compaction_pools", "string", None, "Labelled compaction pools, `name` or `name:slots`, comma-separated: a "
    "worker DAG and an Airflow pool `acid_compaction_<name>` each (slots default: ACID_WORKER_THREADS); see "
    "docs/operations.md", WORKER, env_var="ACID_COMPACTION_POOLS", main=True)
MAX_COMPACTIONS = Setting(
    "max_compactions", "integer", 1000, "Queued compactions one acid_worker run runs at most", WORKER,
    dags=("acid_worker",), bounds=Bounds(0, 10000))
BATCH_SECONDS = Setting(
    "batch_seconds", "integer", 600, "A worker takes no new compaction after this long (the one in hand finishes)",
    WORKER, dags=("acid_worker",), bounds=Bounds(1, DAY), unit="seconds")
POOL_TIMEOUT = Setting(
    "pool_timeout_seconds", "integer", 12 * 3600, "The default pool's workers also run the compactions of a labelled "
    "pool that waited this long; 0: never", WORKER, hive_key="metastore.compactor.worker.pool.timeout",
    dags=("acid_worker",), bounds=Bounds(0, 10**9), unit="seconds")
WORKER_TIMEOUT = Setting(
    "worker_timeout_seconds", "integer", DAY, "A compaction working longer than this is put back to initiated "
    "(by acid_housekeeping)", WORKER, hive_key="hive.compactor.worker.timeout", dags=("acid_housekeeping",),
    bounds=Bounds(1), unit="seconds")
WORKER_INTERVAL = Setting(
    "worker_interval_seconds", "integer", 60, "acid_worker's timer (it also runs after every poll that queued "
    "something)", WORKER, env_var="ACID_WORKER_INTERVAL_SECONDS", bounds=Bounds(1, 10**9), unit="seconds", main=True)
LOCK_TIMEOUT = Setting(
    "lock_timeout_seconds", "integer", 60, "How long a write or a compaction waits for its lock before it gives up",
    WORKER, api="lock_timeout_ms", bounds=Bounds(0), unit="seconds")

# --- Tables (table and database properties) --------------------------------------------------------------------------
NO_AUTO_COMPACTION = Setting(
    "no_auto_compaction", "boolean", False, "true: the initiator queues no compaction of the table (of the "
    "database's tables); requests still run", TABLES, property_key="no_auto_compaction", database_property=True,
    main=True)
NO_CLEANUP = Setting(
    "no_cleanup", "boolean", False, "true: the cleaner removes nothing of the table", TABLES, property_key="no_cleanup",
    main=True)
COMPACTION_POOL = Setting(
    "compaction_pool", "string", None, "The compaction pool of the table's compactions (a request's POOL 'name' "
    "wins): letters, digits, _, - and .; none: default", TABLES, hive_key="hive.compactor.worker.pool", property_key="hive.compactor.worker.pool",
    database_property=True, max_length=128, main=True)
PYSPARK_MEMORY = Setting(
    "pyspark_memory", "memory", "2g", "The Python workers' memory cap of the table's compaction jobs "
    "(spark.executor.pyspark.memory); any `compactor.spark.<name>` sets `spark.<name>` alike", TABLES,
    property_key="compactor.spark.executor.pyspark.memory", database_property=True, request_property=True,
    dags=("acid_compact",), bounds=Bounds(512), max_length=32, unit="MiB",
    why_minimum="a Python worker needs that much address space to load pyarrow", main=True)
JOB_QUEUE = Setting(
    "job_queue", "string", None, "The YARN queue of the table's compaction jobs (spark.yarn.queue)", TABLES,
    hive_key="hive.compactor.job.queue", property_key="compactor.hive.compactor.job.queue", database_property=True,
    request_property=True, max_length=1000)
VERIFY = Setting(
    "verify", "boolean", True, "false: a compaction's output is committed without being read back and checked "
    "(not in Hive)", TABLES, property_key="compactor.verify", main=True)
STRIPE_SIZE = Setting(
    "stripe_size", "integer", 64 * 1024 * 1024, "Bytes a compaction's ORC writer buffers per stripe", TABLES,
    hive_key="hive.exec.orc.default.stripe.size", property_key="orc.stripe.size", bounds=Bounds(65536),
    unit="bytes")

# --- Cleaner ---------------------------------------------------------------------------------------------------------
RETENTION = Setting(
    "retention_seconds", "integer", 0, "A compaction's inputs are removed this long after it committed at the "
    "earliest (Hive: 300 with hive.compactor.delayed.cleanup.enabled, which is off by default)", CLEANER,
    hive_key="hive.compactor.cleaner.retention.time.seconds", dags=("acid_cleaner",), bounds=Bounds(0),
    unit="seconds")
RETRY_RETENTION = Setting(
    "retry_retention_seconds", "integer", 300, "A failed cleaning waits 2^attempts x this before the next try",
    CLEANER, hive_key="hive.compactor.cleaner.retry.retention.time", dags=("acid_cleaner",), bounds=Bounds(1),
    unit="seconds")
MAX_ATTEMPTS = Setting(
    "max_attempts", "integer", 5, "Retries of a failing cleaning before it is marked failed", CLEANER,
    hive_key="hive.compactor.cleaner.retry.maxattempts", dags=("acid_cleaner",), bounds=Bounds(0, 10))
TRASH_DIR = Setting(
    "trash_dir", "string", None, "Move removed directories under this absolute path or URI (on the table's "
    "filesystem) instead of deleting them; none: delete", CLEANER, dags=("acid_cleaner",), max_length=4096)
CLEANER_INTERVAL = Setting(
    "cleaner_interval_seconds", "integer", 300, "acid_cleaner's timer (it also runs after every compaction; `make "
    "run` sets 60 unless it is set). Hive's Cleaner polls every 5 s (hive.compactor.cleaner.run.interval)", CLEANER,
    env_var="ACID_CLEANER_INTERVAL_SECONDS", bounds=Bounds(1, 10**9), unit="seconds", main=True)

# --- Housekeeping and metrics -----------------------------------------------------------------------------------------
TXN_TIMEOUT = Setting(
    "txn_timeout_seconds", "integer", 300, "A transaction not heartbeated for this long is aborted and its locks "
    "released", HOUSEKEEPING, hive_key="hive.txn.timeout", dags=("acid_housekeeping",), bounds=Bounds(1),
    unit="seconds")
LEASE_TIMEOUT = Setting(
    "lease_timeout_seconds", "integer", 300, "A reader lease not heartbeated for this long expires (not in Hive)",
    HOUSEKEEPING, dags=("acid_housekeeping",), bounds=Bounds(1), unit="seconds")


def _history_retention(state: str, default: int) -> Setting[int]:
    """metastore.compactor.history.retention.<state>: the newest entries of one state Hive's purge keeps."""
    return Setting(
        f"history_{state}", "integer", default, f"{state.replace('_', '-').capitalize()} entries of the compaction "
        "history kept per partition", HOUSEKEEPING,
        hive_key=f"metastore.compactor.history.retention.{state.replace('_', '.')}", dags=("acid_housekeeping",),
        bounds=Bounds(0, 100))


HISTORY_SUCCEEDED, HISTORY_FAILED, HISTORY_DID_NOT_INITIATE, HISTORY_REFUSED = (
    _history_retention("succeeded", 3), _history_retention("failed", 3), _history_retention("did_not_initiate", 2),
    _history_retention("refused", 3))
HISTORY_TIMEOUT = Setting(
    "history_timeout_seconds", "integer", 7 * DAY, "Failed, did-not-initiate and refused history entries older than "
    "this go once a newer compaction of the partition succeeded", HOUSEKEEPING,
    hive_key="metastore.compactor.history.retention.timeout", dags=("acid_housekeeping",), bounds=Bounds(0),
    unit="seconds")
WORKING_WARNING = Setting(
    "working_warning_seconds", "integer", 2 * 3600, "Alert (once per attempt) on a compaction working longer than "
    "this", HOUSEKEEPING, dags=("acid_housekeeping",), bounds=Bounds(1), unit="seconds")
ABORTED_TXNS_THRESHOLD = Setting(
    "aborted_txns_threshold", "integer", 1500, "The gauge tables_with_x_aborted_transactions counts partitions with "
    "more aborted transactions than this", HOUSEKEEPING, hive_key="metastore.acidmetrics.table.aborted.txns.threshold",
    dags=("acid_housekeeping",), bounds=Bounds(0))
DELTA_METRICS_PARTITIONS = Setting(
    "delta_metrics_partitions", "integer", 100, "Queued partitions listed for the delta gauges each run (0: no delta "
    "gauges)", HOUSEKEEPING, hive_key="metastore.deltametrics.max.cache.size", dags=("acid_housekeeping",),
    bounds=Bounds(0, 500))
SMALL_DELTA_PCT = Setting(
    "small_delta_pct", "number", 0.01, "A delta under this fraction of its base counts as small", HOUSEKEEPING,
    hive_key="metastore.deltametrics.delta.pct.threshold", dags=("acid_housekeeping",),
    bounds=Bounds(0, 1, integer=False))
WAIT_TIMEOUT = Setting(
    "wait_timeout_seconds", "integer", 300, "ALTER TABLE ... COMPACT ... AND WAIT waits this long at most",
    HOUSEKEEPING, hive_key="hive.compactor.wait.timeout", api="wait_timeout_ms", bounds=Bounds(0), unit="seconds")
ALERT_RULES = Setting(
    "alert_rules", "string", None, "The alert rules as JSON, when the Airflow Variable acid_alert_rules is unset; "
    "see docs/operations.md", HOUSEKEEPING, env_var="ACID_ALERT_RULES")
NOTIFIER = Setting(
    "notifier", "string", None, "Import path of the alerts' notifier (none: the task log)", HOUSEKEEPING,
    env_var="ACID_NOTIFIER")
NOTIFIER_KWARGS = Setting(
    "notifier_kwargs", "string", None, "The notifier's keyword arguments, a JSON object", HOUSEKEEPING,
    env_var="ACID_NOTIFIER_KWARGS")

# --- Platform (`make run`; the acid command and the Spark code honour the metastore ones too) ------------------------
ACID_HOME = Setting(
    "acid_home", "string", "<checkout>/.acid-home", "All state: airflow/, warehouse/, logs/", PLATFORM,
    env_var="ACID_HOME", main=True)
API_PORT = Setting(
    "api_port", "integer", 8080, "The Airflow UI and API port (`make run AIRFLOW__API__PORT=8091`)", PLATFORM,
    env_var="AIRFLOW__API__PORT", bounds=Bounds(1, 65535), main=True)
API_HOST = Setting(
    "api_host", "string", "127.0.0.1", "The UI's address: 0.0.0.0 to reach it from other machines", PLATFORM,
    env_var="AIRFLOW__API__HOST", main=True)
DEMO_WRITER = Setting(
    "demo_writer", "string", "on", "off: no demo writer (the platform keeps your own tables healthy; the demo "
    "tables stay empty)", PLATFORM, env_var="ACID_DEMO_WRITER", choices=("on", "off"), main=True)
METASTORE_URL = Setting(
    "metastore_url", "string", None, "The metastore's SQLAlchemy URL (none: ACID_HOME/warehouse/metastore.db, SQLite); "
    "a password in it is passed on in ACID_METASTORE_PASSWORD, never inside a URL", PLATFORM,
    env_var="ACID_METASTORE_URL", main=True)
METASTORE_PASSWORD = Setting(
    "metastore_password", "string", None, "The metastore's password", PLATFORM, env_var="ACID_METASTORE_PASSWORD",
    main=True)
WAREHOUSE = Setting(
    "warehouse", "string", None, "Where new tables are made (none: ACID_HOME/warehouse)", PLATFORM,
    env_var="ACID_WAREHOUSE", main=True)

# --- Spark jobs (read by acid_deploy.launch, acid_deploy.shipping and spark_jobs) ----------------------------
SPARK_MASTER = Setting(
    "spark_master", "string", "local[*]", "The Spark master of `acid` and of jobs started outside Airflow "
    "(spark-submit's --master wins)", SPARK, env_var="ACID_SPARK_MASTER")
EXECUTOR_ENV = Setting(
    "executor_env", "string", "auto", "What executors on a cluster run: auto (build and ship a Python environment), "
    "none, or an archive URI; the Spark connection's extra key acid-executor-env", SPARK, env_var="ACID_EXECUTOR_ENV")
EXECUTOR_PYTHON = Setting(
    "executor_python", "string", "python3", "The executors' Python on the nodes (with executor_env none); extra key "
    "acid-executor-python", SPARK, env_var="ACID_EXECUTOR_PYTHON")
EXECUTOR_PYTHON_PREFIX = Setting(
    "executor_python_prefix", "string", None, "Where the nodes' Python lives (/usr), for executor_env auto; extra key "
    "acid-executor-python-prefix", SPARK, env_var="ACID_EXECUTOR_PYTHON_PREFIX")
CONTAINER_IMAGE = Setting(
    "container_image", "string", None, "spark.kubernetes.container.image (k8s:// masters only); extra key "
    "acid-container-image", SPARK, env_var="ACID_CONTAINER_IMAGE")
SHIP_DIR = Setting(
    "ship_dir", "string", None, "Where shipped environments are built (none: ACID_HOME/ship, else "
    "~/.cache/acid/ship)", SPARK, env_var="ACID_SHIP_DIR")
PROGRESS_SECONDS = Setting(
    "progress_seconds", "number", 5.0, "A compaction job logs a progress line at least this often (a number of "
    "seconds above 0)", SPARK, env_var="ACID_PROGRESS_SECONDS", unit="seconds")

SETTINGS: tuple[Setting[object], ...] = tuple(value for value in dict(globals()).values() if isinstance(value, Setting))
BY_NAME: dict[str, Setting[object]] = {setting.name: setting for setting in SETTINGS}
_BY_PROPERTY: dict[str, Setting[object]] = {setting.property_key.lower(): setting for setting in SETTINGS
                                    if setting.property_key}


def for_property(key: str) -> Setting[object] | None:
    """The setting a table or database property sets (keys match case-insensitively, as Hive's do), else None."""
    return _BY_PROPERTY.get(str(key).strip().lower())


def for_dag(dag_id: str) -> tuple[Setting[object], ...]:
    """The settings DAG `dag_id` takes as Params, in registry order."""
    return tuple(setting for setting in SETTINGS if dag_id in setting.dags)


# --- The tables of README.md and docs/settings.md ---------------------------------------------------------------------
README_BEGIN = "<!-- settings table: generated from acid_core/settings.py by `python -m acid_core.settings --markdown` -->"
README_END = "<!-- end of the generated settings table -->"
HEADER = ("| setting | default | allowed | set as | what it does |", "|---|---|---|---|---|")


def _shown_default(setting: Setting[object]) -> str:
    value = setting.default
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f"`{value}`"
    assert isinstance(value, (int, float)), f"setting {setting.name}: a default is a bool, a number, a string or None"
    shown = _number(value)
    for size, name in ((DAY, "d"), (3600, "h")):
        if setting.unit == "seconds" and value >= size and value % size == 0:
            return f"{shown} s ({value // size} {name})"
    if setting.unit == "seconds":
        return f"{shown} s"
    for size, name in ((1 << 30, "GiB"), (1 << 20, "MiB")):
        if setting.unit == "bytes" and value >= size and value % size == 0:
            return f"{shown} ({value // size} {name})"
    return shown


def _allowed(setting: Setting[object]) -> str:
    if setting.kind == "string" and not setting.choices:
        return f"at most {setting.max_length} characters" if setting.max_length else "text"
    if setting.choices:
        return " or ".join(f"`{choice}`" for choice in setting.choices)
    if setting.kind == "boolean":
        return "`true` or `false`"
    return setting.expected()


def _set_as(setting: Setting[object]) -> str:
    places = []
    if setting.property_key:
        kinds = ["table"] + (["database"] if setting.database_property else []) + (
            ["request"] if setting.request_property else [])
        places.append(f"{', '.join(kinds)} property `{setting.property_key}`")
    if setting.dags:
        places.append(f"param `{setting.param_name}` of " + ", ".join(f"`{dag}`" for dag in setting.dags))
    if setting.env_var:
        places.append("environment" if setting.key == setting.env_var else f"environment `{setting.env_var}`")
    if setting.api:
        places.append(f"keyword `{setting.api}`")
    return "; ".join(places)


def row(setting: Setting[object]) -> str:
    """The setting's line of a markdown settings table."""
    cells = (f"`{setting.key}`", _shown_default(setting), _allowed(setting), _set_as(setting), setting.description)
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def markdown_table(settings: tuple[Setting[object], ...] | None = None) -> str:
    """A markdown table of `settings` (default: the main ones, README.md's), one line each, in registry order."""
    if settings is None:
        settings = tuple(sorted((s for s in SETTINGS if s.main), key=lambda s: SECTIONS.index(s.section)))
    chosen = settings
    return "\n".join((*HEADER, *(row(setting) for setting in chosen))) + "\n"


def readme_block() -> str:
    """README.md's settings table with the comment lines that enclose it."""
    return f"{README_BEGIN}\n{markdown_table()}{README_END}\n"


def docs_page() -> str:
    """docs/settings.md: every setting, by section."""
    lines = ["# Settings", "",
             "Every setting this system reads: Hive's key where Hive has the setting (with Hive's default unless the "
             "description says otherwise), the table or database property, DAG param or environment variable it is "
             "set as, and what it allows. A property of a compaction request beats the table's, which beats the "
             "database's, which beats a DAG param or the default. Generated from `acid_core/settings.py` by "
             "`python -m acid_core.settings --docs`: edit the registry, not this page.", ""]
    for section in SECTIONS:
        lines += [f"## {section}", "", markdown_table(tuple(s for s in SETTINGS if s.section == section)).rstrip("\n"),
                  ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`--markdown`: README.md's settings table (with its enclosing comment lines); `--docs`: docs/settings.md."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m acid_core.settings", description=main.__doc__)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--markdown", action="store_true", help="print README.md's settings table")
    group.add_argument("--docs", action="store_true", help="print docs/settings.md")
    args = parser.parse_args(argv)
    sys.stdout.write(readme_block() if args.markdown else docs_page())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
