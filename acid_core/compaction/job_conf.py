"""The Spark settings of one compaction job, Hive style: what a run asks for beats the table, which beats the default.

Today one setting: the Python workers' memory cap `spark.executor.pyspark.memory` (Spark enforces it as an
address-space limit; a compaction streams its bucket, so its memory is a few stripes per open input, not the bucket).
Sources, strongest first: the request's `WITH OVERWRITE TBLPROPERTIES ('compactor.spark.executor.pyspark.memory'=...)`
(also what the acid_compact DAG's `pyspark_memory` param queues), the table property of that name (Hive's `compactor.`
prefix for job settings, like `compactor.mapreduce.map.memory.mb`), what the launcher was configured with (the
operator's `conf`), then `DEFAULT_PYSPARK_MEMORY`. Light: DAG files and the CLI may import it.
"""

from __future__ import annotations

import json
from typing import Mapping

from acid_core.metastore.properties import PYSPARK_MEMORY_CONF, PYSPARK_MEMORY_PROPERTY, find, spark_memory_mib

# Streaming compaction of the default 64 MiB stripes with a dozen open inputs (base, ten deltas, the delete delta)
# peaks under 1.5 GiB of address space, of which ~0.4 GiB is the Python worker with pyarrow loaded.
DEFAULT_PYSPARK_MEMORY = "2g"


def compaction_spark_conf(table_params: Mapping[str, str], request_properties: str | Mapping[str, str] | None, *,
                          configured: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings to add to one compaction's spark-submit `--conf`s.

    Args:
        table_params: the table's properties.
        request_properties: the queue entry's CQ_TBLPROPERTIES (a JSON object, as stored) or a mapping.
        configured: the launcher's own settings; they only beat the default.

    Raises:
        InvalidPropertyError: the value in force is not a Spark memory size of at least 512m.
    """
    if isinstance(request_properties, str):
        request_properties = json.loads(request_properties) if request_properties else {}
    for what, source, key in (("the compaction request's property", request_properties or {}, PYSPARK_MEMORY_PROPERTY),
                              ("table property", table_params, PYSPARK_MEMORY_PROPERTY),
                              ("the launcher's setting", configured or {}, PYSPARK_MEMORY_CONF)):
        value = find(source, key)
        if value is not None:
            spark_memory_mib(value, what=f"{what} {key!r}")
            return {PYSPARK_MEMORY_CONF: value.strip()}
    return {PYSPARK_MEMORY_CONF: DEFAULT_PYSPARK_MEMORY}
