"""Authentication: a FastAPI dependency that yields the user a request runs as.

Every route that touches a user's data takes ``CurrentUser`` (authenticated, then counted against the user's rate
limit). The user id comes from the API key (``Authorization: Bearer <key>``), never from a request body. With
``service.auth`` off (``serve --no-auth``, loopback hosts only) every request runs as ``service.local_user``. A
request that came over the service's Unix socket (mode 0600: its owner only; ``researchcrew.service._local_socket``)
runs as the user its ``X-Researchcrew-User`` header names (the CLI's ``--user``), without a key or rate limit.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field

from researchcrew.service._local_socket import LOCAL_USER_HEADER, came_over_local_socket
from researchcrew.service._problems import ApiProblem
from researchcrew.service._state import Service

logger = logging.getLogger(__name__)

_bearer = HTTPBearer(auto_error=False, description="An API key from `researchcrew users add NAME`.")
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="researchcrew"'}


class User(BaseModel):
    """Who a request runs as."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_id: str = Field(
        min_length=1, max_length=256, description="The user's id: their memory and sessions are filed under it."
    )
    local: bool = Field(default=False, description="Whether the request came over the service's Unix socket.")


def local_socket_user(service: Service, request: Request) -> User | None:
    """The user of a request that came over the service's Unix socket (the header's, else the local user), or None
    for every other request."""
    if not came_over_local_socket(request.scope, service.settings.service_socket_path):
        return None
    named = request.headers.get(LOCAL_USER_HEADER, "").strip() or service.settings.service.local_user
    if len(named) > 256:
        raise ApiProblem(422, f"{LOCAL_USER_HEADER} is longer than 256 characters.")
    return User(user_id=named, local=True)


async def bearer_credentials(request: Request) -> HTTPAuthorizationCredentials | None:
    """The request's ``Authorization: Bearer`` credentials (None without them), for an endpoint outside FastAPI's
    dependency injection (``/mcp``, ``researchcrew.service._mcp_http``)."""
    return await _bearer(request)


async def authenticated_user(
    service: Service,
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> User:
    """The user of a valid key (401 otherwise), the local socket's user, or the local user when authentication is
    off."""
    if (local := local_socket_user(service, request)) is not None:
        return local
    if not service.settings.service.auth:
        return User(user_id=service.settings.service.local_user)
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise ApiProblem(
            401, "Send an API key: `Authorization: Bearer <key>`.", headers=_CHALLENGE, kind="unauthorized"
        )
    user_id = await service.accounts.authenticate(credentials.credentials)
    if user_id is None:
        raise ApiProblem(401, "The API key is not valid (unknown, revoked or mistyped).", headers=_CHALLENGE)
    return User(user_id=user_id)


async def rate_limited_user(service: Service, user: Annotated[User, Depends(authenticated_user)]) -> User:
    """The authenticated user, counted against their rate limit (429 with Retry-After past it); the owner's
    commands over the local socket are not counted (in process they would not be either)."""
    if user.local:
        return user
    retry_after = await service.throttle.hit(user.user_id)
    if retry_after is not None:
        raise ApiProblem(
            429,
            f"Rate limit reached ({service.settings.service.rate_limit} per user); retry in {retry_after} s.",
            headers={"Retry-After": str(retry_after)},
            kind="rate-limited",
        )
    return user


CurrentUser = Annotated[User, Depends(rate_limited_user)]
