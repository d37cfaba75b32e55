"""researchcrew: a research assistant on crewAI whose answers cite every claim.

The public API is the stub next to this file (``__init__.pyi``): one list, read by type checkers and, through
``lazy_loader.attach_stub``, by this module, which resolves every name on first access (PEP 562). So
``import researchcrew`` — which every ``researchcrew`` CLI call does — costs almost nothing, and the heavy parts
(pydantic model building, crewAI, torch, pymilvus) load only when used. A test pins ``__all__``.
"""

from __future__ import annotations

from typing import Any

import lazy_loader

_lazy_getattr, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)


def __getattr__(name: str) -> Any:
    try:
        return _lazy_getattr(name)
    except AttributeError:
        raise AttributeError(f"module 'researchcrew' has no attribute {name!r}") from None
