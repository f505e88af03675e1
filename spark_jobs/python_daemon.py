"""The Python daemon of local Spark applications (`spark.python.daemon.module`, set for local masters by
`acid_deploy.job_conf.LOCAL_PYTHON_DAEMON`): pyspark's own daemon, imported after `spark_jobs` has put the installed
pyspark before Spark's zips (`spark_jobs.installed_pyspark`), so the Python workers it forks import pyspark's
modules from their bytecode instead of compiling them from the zip, each of them. Spark runs it as
`python -m spark_jobs.python_daemon <worker module>`, as it runs `pyspark.daemon`; nothing else changes.
"""

from __future__ import annotations

from pyspark import daemon  # spark_jobs/__init__ ran first: from the installed package where that is Spark's own

if __name__ == "__main__":
    daemon.manager()
