"""Hive-ACID-compatible storage core: names, validity lists, directory state, ORC event files, merge-on-read, writer.

Engine- and orchestrator-agnostic: this package imports neither pyspark nor airflow.
"""
