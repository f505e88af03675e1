"""PySpark jobs (compaction, reading and writing ACID tables); imports acid_core and pyspark, never airflow.

Importing it puts the installed pyspark and py4j before the zips Spark puts first on a spark-submit'd driver's and a
Python worker's path, where they are the same release (`spark_jobs.installed_pyspark`): about 0.5 s of CPU less per
process. Every module here that imports pyspark is imported after this.
"""

from spark_jobs.installed_pyspark import prefer_installed

prefer_installed()
