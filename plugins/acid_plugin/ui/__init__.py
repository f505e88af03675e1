"""The ACID view in Airflow's UI: a FastAPI app (`app.create_app`) and its page, registered by
plugins/acid_ui_plugin.py. Importing this package imports nothing."""
