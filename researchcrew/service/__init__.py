"""The HTTP service (a door, like the SDK and the CLI): ``create_app(settings)`` builds the FastAPI app.

Extend it with more routers (``app.include_router``); a route takes ``Service`` (the process's runtime, accounts,
sessions and limits), ``CurrentUser`` (the user of the bearer key, rate-limited) and raises ``ApiProblem`` for
every failure, which is answered as ``application/problem+json``. ``questions`` holds what asking over HTTP needs
(the concurrency slot, cancellation on disconnect, the event stream).

Imports are lazy, so ``import researchcrew.service`` costs nothing until the app is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from researchcrew.service._app import create_app
    from researchcrew.service._auth import CurrentUser, User
    from researchcrew.service._problems import ApiProblem
    from researchcrew.service._state import Service, ServiceState

__all__ = ["ApiProblem", "CurrentUser", "Service", "ServiceState", "User", "create_app"]

_HOMES = {
    "create_app": "researchcrew.service._app",
    "CurrentUser": "researchcrew.service._auth",
    "User": "researchcrew.service._auth",
    "ApiProblem": "researchcrew.service._problems",
    "Service": "researchcrew.service._state",
    "ServiceState": "researchcrew.service._state",
}


def __getattr__(name: str) -> Any:
    import importlib

    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'researchcrew.service' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
