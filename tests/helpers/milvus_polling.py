"""pymilvus' waits poll at a short interval in the test process.

pymilvus (``client/grpc_handler.py``) waits for an index to be built, a flush or a load to finish by sleeping and
asking again: 0.5 s before even the first question about an index (``wait_for_creating_index``), 0.5 s between
flush checks, 0.2 s between load checks (``Config.WaitTimeDurationWhenLoad``). Milvus Lite finishes those on a
test's few rows in milliseconds, so every collection a test made cost at least half a second per index asleep —
hundreds of collections, minutes of the suite. Here the module's sleeps of at most half a second (its polling
intervals; nothing else there sleeps that little) take ``POLL_S`` instead: the same questions, asked sooner, and
the same answers and timeouts (those are measured with ``time.time()``, which is left alone). Its longer sleeps
(3 s before reconnecting an idle channel, 5 s between flush-all checks) are kept.

Only this process is changed: the `researchcrew` processes the tests start (serve, the CLI, workers) poll as users'
processes do.
"""

from __future__ import annotations

import time
import types
from typing import Any

POLL_S = 0.02
_LONGEST_POLL_S = 0.5


class _QuickPolls(types.SimpleNamespace):
    """Stands in for the ``time`` module inside pymilvus' gRPC handler."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(min(seconds, POLL_S) if seconds <= _LONGEST_POLL_S else seconds)


def poll_quickly() -> None:
    """Make this process's pymilvus poll every ``POLL_S`` (idempotent)."""
    from pymilvus.client import grpc_handler

    if not isinstance(grpc_handler.time, _QuickPolls):
        grpc_handler.time = _QuickPolls()  # type: ignore[assignment]
