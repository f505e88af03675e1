"""Writing: the table handle (`table.AcidTable`), one write transaction (`table_write.TableWrite`), the one publish
step that makes result directories readable (`publish`), the embedded writer and Hive's streaming connection."""
