"""What a test does when a server it needs (PostgreSQL, Redis) is not running.

On a developer's machine it skips, with the reason. Under ``CI=true`` it fails: CI runs on a machine that has these
servers, and a silently skipped test there would be a green lie.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def service_unavailable(reason: str) -> NoReturn:
    """Skip (locally) or fail (under CI=true) the current test because a server it needs is down."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} — CI=true, so this is a failure, not a skip", pytrace=False)
    pytest.skip(reason)
