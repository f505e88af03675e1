"""Compaction: planning (which files, which result names), per-bucket execution, and Hive's worker protocol."""
