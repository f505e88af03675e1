"""Running `acid sql` text through a session and reading back what it printed (JSON lines): shared by the Spark SQL
engine and Spark partition-pruning tests."""

from __future__ import annotations

import json

from acid_cli.sql import execute
from acid_cli.sql.session import Session


def run(session: Session, text: str) -> list[dict]:
    """Execute every statement of `text`; the rows the session printed, as dicts."""
    from acid_cli.hiveql import parse_script

    session.out.seek(0)
    session.out.truncate()
    for statement in parse_script(text):
        execute(session, statement)
    return [json.loads(line) for line in session.out.getvalue().splitlines()]
