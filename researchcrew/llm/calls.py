"""One call to a language model from async code: ``await complete(llm, messages)``.

crewAI's ``BaseLLM.acall`` raises ``NotImplementedError`` unless the subclass implements it; a custom ``BaseLLM``
that only implements the blocking ``call`` is still a valid model. Its call then runs in a worker thread, so the
event loop (other questions, the service's other users) never waits for a model. Every LLM call of the pipeline
goes through here; callers bound it with their own ``asyncio.timeout``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any


async def complete(llm: Any, messages: Sequence[Mapping[str, Any]]) -> Any:
    """The reply of ``llm`` (a crewAI ``BaseLLM``) to ``messages``, without blocking the event loop."""
    prompt = list(messages)
    try:
        return await llm.acall(prompt)
    except NotImplementedError:
        return await asyncio.to_thread(llm.call, prompt)


__all__ = ["complete"]
