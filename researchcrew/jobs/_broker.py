"""taskiq-redis's stream broker, with the redelivery of a dead worker's messages made unconditional.

``RedisStreamBroker.listen`` (taskiq-redis 1.2.4) claims the messages other consumers left unacknowledged for
longer than ``idle_timeout`` (``XAUTOCLAIM``) only right after ``XREADGROUP`` returned *new* messages: on a queue
where nothing new arrives — the last questions of a run, when a worker is SIGKILLed — the dead worker's questions
are never redelivered (found by tests/jobs/test_queue.py). This subclass runs the claim after every read, empty
ones included, at most once per ``claim_every_s``; everything else (consumer group, acknowledgement, message
format) is the library's.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from typing import Any

from redis.asyncio import Redis
from taskiq import AckableMessage
from taskiq_redis import RedisStreamBroker


class ReclaimingStreamBroker(RedisStreamBroker):
    """``RedisStreamBroker`` whose listener always claims stale messages of dead consumers."""

    claim_every_s = 1.0

    async def listen(self) -> AsyncGenerator[AckableMessage, None]:
        streams = [self.queue_name, *self.additional_streams.keys()]
        last_claim = 0.0
        async with Redis(connection_pool=self.connection_pool) as connection:
            while True:
                fetched: Any = await connection.xreadgroup(
                    self.consumer_group_name,
                    self.consumer_name,
                    {self.queue_name: ">", **self.additional_streams},  # type: ignore[dict-item]
                    block=self.block,
                    noack=False,
                    count=self.count,
                )
                for stream, messages in fetched or []:
                    for message_id, fields in messages:
                        yield AckableMessage(data=fields[b"data"], ack=self._ack_generator(message_id, stream))
                if time.monotonic() - last_claim < self.claim_every_s:
                    continue
                last_claim = time.monotonic()
                for stream in streams:
                    claimed: Any = await connection.xautoclaim(
                        name=stream,
                        groupname=self.consumer_group_name,
                        consumername=self.consumer_name,
                        min_idle_time=self.idle_timeout,
                        start_id="0-0",
                        count=self.unacknowledged_batch_size,
                    )
                    for message_id, fields in claimed[1]:
                        if fields:  # an entry trimmed from the stream while pending has no fields left
                            yield AckableMessage(data=fields[b"data"], ack=self._ack_generator(message_id, stream))
