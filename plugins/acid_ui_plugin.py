"""Registers the ACID view with Airflow: the FastAPI app at `/acid` and an "ACID" entry in the UI's navigation that
renders the view inside Airflow's own page (a React app plugin at `/plugin/acid`: Airflow imports the app's
`static/view.js` and renders its component with Airflow's React, Chakra UI theme and router, so it looks like Airflow
and its links navigate Airflow). See acid_plugin/ui/app.py."""

from __future__ import annotations

from acid_plugin.ui.app import BUNDLE, PLUGIN_ROUTE, URL_PREFIX, create_app
from airflow.plugins_manager import AirflowPlugin


class AcidViewPlugin(AirflowPlugin):
    """The ACID view: compaction queue and history, table health, charts, transactions, locks, and their actions."""

    name = "acid_view"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "ACID view"}]
    # bundle_url is relative to Airflow's base URL (the UI resolves it against its <base href>)
    react_apps = [{"name": "ACID", "bundle_url": f"{URL_PREFIX.lstrip('/')}/static/{BUNDLE}",
                   "url_route": PLUGIN_ROUTE, "destination": "nav", "nav_top_level": True}]
