"""Spark deployment, shared by the `acid` command and the Airflow operators: the code and Python shipped to
executors (`shipping`), a compaction's Spark settings (`job_conf`) and the one builder of a compaction's
spark-submit command (`launch`). Imports `acid_core`; the storage core never imports it."""
