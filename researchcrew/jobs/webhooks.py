"""Finished-run webhooks: a JSON POST signed with HMAC-SHA256 of the body under the job's secret, retried with
exponential backoff and jitter (tenacity) on connection errors, timeouts, HTTP 429 and 5xx.

Headers: ``X-Researchcrew-Event: run.finished``, ``X-Researchcrew-Delivery: <run id>`` (the same on every retry:
receivers deduplicate on it), ``X-Researchcrew-Signature: sha256=<hex>``. A receiver checks the signature with
``verify_signature(secret, body, header)`` (constant-time). Any other 4xx is the receiver refusing for good: not
retried. The outcome is stored on the run (``webhook_state``: delivered or failed, attempts, last error).

Where it may go is ``researchcrew.net.address_policy``'s call: before each attempt the URL is checked and its host
resolved, every address must be public (or allowed by ``webhooks.allow``), and the POST goes to a vetted address
with the original ``Host`` header and TLS server name, so a DNS answer that changes after the check (rebinding) is
never connected to. Redirects are not followed and the environment's proxy variables are not used (a proxy would
resolve the name again). The stored error says only what the job's owner may know: ``refused by policy``,
``delivery failed`` (no connection, timeout, broken response: one message, so that the outcome is no port scanner)
or ``HTTP <status>`` when the receiver answered; the details go to the log.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging

import httpx
from tenacity import AsyncRetrying, RetryError, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from researchcrew.jobs._store import JobStore
from researchcrew.jobs.contracts import RunInfo
from researchcrew.net.address_policy import AddressPolicy, AddressRefused, Destination, ResolutionFailed
from researchcrew.redaction import mask_url
from researchcrew.settings import JobsSettings, Settings

logger = logging.getLogger(__name__)

EVENT = "run.finished"
SIGNATURE_HEADER = "X-Researchcrew-Signature"
REFUSED = "refused by policy"
FAILED = "delivery failed"
_MAX_ADDRESSES = 4  # addresses of one host tried in turn when a connection cannot be made


class _Retryable(Exception):
    """A delivery attempt that may succeed later."""


class _Refused(Exception):
    """The receiver refused the delivery for good (a 4xx other than 429), or the policy did."""


def webhook_policy(settings: Settings) -> AddressPolicy:
    """The address policy of ``settings.webhooks`` (public addresses, plus the allowed networks and names)."""
    return AddressPolicy(settings.webhooks.allow, resolve_timeout_s=settings.webhooks.resolve_timeout_s)


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
    policy: AddressPolicy | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> bool:
    """POST the finished run to ``url`` until it is accepted or the attempts run out; True when delivered.
    ``policy`` says where deliveries may go (default: public addresses only)."""
    policy = policy if policy is not None else AddressPolicy()
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
    detail: str | None = None  # for the log only
    shown = mask_url(url)
    async with httpx.AsyncClient(
        timeout=settings.webhook_timeout_s, transport=transport, trust_env=False, follow_redirects=False
    ) as client:

        async def post() -> None:
            nonlocal attempts, error, detail
            attempts += 1
            try:
                destination = await policy.resolve(url)  # again on every attempt: DNS may have changed
            except AddressRefused as refused:
                error, detail = REFUSED, str(refused)
                raise _Refused(error) from refused
            except ResolutionFailed as failure:
                error, detail = FAILED, str(failure)
                raise _Retryable(error) from failure
            try:
                response = await _post_pinned(client, destination, body, headers)
            except httpx.HTTPError as failure:  # connection refused, timeout, TLS, broken response
                error, detail = FAILED, f"{type(failure).__name__}: {failure}"
                raise _Retryable(error) from failure
            if response.is_success:
                return
            error = detail = f"HTTP {response.status_code}"
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
            logger.warning("webhook of run %s to %s failed after %d attempt(s): %s", run.id, shown, attempts, detail)
            await store.set_webhook_state(run.id, "failed", attempts, error)
            return False
    logger.info("webhook of run %s delivered to %s (attempt %d)", run.id, shown, attempts)
    await store.set_webhook_state(run.id, "delivered", attempts, None)
    return True


async def _post_pinned(
    client: httpx.AsyncClient, destination: Destination, body: bytes, headers: dict[str, str]
) -> httpx.Response:
    """POST to the destination's vetted addresses in turn (the next one only when no connection could be made to
    the previous, so nothing was sent), with the URL's own ``Host`` header and TLS server name."""
    pinned = {**headers, "Host": destination.host_header}
    extensions = {"sni_hostname": destination.server_name} if destination.server_name else {}
    *others, last = destination.addresses[:_MAX_ADDRESSES]  # a destination has at least one address
    for address in others:
        try:
            return await client.post(destination.url_for(address), content=body, headers=pinned, extensions=extensions)
        except httpx.ConnectError:
            continue
    return await client.post(destination.url_for(last), content=body, headers=pinned, extensions=extensions)
