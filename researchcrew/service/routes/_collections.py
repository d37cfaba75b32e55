"""``/v1/collections``: the document collections a user reads, and the named shared ones they own.

Everyone reads ``shared``; each user reads their private ``user:<id>``; a named collection is read by its owner and
its members. A user makes named collections (becoming their owner), changes their members and removes them (with
their documents); a member reads but may not change (403); a collection the user does not read answers 404 exactly
like one that does not exist. A member removed loses access with their next question: searches ask the store each
time (``knowledge/access.py``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from fastapi import APIRouter, Path, Response
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from researchcrew.contracts._base import StorableInput
from researchcrew.knowledge.access import MEMBER_PATTERN, NAME_PATTERN
from researchcrew.knowledge.collections_store import CollectionInfo, CollectionsStore
from researchcrew.service._auth import CurrentUser
from researchcrew.service._problems import problem_responses
from researchcrew.service._state import Service

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/collections", tags=["collections"], responses=problem_responses(400, 401, 413, 422, 429))

CollectionName = Annotated[str, Path(min_length=1, max_length=300, description="The collection's name.")]
Member = Annotated[str, StringConstraints(pattern=MEMBER_PATTERN.pattern)]  # a user id: 1-256 characters, no comma


class CollectionCreate(StorableInput):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        pattern=NAME_PATTERN.pattern,
        description="1-64 lower-case letters, digits, '_', '.', '-' (not `shared`; `user:...` names are private).",
    )
    members: list[Member] = Field(default_factory=list, max_length=1000, description="Who reads it besides you.")


class MembersChange(StorableInput):
    model_config = ConfigDict(extra="forbid")

    add: list[Member] = Field(default_factory=list, max_length=1000, description="User ids to add.")
    remove: list[Member] = Field(default_factory=list, max_length=1000, description="User ids to remove.")


class CollectionList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    collections: list[CollectionInfo] = Field(description="`shared`, your private collection, and the named ones.")


async def _store(service: Service) -> CollectionsStore:
    return CollectionsStore((await service.runtime.memory_store()).engine)


@router.get("", response_model=CollectionList, summary="List the collections you read.")
async def list_collections(service: Service, user: CurrentUser) -> CollectionList:
    return CollectionList(collections=await (await _store(service)).list_collections(user.user_id))


@router.post(
    "",
    status_code=201,
    response_model=CollectionInfo,
    responses=problem_responses(409),
    summary="Make a named shared collection; you own it.",
)
async def create_collection(service: Service, user: CurrentUser, body: CollectionCreate) -> CollectionInfo:
    return await (await _store(service)).create(body.name, members=body.members, owner_id=user.user_id)


@router.get(
    "/{name}", response_model=CollectionInfo, responses=problem_responses(404), summary="One collection you read."
)
async def read_collection(service: Service, user: CurrentUser, name: CollectionName) -> CollectionInfo:
    return await (await _store(service)).get(name, acting_user=user.user_id)


@router.patch(
    "/{name}/members",
    response_model=CollectionInfo,
    responses=problem_responses(403, 404),
    summary="Add or remove members of a collection you own; a removed member loses access at once.",
)
async def change_members(
    service: Service, user: CurrentUser, name: CollectionName, body: MembersChange
) -> CollectionInfo:
    return await (await _store(service)).change_members(
        name, add=body.add, remove=body.remove, acting_user=user.user_id
    )


@router.delete(
    "/{name}",
    status_code=204,
    response_class=Response,
    responses=problem_responses(403, 404),
    summary="Remove a collection you own, with its documents.",
)
async def delete_collection(service: Service, user: CurrentUser, name: CollectionName) -> Response:
    store = await _store(service)
    # 403 for a member (and for `shared` and private collections, which are not removed), 404 for anyone else.
    await store.check_owner(name, acting_user=user.user_id)
    knowledge_base = await service.runtime.knowledge_base()
    chunks = await asyncio.to_thread(knowledge_base.remove_collection, name)
    await store.remove(name, acting_user=user.user_id)
    logger.info("user %s removed collection %s (%d chunks)", user.user_id, name, chunks)
    return Response(status_code=204)
