"""The Zep outbox: every write to Zep is first a row in our own store, then delivered by a background worker.

    worker = OutboxWorker(store, zep)          # zep: ZepMemory
    worker.start()                             # with the app / SDK
    await worker.enqueue_turn(user_id=..., session_id=..., query=q, response=r)   # a local insert, then returns
    ...
    await worker.stop()                        # or ``await worker.drain(timeout_s)`` in tests and the CLI

Why it cannot lose or duplicate a write:
* enqueue is an insert keyed by an idempotency key (``zep.add_turn:<response id>``): enqueuing twice is a no-op;
* the worker claims due rows with a lease (``MemoryStore.claim_due_outbox``); a worker that dies mid-delivery loses
  its lease and the row becomes due again, in this process or the next one;
* delivery is idempotent: Zep gets our stable message ids as message uuids and refuses them twice, and a retried
  row is first looked up in Zep (``ZepMemory.already_delivered``).

Failures: a retryable one (Zep down, slow, 5xx, 429, auth) reschedules the row with exponential backoff and
jitter, capped, and opens a circuit: the worker stops calling Zep and probes it with one row at a time until a
probe succeeds. A write Zep refuses for good (a 4xx such as 400) is marked dead after ``permanent_after``
failures (``MemoryStore.mark_dead``), with the reason: it stays in the store (``export_user`` lists it, state
"dead"; ``outbox_counts()["dead"]`` counts it) but is never retried and no longer counts as pending.

Bookkeeping: the rows one cycle delivered are marked delivered together, in one transaction
(``mark_delivered_many``), once every session group of the cycle has finished; a failure is recorded at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from pydantic import ValidationError

from researchcrew.contracts.query import Query
from researchcrew.contracts.synthesizer import FinalResponse
from researchcrew.errors import MemoryStoreError
from researchcrew.memory._zep_recall import RESPONSE_ID_KEY, SESSION_ID_KEY, USER_ID_KEY
from researchcrew.memory.records import OutboxItem, OutboxWrite
from researchcrew.memory.store import message_id
from researchcrew.memory.zep import ZepError, ZepMemory, ZepMessage

logger = logging.getLogger(__name__)

ZEP_ADD_TURN = "zep.add_turn"
ZEP_DELETE_USER = "zep.delete_user"
MAX_CITATIONS_IN_METADATA = 20


class OutboxStore(Protocol):
    """The part of ``MemoryStore`` the outbox uses."""

    async def enqueue_outbox(
        self, *, user_id: str, kind: str, payload: dict[str, Any], idempotency_key: str
    ) -> bool: ...

    async def claim_due_outbox(
        self, *, limit: int = 100, now: datetime | None = None, lease_s: float = 30.0
    ) -> list[OutboxItem]: ...

    async def mark_delivered_many(self, item_ids: Sequence[int]) -> int: ...

    async def mark_failed(self, item_id: int, *, error: str, next_attempt_at: datetime) -> None: ...

    async def mark_dead(self, item_id: int, *, error: str) -> bool: ...

    async def outbox_counts(self, *, now: datetime | None = None) -> dict[str, int]: ...


# ---- what is written --------------------------------------------------------------------------------------------


def turn_write(*, user_id: str, session_id: str, query: Query, response: FinalResponse) -> OutboxWrite | None:
    """The outbox write mirroring one exchange into the user's Zep session (None when there is nothing to say)."""
    common = {
        RESPONSE_ID_KEY: response.response_id,
        USER_ID_KEY: user_id,
        SESSION_ID_KEY: session_id,
        "query_id": query.query_id,
    }
    messages = []
    if query.text.strip():
        messages.append(
            ZepMessage(
                uuid=message_id(response.response_id, "user"),
                role="user",
                role_type="user",
                content=query.text,
                metadata={**common, "asked_at": query.asked_at.isoformat()},
            )
        )
    if response.answer.strip():
        citations = [
            {"number": c.number, "source_type": c.source_type, "title": c.title, "url": c.url, "source_id": c.source_id}
            for c in response.citations[:MAX_CITATIONS_IN_METADATA]
        ]
        sources = sorted({r.source_type for r in response.source_reports if r.chunk_count})
        messages.append(
            ZepMessage(
                uuid=message_id(response.response_id, "assistant"),
                role="assistant",
                role_type="assistant",
                content=response.answer,
                metadata={
                    **common,
                    "question": query.text[:1_000],
                    "asked_at": query.asked_at.isoformat(),
                    "answered_at": response.created_at.isoformat(),
                    "citations": citations,
                    "sources_used": sources,
                    "confidence": response.confidence,
                    "answer_kind": response.answer_kind,
                },
            )
        )
    if not messages:
        return None
    payload = {
        "user_id": user_id,
        "session_id": session_id,
        "response_id": response.response_id,
        "messages": [m.model_dump(mode="json") for m in messages],
    }
    return OutboxWrite(kind=ZEP_ADD_TURN, payload=payload, idempotency_key=f"{ZEP_ADD_TURN}:{response.response_id}")


