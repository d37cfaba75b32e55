"""``UnavailableSource``: a source whose backend could not be opened, kept in the fan-out so that it is reported.

When the memory store cannot be reached at start-up the answer must still come back, with memory listed as a
failed source and the reason, exactly as an unreachable knowledge base is: dropping the source silently would leave
a gap nobody sees. This tool stands in for it and fails every call, at once, with the kind and the one-line reason
the runtime recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from researchcrew.contracts.chunks import ContextChunk
from researchcrew.errors import FailureKind, ToolError
from researchcrew.tools.base import Tool


class UnavailableSource(Tool):
    """Fails every search with the recorded reason (the backend behind this source could not be opened)."""

    name: ClassVar[str] = "unavailable"
    description: ClassVar[str] = "A source whose backend could not be opened; every search reports why."
    source_type: ClassVar[str] = "unavailable"

    def __init__(self, source_type: str, tool_name: str, *, kind: FailureKind, reason: str) -> None:
        # Instance attributes shadow the class attributes: it stands in for any source.
        self.source_type = source_type  # type: ignore[misc]
        self.name = tool_name  # type: ignore[misc]
        self.kind: FailureKind = kind
        self.reason = reason

    async def _search(self, query: str, **kwargs: Any) -> Sequence[ContextChunk]:
        raise ToolError(self.kind, self.reason)


__all__ = ["UnavailableSource"]
