"""The entity graph and preferences parts of the memory store (SQL only; ``MemoryStore`` owns the sessions).

Upserts are written as ``INSERT ... ON CONFLICT DO NOTHING`` followed by an arithmetic ``UPDATE`` so that two
memory runs for the same user at the same time never create duplicates or lose a count, on SQLite and PostgreSQL.

Confidence of repeated observations combines as noisy-OR, ``1 - (1 - old) * (1 - new)``: each independent
mention makes it more certain the entity (relation) is real, and it stays in [0, 1].
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from researchcrew.contracts.query import UserPreferences
from researchcrew.db.engine import dialect_insert, dialect_name
from researchcrew.db.models import EntityRow, MentionRow, PreferencesRow, RelationshipRow
from researchcrew.memory.records import (
    EntityMention,
    EntityRecord,
    EntityRelation,
    MentionRecord,
    RelationshipRecord,
    StoredPreferences,
)

GENERIC_TYPES = frozenset({"other", "unknown", ""})
_EDGE_PUNCTUATION = " \t\n.,;:!?\"'`()[]{}<>"
_WORD = re.compile(r"[\w\-\.]+", re.UNICODE)


def normalize_name(name: str) -> str:
    """The identity of an entity within a user's graph: case-folded, whitespace collapsed, edge punctuation off."""
    return " ".join(name.casefold().split()).strip(_EDGE_PUNCTUATION)


def _insert(session: AsyncSession, table: Any) -> Any:
    return dialect_insert(dialect_name(session), table)


def _noisy_or(column: Any, confidence: float) -> Any:
    return 1.0 - (1.0 - column) * (1.0 - confidence)


# ---- entities -------------------------------------------------------------------------------------------------


def _merge_mentions(mentions: Sequence[EntityMention]) -> dict[str, EntityMention]:
    """One mention per entity per answer: the most confident one, keeping the first non-empty context."""
    merged: dict[str, EntityMention] = {}
    for mention in mentions:
        key = normalize_name(mention.name)
        if not key:
            continue
        seen = merged.get(key)
        if seen is None:
            merged[key] = mention
        elif mention.confidence > seen.confidence:
            merged[key] = mention.model_copy(update={"context": seen.context or mention.context})
    return merged


async def record_entities(
    session: AsyncSession, *, user_id: str, response_id: str, mentions: Sequence[EntityMention], now: datetime
) -> tuple[int, int]:
    """Record the entities one answer mentions. Returns (added, updated); a repeat for the same answer is a no-op."""
    added = updated = 0
    for key, mention in _merge_mentions(mentions).items():
        new_id = (
            await session.execute(
                _insert(session, EntityRow)
                .values(
                    user_id=user_id,
                    name=mention.name,
                    normalized_name=key,
                    entity_type=mention.type,
                    confidence=mention.confidence,
                    mention_count=1,
                    first_seen=now,
                    last_seen=now,
                )
                .on_conflict_do_nothing(index_elements=["user_id", "normalized_name"])
                .returning(EntityRow.id)
            )
        ).scalar_one_or_none()
        entity_id = new_id if new_id is not None else await _entity_id(session, user_id, key)
        mention_id = (
            await session.execute(
                _insert(session, MentionRow)
                .values(
                    entity_id=entity_id,
                    user_id=user_id,
                    response_id=response_id,
                    confidence=mention.confidence,
                    context=mention.context,
                    created_at=now,
                )
                .on_conflict_do_nothing(index_elements=["entity_id", "response_id"])
                .returning(MentionRow.id)
            )
        ).scalar_one_or_none()
        if new_id is not None:
            added += 1
        elif mention_id is not None:
            values: dict[str, Any] = {
                "mention_count": EntityRow.mention_count + 1,
                "last_seen": now,
                "confidence": _noisy_or(EntityRow.confidence, mention.confidence),
            }
            if mention.type not in GENERIC_TYPES:
                # A specific type replaces a generic one; otherwise the more confident observation decides.
                values["entity_type"] = case(
                    (
                        or_(EntityRow.entity_type.in_(GENERIC_TYPES), EntityRow.confidence < mention.confidence),
                        mention.type,
                    ),
                    else_=EntityRow.entity_type,
                )
            await session.execute(update(EntityRow).where(EntityRow.id == entity_id).values(**values))
            updated += 1
    return added, updated


async def _entity_id(session: AsyncSession, user_id: str, key: str) -> int:
    return (
        await session.execute(
            select(EntityRow.id).where(EntityRow.user_id == user_id, EntityRow.normalized_name == key)
        )
    ).scalar_one()