def forget_write(user_id: str) -> OutboxWrite:
    """Delete the user in Zep too; pass it to ``MemoryStore.forget_user(then_enqueue=[...])``."""
    stamp = datetime.now(UTC).isoformat()
    return OutboxWrite(
        kind=ZEP_DELETE_USER, payload={"user_id": user_id}, idempotency_key=f"{ZEP_DELETE_USER}:{user_id}:{stamp}"
    )


# ---- retry policy and circuit -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    base_delay_s: float = 0.5
    max_delay_s: float = 5.0  # also the longest Zep can be back before the worker notices (circuit probe)
    permanent_after: int = 3  # failures of a write Zep refuses (4xx) before it is marked dead

    def delay(self, failures: int) -> float:
        """Exponential backoff with "equal jitter": between half and all of min(max, base·2^(n-1))."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0 ** max(0, failures - 1))
        return ceiling / 2 + _JITTER.uniform(0, ceiling / 2)


_JITTER = random.SystemRandom()


class _Circuit:
    """Stops calling a Zep that is down: after a retryable failure, wait, then let one probe through."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.failures = 0
        self.open_until = 0.0  # time.monotonic()

    def record_failure(self) -> None:
        self.failures += 1
        self.open_until = time.monotonic() + self.policy.delay(self.failures)

    def record_success(self) -> None:
        self.failures = 0
        self.open_until = 0.0

    def wait_s(self) -> float:
        return max(0.0, self.open_until - time.monotonic())


@dataclass(frozen=True)
class DrainReport:
    """What one ``drain`` did. ``pending`` is the store's count afterwards (dead rows are not pending)."""

    delivered: int
    dead: int
    rescheduled: int
    pending: int
    seconds: float


_NO_CONNECTION_ERROR = ZepError("unreachable", "Zep was not called: the circuit is open after earlier failures")


