"""Tokens for the ACID view's tests (a module of its own: `conftest` names two modules in this test tree)."""

from __future__ import annotations


def token_for(role: str | None, name: str | None = None) -> str:
    """A JWT of the SimpleAuthManager for a user of that role (viewer, user, op, admin; None: no permission)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    return get_auth_manager().generate_jwt(SimpleAuthManagerUser(username=name or str(role), role=role))
