"""Reading under a snapshot: a partition's directory state (Hive's AcidUtils.getAcidState), the read plan of its
files, merge-on-read with deletes applied, and partition pruning by predicate."""
