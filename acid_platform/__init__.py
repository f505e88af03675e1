"""`make run`: the platform on one machine (see `launcher`). `settings` reads the environment and checks it,
`bootstrap` sets up Airflow, the connections, the pool and the demo tables, `processes` starts and stops what runs."""

from acid_platform.settings import Settings, load_settings, platform_environment

__all__ = ["Settings", "load_settings", "platform_environment"]
