"""Airflow's REST API on loopback as the tests that start a whole Airflow call it: JSON in and out, a bearer token."""

from __future__ import annotations

import json
import urllib.request


def call(base: str, path: str, *, token: str | None = None, method: str = "GET", body=None):
    """The decoded JSON answer of `method base+path` (with `body` as JSON and `token` as the bearer, when given)."""
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    request = urllib.request.Request(base + path, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def login_token(base: str, user: str, password: str) -> str:
    """A token of the API for a login of Airflow's SimpleAuthManager."""
    return call(base, "/auth/token", method="POST", body={"username": user, "password": password})["access_token"]
