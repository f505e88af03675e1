"""Storage: one file-system interface over local disks, HDFS and object stores (what renames atomically, what does
not, and paths that must stay inside a table)."""