async def _ensure_entity(session: AsyncSession, user_id: str, name: str, confidence: float, now: datetime) -> int:
    """The entity's id, creating it (type 'other', no mentions yet) when a relation names it first."""
    key = normalize_name(name)
    new_id = (
        await session.execute(
            _insert(session, EntityRow)
            .values(
                user_id=user_id,
                name=name,
                normalized_name=key,
                entity_type="other",
                confidence=confidence,
                mention_count=0,
                first_seen=now,
                last_seen=now,
            )
            .on_conflict_do_nothing(index_elements=["user_id", "normalized_name"])
            .returning(EntityRow.id)
        )
    ).scalar_one_or_none()
    return new_id if new_id is not None else await _entity_id(session, user_id, key)


def entity_record(row: EntityRow) -> EntityRecord:
    return EntityRecord(
        name=row.name,
        type=row.entity_type,
        confidence=row.confidence,
        mention_count=row.mention_count,
        first_seen=row.first_seen,
        last_seen=row.last_seen,
    )


def _query_score(key: str, query: str, query_words: set[str]) -> int:
    """2: the entity's name appears in the query; 1: they share a word of 3+ characters; 0: unrelated."""
    if re.search(rf"(?<!\w){re.escape(key)}(?!\w)", query):
        return 2
    return 1 if any(len(w) >= 3 and w in query_words for w in key.split()) else 0


async def entities(session: AsyncSession, *, user_id: str, query_text: str | None, limit: int) -> list[EntityRecord]:
    ranked = select(EntityRow).where(EntityRow.user_id == user_id)
    ranked = ranked.order_by(EntityRow.mention_count.desc(), EntityRow.last_seen.desc(), EntityRow.id)
    if not query_text or not query_text.strip():
        return [entity_record(row) for row in (await session.scalars(ranked.limit(limit))).all()]
    query = normalize_name(query_text)
    words = {w.strip(_EDGE_PUNCTUATION) for w in _WORD.findall(query)}
    scored = [(_query_score(row.normalized_name, query, words), row) for row in (await session.scalars(ranked)).all()]
    scored = [(score, row) for score, row in scored if score > 0]
    scored.sort(key=lambda pair: -pair[0])  # stable: keeps mention-count order within a score
    return [entity_record(row) for _, row in scored[:limit]]


async def mentions(session: AsyncSession, *, user_id: str) -> list[MentionRecord]:
    rows = await session.execute(
        select(MentionRow, EntityRow.name)
        .join(EntityRow, EntityRow.id == MentionRow.entity_id)
        .where(MentionRow.user_id == user_id)
        .order_by(MentionRow.id)
    )
    return [
        MentionRecord(
            entity=name,
            response_id=m.response_id,
            confidence=m.confidence,
            context=m.context,
            created_at=m.created_at,
        )
        for m, name in rows.all()
    ]


# ---- relationships --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _RelationKey:
    source: str
    target: str
    relation: str


def _merge_relations(relations: Sequence[EntityRelation]) -> dict[_RelationKey, EntityRelation]:
    merged: dict[_RelationKey, EntityRelation] = {}
    for rel in relations:
        source, target = rel.source, rel.target
        if normalize_name(source) == normalize_name(target) or not normalize_name(source) or not normalize_name(target):
            continue  # an entity does not relate to itself
        if rel.symmetric and normalize_name(target) < normalize_name(source):
            source, target = target, source  # one canonical direction for undirected relations
            rel = rel.model_copy(update={"source": source, "target": target})
        key = _RelationKey(normalize_name(source), normalize_name(target), rel.relation)
        if key not in merged or rel.confidence > merged[key].confidence:
            merged[key] = rel
    return merged


async def record_relationships(
    session: AsyncSession,
    *,
    user_id: str,
    relations: Sequence[EntityRelation],
    response_id: str | None,
    now: datetime,
) -> int:
    """Record relations (both directions). Returns how many were new. See ``MemoryStore.record_relationships``."""
    added = 0
    for rel in _merge_relations(relations).values():
        source_id = await _ensure_entity(session, user_id, rel.source, rel.confidence, now)
        target_id = await _ensure_entity(session, user_id, rel.target, rel.confidence, now)
        common = {
            "user_id": user_id,
            "relation": rel.relation,
            "confidence": rel.confidence,
            "count": 1,
            "first_seen": now,
            "last_seen": now,
            "last_response_id": response_id,
        }
        conflict = ["user_id", "source_entity_id", "target_entity_id", "relation", "inverse"]
        forward = (
            await session.execute(
                _insert(session, RelationshipRow)
                .values(source_entity_id=source_id, target_entity_id=target_id, inverse=False, **common)
                .on_conflict_do_nothing(index_elements=conflict)
                .returning(RelationshipRow.id)
            )
        ).scalar_one_or_none()
        if forward is not None:
            await session.execute(
                _insert(session, RelationshipRow)
                .values(source_entity_id=target_id, target_entity_id=source_id, inverse=True, **common)
                .on_conflict_do_nothing(index_elements=conflict)
            )
            added += 1
            continue
        pair = or_(
            and_(
                RelationshipRow.source_entity_id == source_id,
                RelationshipRow.target_entity_id == target_id,
                RelationshipRow.inverse.is_(False),
            ),
            and_(
                RelationshipRow.source_entity_id == target_id,
                RelationshipRow.target_entity_id == source_id,
                RelationshipRow.inverse.is_(True),
            ),
        )
        condition = [RelationshipRow.user_id == user_id, RelationshipRow.relation == rel.relation, pair]
        if response_id is not None:  # observed again by the same answer (a retry): nothing new
            condition.append(RelationshipRow.last_response_id.is_distinct_from(response_id))
        await session.execute(
            update(RelationshipRow)
            .where(*condition)
            .values(
                count=RelationshipRow.count + 1,
                confidence=_noisy_or(RelationshipRow.confidence, rel.confidence),
                last_seen=now,
                last_response_id=response_id,
            )
        )
    return added


