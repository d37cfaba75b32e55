"""Finished-run webhooks: a JSON POST signed with HMAC-SHA256 of the body under the job's secret, retried with
exponential backoff and jitter (tenacity) on connection errors, timeouts, HTTP 429 and 5xx.

Headers: ``X-Researchcrew-Event: run.finished``, ``X-Researchcrew-Delivery: <run id>`` (the same on every retry:
receivers deduplicate on it), ``X-Researchcrew-Signature: sha256=<hex>``. A receiver checks the signature with
``verify_signature(secret, body, header)`` (constant-time). Any other 4xx is the receiver refusing for good: not
retried. The outcome is stored on the run (``webhook_state``: delivered or failed, attempts, last error).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging

import httpx
from tenacity import AsyncRetrying, RetryError, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from researchcrew.jobs.contracts import RunInfo
from researchcrew.jobs.store import JobStore
from researchcrew.settings import JobsSettings

logger = logging.getLogger(__name__)

EVENT = "run.finished"
SIGNATURE_HEADER = "X-Researchcrew-Signature"


class _Retryable(Exception):
    """A delivery attempt that may succeed later."""


class _Refused(Exception):
    """The receiver refused the delivery for good (a 4xx other than 429)."""


def sign(secret: str, body: bytes) -> str:
    """The signature header value of ``body``: ``sha256=`` and the hex HMAC-SHA256 under ``secret``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def verify_signature(secret: str, body: bytes, header: str | None) -> bool:
    """Whether ``header`` is the signature of ``body`` under ``secret`` (constant-time comparison)."""
    return header is not None and hmac.compare_digest(sign(secret, body), header)


def payload(run: RunInfo) -> bytes:
    """The body POSTed for a finished run."""
    return json.dumps({"event": EVENT, "run": run.model_dump(mode="json")}, sort_keys=True).encode("utf-8")


async def deliver(
    run: RunInfo,
    *,
    url: str,
    secret: str,
    store: JobStore,
    settings: JobsSettings,
    transport: httpx.AsyncBaseTransport | None = None,
) -> bool:
    """POST the finished run to ``url`` until it is accepted or the attempts run out; True when delivered."""
    body = payload(run)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "researchcrew-webhooks/1",
        "X-Researchcrew-Event": EVENT,
        "X-Researchcrew-Delivery": run.id,
        SIGNATURE_HEADER: sign(secret, body),
    }
    attempts = 0
    error: str | None = None
    async with httpx.AsyncClient(timeout=settings.webhook_timeout_s, transport=transport) as client:

        async def post() -> None:
            nonlocal attempts, error
            attempts += 1
            try:
                response = await client.post(url, content=body, headers=headers)
            except httpx.HTTPError as failure:  # connection refused, timeout, broken response
                error = f"{type(failure).__name__}: {failure}"
                raise _Retryable(error) from failure
            if response.is_success:
                return
            error = f"HTTP {response.status_code}"
            if response.status_code == 429 or response.status_code >= 500:
                raise _Retryable(error)
            raise _Refused(error)

        retrying = AsyncRetrying(
            stop=stop_after_attempt(settings.webhook_attempts),
            wait=wait_random_exponential(multiplier=settings.retry_backoff_s, max=settings.retry_backoff_max_s),
            retry=retry_if_exception_type(_Retryable),
        )
        try:
            await retrying(post)
        except (RetryError, _Refused):
            logger.warning("webhook of run %s to %s failed after %d attempt(s): %s", run.id, url, attempts, error)
            await store.set_webhook_state(run.id, "failed", attempts, error)
            return False
    logger.info("webhook of run %s delivered to %s (attempt %d)", run.id, url, attempts)
    await store.set_webhook_state(run.id, "delivered", attempts, None)
    return True
