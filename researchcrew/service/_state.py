"""What one service process holds: its runtime and what stands on it. Built in the app's lifespan and kept in
``app.state.service``; routes get it with the ``Service`` dependency."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from researchcrew.jobs.api import Jobs
from researchcrew.knowledge.library import Library
from researchcrew.runtime import Runtime
from researchcrew.service._problems import ApiProblem
from researchcrew.service._throttle import Throttle
from researchcrew.service.accounts import Accounts
from researchcrew.service.chat_sessions import ChatSessions
from researchcrew.settings import Settings


@dataclass
class ServiceState:
    settings: Settings
    runtime: Runtime
    accounts: Accounts
    sessions: ChatSessions
    throttle: Throttle
    jobs: Jobs  # batch jobs of this process (researchcrew.service._batch)
    library: Library  # documents added over HTTP, ingested in the background (researchcrew.knowledge.library)
    questions: set[asyncio.Task[object]] = field(default_factory=set)  # answers being researched right now


def service_state(request: Request) -> ServiceState:
    state = getattr(request.app.state, "service", None)
    if not isinstance(state, ServiceState):
        raise ApiProblem(503, "The service is not running (it is starting or stopping); retry shortly.")
    return state


Service = Annotated[ServiceState, Depends(service_state)]
