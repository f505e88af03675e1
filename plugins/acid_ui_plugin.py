"""Registers the ACID view with Airflow: the FastAPI app at `/acid` and an "ACID" entry in the UI's navigation
that shows its page (an external view embedded by Airflow's UI at `/plugin/acid`). See acid_plugin/ui/app.py."""

from __future__ import annotations

from acid_plugin.ui.app import URL_PREFIX, create_app
from airflow.plugins_manager import AirflowPlugin


class AcidViewPlugin(AirflowPlugin):
    """The ACID view: compaction queue and history, table health, transactions, locks, and their actions."""

    name = "acid_view"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "ACID view"}]
    external_views = [{"name": "ACID", "href": f"{URL_PREFIX}/", "url_route": "acid", "destination": "nav",
                       "nav_top_level": True}]
