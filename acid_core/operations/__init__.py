"""Operations around compaction: partition health and its score, compaction history figures, metrics and alerts,
and the metastore's housekeeping."""