class OutboxWorker:
    """Delivers outbox rows to Zep in the background. See the module docstring."""

    def __init__(
        self,
        store: OutboxStore,
        zep: ZepMemory,
        *,
        policy: RetryPolicy | None = None,
        batch_size: int = 32,
        concurrency: int = 8,
        poll_interval_s: float = 2.0,
        lease_s: float = 60.0,
    ) -> None:
        self.store = store
        self.zep = zep
        self.policy = policy or RetryPolicy()
        self.batch_size = batch_size
        self.poll_interval_s = poll_interval_s
        self.lease_s = lease_s
        self._limit = asyncio.Semaphore(concurrency)
        self._circuit = _Circuit(self.policy)
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.delivered = self.dead = self.rescheduled = 0

    # ---- enqueue ---------------------------------------------------------------------------------------------
    async def enqueue(self, user_id: str, write: OutboxWrite) -> bool:
        """Persist the write (a local insert) and wake the worker. False when the key was already enqueued."""
        added = await self.store.enqueue_outbox(
            user_id=user_id, kind=write.kind, payload=write.payload, idempotency_key=write.idempotency_key
        )
        self._wake.set()
        return added

    async def enqueue_turn(self, *, user_id: str, session_id: str, query: Query, response: FinalResponse) -> bool:
        write = turn_write(user_id=user_id, session_id=session_id, query=query, response=response)
        return await self.enqueue(user_id, write) if write is not None else False

    def wake(self) -> None:
        """Deliver now rather than at the next poll (after writes enqueued directly through the store)."""
        self._wake.set()

    # ---- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Run in the background until ``stop()``. Idempotent."""
        if self._task is None or self._task.done():
            self._stop.clear()
            self._task = asyncio.create_task(self._run(), name="zep-outbox-worker")

    async def stop(self, *, timeout_s: float = 5.0) -> None:
        """Stop the background loop; a delivery in flight gets ``timeout_s`` to finish (its row stays leased and
        is retried later otherwise)."""
        self._stop.set()
        task, self._task = self._task, None
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout_s)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        while not self._stop.is_set():
            processed = 0
            try:
                processed = await self.run_once()
            except MemoryStoreError as error:  # the store itself is unavailable: try again after a pause
                logger.warning("outbox: store unavailable: %s", error)
            except Exception:  # the outermost guard: a bug must not kill delivery for the process lifetime
                logger.exception("outbox worker cycle failed")
            if processed == 0 and not self._stop.is_set():
                await self._pause()

    async def _pause(self) -> None:
        """Sleep until the circuit closes, or (when it is closed) until an enqueue or the poll interval; a stop
        ends either at once. New writes do not shorten an open circuit: Zep is down for them too."""
        circuit_wait = self._circuit.wait_s()
        events = [self._stop] if circuit_wait > 0 else [self._stop, self._wake]
        waiters = [asyncio.ensure_future(e.wait()) for e in events]
        try:
            await asyncio.wait(
                waiters,
                timeout=min(circuit_wait or self.poll_interval_s, self.poll_interval_s),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def drain(self, timeout_s: float) -> DrainReport:
        """Deliver until nothing is due before the deadline (or it passes). For tests, the CLI and shutdown.
        Works whether or not the background loop runs (both may claim; the lease keeps them apart)."""
        started = time.monotonic()
        deadline = started + timeout_s
        before = (self.delivered, self.dead, self.rescheduled)
        while True:
            processed = await self.run_once()
            if processed:
                continue
            remaining = deadline - time.monotonic()
            horizon = datetime.now(UTC) + timedelta(seconds=max(0.0, remaining))
            counts = await self.store.outbox_counts(now=horizon)
            if counts["due"] == 0 or remaining <= 0:
                break
            await asyncio.sleep(min(remaining, max(self._circuit.wait_s(), 0.05), self.poll_interval_s))
        counts = await self.store.outbox_counts()
        return DrainReport(
            delivered=self.delivered - before[0],
            dead=self.dead - before[1],
            rescheduled=self.rescheduled - before[2],
            pending=counts["pending"],
            seconds=time.monotonic() - started,
        )

    # ---- one cycle -------------------------------------------------------------------------------------------
    async def run_once(self) -> int:
        """Claim due rows and try to deliver them; returns how many were claimed (0 when the circuit is open)."""
        if self._circuit.wait_s() > 0:
            return 0
        self._wake.clear()
        probing = self._circuit.failures > 0  # half-open: one row tells whether Zep is back
        items = await self.store.claim_due_outbox(limit=1 if probing else self.batch_size, lease_s=self.lease_s)
        if not items:
            return 0
        groups: dict[str, list[OutboxItem]] = {}
        for item in items:  # one session's turns go in order; sessions go concurrently
            groups.setdefault(str(item.payload.get("session_id") or item.user_id), []).append(item)
        delivered: list[OutboxItem] = []
        outcomes = await asyncio.gather(
            *(self._deliver_group(g, delivered) for g in groups.values()), return_exceptions=True
        )
        if delivered:
            # One transaction for the whole cycle. If it fails, the rows stay leased and are redelivered after the
            # lease: Zep dedups by message id, so that costs calls, not duplicates.
            await self.store.mark_delivered_many([item.id for item in delivered])
            self.delivered += len(delivered)
        for outcome in outcomes:  # every group finished; now surface a store failure (its rows stay leased)
            if isinstance(outcome, BaseException):
                raise outcome
        return len(items)

    async def _deliver_group(self, items: Sequence[OutboxItem], delivered: list[OutboxItem]) -> None:
        async with self._limit:
            for item in items:
                if self._circuit.wait_s() > 0:  # Zep failed meanwhile: do not queue more calls behind it
                    await self._reschedule(item, _NO_CONNECTION_ERROR, at=self._circuit.wait_s())
                    continue
                if await self._deliver(item):
                    delivered.append(item)

    async def _deliver(self, item: OutboxItem) -> bool:
        """Send one row to Zep; True when Zep has it (the caller records the delivery). A failure is recorded
        here (rescheduled, or dead)."""
        try:
            outcome = await self._dispatch(item)
        except ZepError as error:
            if error.retryable:
                if error.status_code != 404:  # 404: this session vanished, not Zep
                    self._circuit.record_failure()
                await self._reschedule(item, error, at=self.policy.delay(item.failures + 1))
            elif item.failures + 1 >= self.policy.permanent_after:
                await self._bury(item, f"{error.kind} (HTTP {error.status_code}): {error.message}")
            else:
                await self._reschedule(item, error, at=self.policy.delay(item.failures + 1))
            return False
        except (ValidationError, KeyError, TypeError) as error:  # a payload this version cannot read
            await self._bury(item, f"unreadable payload for {item.kind}: {error}")
            return False
        self._circuit.record_success()
        logger.debug("outbox: %s %s (%s)", item.kind, item.idempotency_key, outcome)
        return True

    async def _dispatch(self, item: OutboxItem) -> str:
        payload = item.payload
        if item.kind == ZEP_ADD_TURN:
            messages = [ZepMessage.model_validate(m) for m in payload["messages"]]
            return await self.zep.deliver_turn(
                user_id=payload["user_id"], session_id=payload["session_id"], messages=messages, retry=item.attempts > 1
            )
        if item.kind == ZEP_DELETE_USER:
            return await self.zep.delete_user(payload["user_id"])
        raise KeyError(f"unknown outbox kind {item.kind!r}")

    async def _reschedule(self, item: OutboxItem, error: ZepError, *, at: float) -> None:
        logger.info(
            "outbox: %s not delivered (%s: %s); retry in %.1f s", item.idempotency_key, error.kind, error.message, at
        )
        await self.store.mark_failed(
            item.id, error=f"{error.kind}: {error.message}", next_attempt_at=datetime.now(UTC) + timedelta(seconds=at)
        )
        self.rescheduled += 1

    async def _bury(self, item: OutboxItem, reason: str) -> None:
        logger.error(
            "outbox: %s refused for good after %d attempt(s); marked dead: %s",
            item.idempotency_key,
            item.attempts,
            reason,
        )
        if await self.store.mark_dead(item.id, error=reason):
            self.dead += 1


__all__ = [
    "ZEP_ADD_TURN",
    "ZEP_DELETE_USER",
    "DrainReport",
    "OutboxStore",
    "OutboxWorker",
    "RetryPolicy",
    "forget_write",
    "turn_write",
]
