"""The ACID view in Airflow's UI: a FastAPI app (`app.create_app`: JSON endpoints and the view's ES modules under
`static/`, which Airflow's UI renders as a React app plugin), registered by plugins/acid_ui_plugin.py. Importing this
package imports nothing."""
