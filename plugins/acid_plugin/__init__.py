"""Airflow plugin code for the ACID metastore: hooks that hand tasks an `acid_core` Metastore.

Importing this package imports nothing; import `acid_plugin.hooks` where a hook is needed.
"""
