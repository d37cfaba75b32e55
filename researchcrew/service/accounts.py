"""Users of the HTTP service and their API keys, kept in the memory database (tables ``service_users`` and
``service_api_keys``, Alembic revision 0008).

A key looks like ``rc_<key id>_<secret>``. The key id (12 hex digits) is public: it finds the row and names the key
in ``users list``. The secret (32 random bytes) is shown once, when the key is made, and only its SHA-256 is
stored. A fast hash is the right one here: the secret is random and 256 bits long, so there is nothing for a slow
password hash (bcrypt, argon2) to protect against, and verifying costs microseconds on every request instead of
~100 ms. Comparison is constant-time.

Open it on the runtime's memory store: ``Accounts(await runtime.memory_store())``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError

from researchcrew.db.failures import guarded
from researchcrew.db.models import ApiKeyRow, ServiceUserRow
from researchcrew.db.session import Sessions
from researchcrew.errors import ResearchCrewError
from researchcrew.memory.store import MemoryStore

logger = logging.getLogger(__name__)


KEY_PREFIX = "rc"
_KEY_ID_HEX = 12
_KEY = re.compile(rf"^{KEY_PREFIX}_([0-9a-f]{{{_KEY_ID_HEX}}})_([A-Za-z0-9_-]{{32,128}})$")
USER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


class AccountError(ResearchCrewError):
    """A usage mistake about users or keys (unknown user, name taken, bad name). The message says what to do."""


class UserAccount(BaseModel):
    """A user as ``users list`` shows it."""

    model_config = ConfigDict(extra="forbid")

    user_id: str = Field(description="The user's name; also the user id their memory is filed under.")
    created_at: datetime = Field(description="When the user was added (UTC).")
    revoked_at: datetime | None = Field(default=None, description="When the user was revoked (UTC), else None.")
    active_keys: list[str] = Field(default_factory=list, description="Ids of the user's keys that still work.")


class IssuedKey(BaseModel):
    """A key just made. ``key`` is shown this once; only its hash is kept."""

    model_config = ConfigDict(extra="forbid")

    user_id: str = Field(description="Whose key it is.")
    key_id: str = Field(description="The key's public id.")
    key: str = Field(description="The whole key, to put in `Authorization: Bearer <key>`.")


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_key(key: str) -> tuple[str, str] | None:
    """(key id, secret) of a well-formed key, else None."""
    match = _KEY.match(key.strip())
    return (match.group(1), match.group(2)) if match else None


def check_user_name(name: str) -> str:
    if not USER_NAME.match(name):
        raise AccountError(
            f"{name!r} is not a valid user name: use 1-64 letters, digits, '_', '.', '@' or '-', starting with a "
            "letter or digit"
        )
    return name


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Accounts:
    """Users and API keys, in the memory store's database."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self._read, self._write = Sessions.of(store.engine)

    @guarded("adding a user")
    async def add_user(self, name: str, *, another_key: bool = False) -> IssuedKey:
        """Add user ``name`` (or reinstate a revoked one) and make a key. A user who is active already gets
        another key only with ``another_key`` (e.g. to rotate: add one, switch, revoke the old one)."""
        check_user_name(name)
        now = _utcnow()
        async with self._write.begin() as session:
            row = await session.get(ServiceUserRow, name)
            if row is None:
                session.add(ServiceUserRow(user_id=name, created_at=now, revoked_at=None))
            elif row.revoked_at is not None:
                row.revoked_at = None
            elif not another_key:
                raise AccountError(f"user {name!r} exists already; add --another-key to give them one more key")
            key_id, secret = secrets.token_hex(_KEY_ID_HEX // 2), secrets.token_urlsafe(32)
            session.add(ApiKeyRow(key_id=key_id, user_id=name, key_hash=hash_secret(secret), created_at=now))
            try:
                await session.flush()
            except IntegrityError as error:  # another process added the same user at the same moment
                raise AccountError(f"user {name!r} was added by someone else just now; try again") from error
        logger.info("issued key %s for user %s", key_id, name)
        return IssuedKey(user_id=name, key_id=key_id, key=f"{KEY_PREFIX}_{key_id}_{secret}")

    @guarded("listing users")
    async def list_users(self) -> list[UserAccount]:
        async with self._read() as session:
            users = (await session.execute(select(ServiceUserRow).order_by(ServiceUserRow.user_id))).scalars().all()
            keys = (
                await session.execute(
                    select(ApiKeyRow.user_id, ApiKeyRow.key_id)
                    .where(ApiKeyRow.revoked_at.is_(None))
                    .order_by(ApiKeyRow.created_at)
                )
            ).all()
        active: dict[str, list[str]] = {}
        for user_id, key_id in keys:
            active.setdefault(user_id, []).append(key_id)
        return [
            UserAccount(
                user_id=user.user_id,
                created_at=user.created_at,
                revoked_at=user.revoked_at,
                active_keys=[] if user.revoked_at else active.get(user.user_id, []),
            )
            for user in users
        ]

    @guarded("revoking")
    async def revoke(self, name_or_key_id: str) -> tuple[str, int]:
        """Revoke a user (every key of theirs) or one key by its id. Returns (user id, keys revoked). Memory is
        kept: revoking stops access, ``researchcrew memory forget`` deletes."""
        now = _utcnow()
        async with self._write.begin() as session:
            user = await session.get(ServiceUserRow, name_or_key_id)
            if user is not None:
                user.revoked_at = user.revoked_at or now
                condition = ApiKeyRow.user_id == user.user_id
                user_id = user.user_id
            else:
                key = await session.get(ApiKeyRow, name_or_key_id)
                if key is None:
                    raise AccountError(f"no user or key id {name_or_key_id!r}; `researchcrew users list` shows them")
                condition = ApiKeyRow.key_id == key.key_id
                user_id = key.user_id
            result = await session.execute(
                update(ApiKeyRow).where(condition, ApiKeyRow.revoked_at.is_(None)).values(revoked_at=now)
            )
        revoked = int(result.rowcount)  # type: ignore[attr-defined]
        logger.info("revoked %d key(s) of user %s", revoked, user_id)
        return user_id, revoked

    @guarded("checking an API key")
    async def authenticate(self, key: str) -> str | None:
        """The user id a key belongs to, or None when it is malformed, unknown, revoked or its user is."""
        parsed = parse_key(key)
        if parsed is None:
            return None
        key_id, secret = parsed
        async with self._read() as session:
            row = (
                await session.execute(
                    select(ApiKeyRow.user_id, ApiKeyRow.key_hash)
                    .join(ServiceUserRow, ServiceUserRow.user_id == ApiKeyRow.user_id)
                    .where(
                        ApiKeyRow.key_id == key_id,
                        ApiKeyRow.revoked_at.is_(None),
                        ServiceUserRow.revoked_at.is_(None),
                    )
                )
            ).first()
        if row is None or not hmac.compare_digest(row.key_hash, hash_secret(secret)):
            return None
        return str(row.user_id)

    @guarded("counting users")
    async def count_active(self) -> int:
        async with self._read() as session:
            stmt = select(func.count()).select_from(ServiceUserRow).where(ServiceUserRow.revoked_at.is_(None))
            return int((await session.execute(stmt)).scalar_one())
