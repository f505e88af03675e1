"""Compaction: planning (which files, which result names), per-bucket execution, Hive's worker protocol, the
initiator that decides what to compact, the cleaner, and batch workers (many compactions in one application)."""