async def relationships(session: AsyncSession, *, user_id: str, entity_name: str | None) -> list[RelationshipRecord]:
    source, target = aliased(EntityRow), aliased(EntityRow)
    stmt = (
        select(RelationshipRow, source.name, target.name)
        .join(source, source.id == RelationshipRow.source_entity_id)
        .join(target, target.id == RelationshipRow.target_entity_id)
        .where(RelationshipRow.user_id == user_id)
    )
    if entity_name is None:
        stmt = stmt.where(RelationshipRow.inverse.is_(False))  # each relation once, as recorded
    else:
        stmt = stmt.where(source.normalized_name == normalize_name(entity_name))  # both directions, from it
    stmt = stmt.order_by(RelationshipRow.count.desc(), RelationshipRow.confidence.desc(), RelationshipRow.id)
    return [
        RelationshipRecord(
            source=source_name,
            target=target_name,
            relation=row.relation,
            inverse=row.inverse,
            confidence=row.confidence,
            count=row.count,
            first_seen=row.first_seen,
            last_seen=row.last_seen,
        )
        for row, source_name, target_name in (await session.execute(stmt)).all()
    ]


# ---- preferences ----------------------------------------------------------------------------------------------


def _preferences_from_row(row: PreferencesRow | None) -> StoredPreferences:
    if row is None:
        return StoredPreferences()
    return StoredPreferences(
        preferences=UserPreferences.model_validate(row.preferences), updated_at=row.updated_at, **row.counters
    )


async def get_preferences(session: AsyncSession, *, user_id: str, for_update: bool = False) -> StoredPreferences:
    stmt = select(PreferencesRow).where(PreferencesRow.user_id == user_id)
    if for_update:
        stmt = stmt.with_for_update()
    return _preferences_from_row((await session.scalars(stmt)).one_or_none())


async def save_preferences(
    session: AsyncSession, *, user_id: str, preferences: StoredPreferences, now: datetime
) -> bool:
    current = await get_preferences(session, user_id=user_id, for_update=True)
    if current.same_as(preferences):  # unchanged, or the defaults a user without a row already has
        return False
    values = {
        "preferences": preferences.preferences.model_dump(mode="json"),
        "counters": preferences.model_dump(mode="json", exclude={"preferences", "updated_at"}),
        "updated_at": now,
    }
    stmt = _insert(session, PreferencesRow).values(user_id=user_id, **values)
    await session.execute(stmt.on_conflict_do_update(index_elements=["user_id"], set_=values))
    return True


async def update_preferences(
    session: AsyncSession,
    *,
    user_id: str,
    update: Callable[[StoredPreferences], StoredPreferences],
    now: datetime,
) -> tuple[StoredPreferences, bool]:
    """Read-modify-write in one transaction. The row is created first (if missing) so that, on PostgreSQL,
    ``SELECT ... FOR UPDATE`` has a row to lock and concurrent updates of one user serialise; on SQLite the
    write transaction's BEGIN IMMEDIATE does the same."""
    defaults = StoredPreferences()
    await session.execute(
        _insert(session, PreferencesRow)
        .values(
            user_id=user_id,
            preferences=defaults.preferences.model_dump(mode="json"),
            counters=defaults.model_dump(mode="json", exclude={"preferences", "updated_at"}),
            updated_at=now,
        )
        .on_conflict_do_nothing(index_elements=["user_id"])
    )
    current = await get_preferences(session, user_id=user_id, for_update=True)
    new = update(current.model_copy(deep=True))
    changed = await save_preferences(session, user_id=user_id, preferences=new, now=now)
    return (new.model_copy(update={"updated_at": now}) if changed else current), changed
