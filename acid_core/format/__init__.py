"""Hive's formats: directory and file names, ROW__IDs and bucket properties, validity lists, column types and values,
ORC event files (row-wise and columnar), ORC tails and stripes, delete events and Hive's bucketing hash."""
