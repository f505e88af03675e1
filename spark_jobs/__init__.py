"""PySpark jobs (compaction, reading and writing ACID tables); imports acid_core and pyspark, never airflow."""
