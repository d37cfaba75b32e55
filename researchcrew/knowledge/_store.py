"""The Milvus side of the knowledge base: one collection, reached through pymilvus' ``MilvusClient``.

The same code talks to Milvus Lite (a ``.db`` file, the default) and to a Milvus server (``http://host:19530``).
Connecting is lazy and retried on the next call after a failure, so an application can start while its Milvus
server is down and the RAG source reports "unreachable" per question instead of the process refusing to start.

Every pymilvus call goes through ``_call``, which turns ``MilvusException``/gRPC errors into ``KnowledgeBaseError``
(``KnowledgeBaseUnavailableError`` when the server cannot be reached) with the operation, collection and URI in
the message, and bounds each call by ``settings.milvus.timeout_s``.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from researchcrew.errors import (
    KnowledgeBaseError,
    KnowledgeBaseLockedError,
    KnowledgeBaseResponseError,
    KnowledgeBaseServerError,
    KnowledgeBaseTimeoutError,
    KnowledgeBaseUnavailableError,
)
from researchcrew.knowledge import _schema as schema
from researchcrew.knowledge._analysis import ANALYZER_VERSION
from researchcrew.knowledge.lite_lock import lite_lock_holder, locked_message
from researchcrew.redaction import mask_url, redact
from researchcrew.settings import Settings

logger = logging.getLogger(__name__)

# pymilvus pings its gRPC channel every 10 s, even with no call in flight (keepalive_permit_without_calls). Lite's
# server is a child process on this machine, with gRPC's default enforcement (at most one ping per 5 minutes without
# data): it answers those pings with GOAWAY ENHANCE_YOUR_CALM "too_many_pings", which gRPC's core writes to stderr
# ("chttp2_transport.cc ... Received a GOAWAY ...") in every long-enough command. A local child needs no keep-alive:
# pings are switched off for Lite (the longest interval gRPC accepts, none without a call). A Milvus server permits
# 10 s pings (its enforcement minimum is 5 s) and keeps pymilvus' defaults.
LITE_GRPC_OPTIONS: dict[str, int | bool] = {
    "grpc.keepalive_time_ms": 2**31 - 1,
    "grpc.keepalive_permit_without_calls": False,
}


class _LiteUnimplementedCallFilter(logging.Filter):
    """Milvus Lite does not implement ``AllocTimestamp``, which pymilvus 3 calls when a collection is created; its
    in-process gRPC server then logs an ERROR with a traceback although nothing went wrong (pymilvus carries on).
    Drop exactly that record so users do not see a scary traceback on every ingest; other gRPC errors still show."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "Method not implemented" not in record.getMessage() or record.exc_info is None:
            return True
        _, error, traceback = record.exc_info
        frame_names = []
        while traceback is not None:
            frame_names.append(traceback.tb_frame.f_code.co_name)
            traceback = traceback.tb_next
        return not (isinstance(error, NotImplementedError) and "AllocTimestamp" in frame_names)


class _LiteLockedFilter(logging.Filter):
    """milvus-lite logs a traceback when another process holds the file; the store reports that itself, in one line
    naming the process (``lite_lock``), so the traceback is dropped. Other start-up failures still show."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return type(error).__name__ != "DataDirLockedError"


logging.getLogger("grpc._server").addFilter(_LiteUnimplementedCallFilter())
logging.getLogger("milvus_lite.server_manager").addFilter(_LiteLockedFilter())

T = TypeVar("T")


def _skip_per_character_string_check() -> None:
    """Turn off pymilvus' client-side VARCHAR length check for row inserts.

    In pymilvus 3.0 a row's string goes through ``convert_to_str_array``, which was written for lists of strings:
    handed one string, it loops over its *characters* in Python (``isinstance`` and ``len`` on each). That is about
    11 s of CPU per SciFact ingest (23 M calls), a quarter of all the work besides embedding. Every string we write
    is already cut to its field's limit in UTF-8 bytes (``schema.clip``), which is stricter than the character
    count the check compares, and the server validates lengths again. ``CHECK_STR_ARRAY`` is the module's switch for
    exactly this check; where a pymilvus version lacks it, nothing changes.
    """
    from pymilvus.client import entity_helper

    if getattr(entity_helper, "CHECK_STR_ARRAY", None) is True:
        entity_helper.CHECK_STR_ARRAY = False


_LITE_POLL_S = 0.02
_LONGEST_POLL_S = 0.5


class _QuickPolls(types.SimpleNamespace):
    """Stands in for the ``time`` module inside pymilvus' gRPC handler: its polling sleeps are short."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(min(seconds, _LITE_POLL_S) if seconds <= _LONGEST_POLL_S else seconds)


def _poll_lite_quickly() -> None:
    """Let pymilvus ask Milvus Lite every 20 ms whether an index is built, a flush or a load has finished.

    pymilvus (``client/grpc_handler.py``) waits for those by sleeping and asking again: 0.5 s before it even asks
    about a new index (``wait_for_creating_index``), 0.5 s between flush checks, 0.2 s between load checks. Milvus
    Lite, running on this machine, finishes them on a knowledge base's collections in milliseconds, so every new
    collection paid the sleeps: a new knowledge base took 1.03 s to open instead of 0.07 s (a first ``ingest``,
    every fresh data folder), a companion collection (annotations, summaries) 0.51 s instead of 0.03 s (2026-11-27,
    idle, pymilvus already imported). The module's sleeps of at most half a second (its polling intervals; nothing
    else there sleeps that little) take 20 ms; its timeouts are measured with ``time.time()``, left alone, and its
    longer sleeps (3 s before reconnecting an idle channel, 5 s between flush-all checks) are kept. Installed only
    when a Milvus Lite file is opened: against a Milvus server, where building an index takes real time, pymilvus
    polls as it was written to (unless the same process also opens a Lite file).
    """
    from pymilvus.client import grpc_handler

    if not isinstance(grpc_handler.time, _QuickPolls):
        grpc_handler.time = _QuickPolls()


def _skip_scipy_probe() -> None:
    """Spare the first search of a process pymilvus' import of ``scipy.sparse``.

    pymilvus 3 asks of every search's query data whether it is a SciPy sparse matrix (``SciPyHelper``), and to ask
    it imports ``scipy.sparse`` on first use: about a fifth of a second of a one-off ``researchcrew ask`` (issue 19)
    for a question whose answer here is always no (we send text and lists of floats; sparse vectors are made by
    Milvus' BM25 function). The helper is told SciPy's sparse classes are absent, as it would find on a machine
    without SciPy. When ``scipy.sparse`` is already imported (another library uses it), nothing changes.
    """
    from pymilvus.client import utils

    helper = getattr(utils, "SciPyHelper", None)
    if helper is None or getattr(helper, "_checked", True) or "scipy.sparse" in sys.modules:
        return
    helper._matrix_available = False
    helper._array_available = False
    helper._checked = True


_PAGE = 4096  # rows per query page (Milvus caps one query at 16,384)
_RATE_LIMITED_CODE = 8  # pymilvus ErrorCode.RATE_LIMIT (common_pb2.RateLimit)
_SERVER_ERROR_CODES = frozenset({65535})  # Milvus' "unexpected error" status
_UNAVAILABLE_HINTS = ("unavailable", "connect", "refused", "closed channel")


def failure_class(error: BaseException) -> type[KnowledgeBaseError] | None:
    """What a pymilvus/gRPC failure means for a caller; None when it is not one (a bug):

    * rate limited (Milvus status 8, or gRPC RESOURCE_EXHAUSTED) or an internal server error (status 65535, gRPC
      INTERNAL/UNKNOWN) → ``KnowledgeBaseServerError`` (the service answered with an error status);
    * a response over the client's message limit (RESOURCE_EXHAUSTED "larger than max") →
      ``KnowledgeBaseResponseError``;
    * a deadline passed → ``KnowledgeBaseTimeoutError``; unreachable → ``KnowledgeBaseUnavailableError``;
    * anything else Milvus refused → ``KnowledgeBaseError``.
    """
    import grpc
    from pymilvus import MilvusException

    if isinstance(error, grpc.RpcError):
        code: Any = error.code() if callable(getattr(error, "code", None)) else None
        text = str(error).lower()
    elif isinstance(error, MilvusException):
        code, text = error.code, str(error).lower()
    elif isinstance(error, TimeoutError):
        return KnowledgeBaseTimeoutError
    elif isinstance(error, ConnectionError | OSError):
        return KnowledgeBaseUnavailableError
    else:
        return None
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than" in text:
        return KnowledgeBaseResponseError
    if code in (_RATE_LIMITED_CODE, grpc.StatusCode.RESOURCE_EXHAUSTED) or "rate limit" in text:
        return KnowledgeBaseServerError
    if code == grpc.StatusCode.DEADLINE_EXCEEDED or "deadline exceeded" in text:
        return KnowledgeBaseTimeoutError
    if code in (grpc.StatusCode.UNAVAILABLE, 2) or any(hint in text for hint in _UNAVAILABLE_HINTS):
        return KnowledgeBaseUnavailableError
    if code in _SERVER_ERROR_CODES or code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
        return KnowledgeBaseServerError
    return KnowledgeBaseError


def _check_hit(hit: Any, where: str) -> None:
    """A search hit must be what Milvus sends: a mapping with a primary key, a numeric distance and text within
    the field's limit. Anything else is a malformed (or oversized) response, reported as such, not a crash."""
    try:
        distance = hit["distance"]
        key = hit[schema.PK]
        text = hit.get(schema.TEXT, "")
    except (KeyError, TypeError, AttributeError) as error:
        raise KnowledgeBaseResponseError(f"{where}: malformed result ({type(error).__name__}: {error})") from error
    if isinstance(distance, bool) or not isinstance(distance, int | float) or not isinstance(key, str | int):
        raise KnowledgeBaseResponseError(f"{where}: malformed result (distance {distance!r}, key {key!r})")
    if not isinstance(text, str) or len(text.encode()) > schema.TEXT_LIMIT:
        size = len(text) if isinstance(text, str) else type(text).__name__
        raise KnowledgeBaseResponseError(f"{where}: oversized or malformed text in a result ({size} characters)")


class CollectionStore:
    """A lazily connected handle on the knowledge-base collection."""

    def __init__(self, settings: Settings, *, dimension: Callable[[], int], model_name: str) -> None:
        self.uri = settings.milvus_uri
        self.display_uri = mask_url(self.uri)  # what messages and statistics show: never a password
        self.collection = settings.milvus.collection
        self.lite = schema.is_lite(self.uri)
        self._settings = settings
        self._dimension = dimension
        self._model_name = model_name
        self._client: Any = None
        # True only for ``KnowledgeBase.reindex_keywords``: open a collection whose BM25 text an older analyzer wrote.
        self.accept_stale_analyzer = False
        self._lock = threading.RLock()  # re-entrant: a failed connect reports (and resets) under the same lock
        self.recorded: dict[str, Any] = {}  # what the collection's description says it was built with
        self._has_collections = True  # whether rows carry ``schema.COLLECTION`` (schema 2); read on connect
        self._companion_locks: dict[str, threading.Lock] = {}
        self._companions_ready: set[str] = set()  # companion collections made or loaded on the current client

    def companion_lock(self, name: str) -> threading.Lock:
        """The one lock for making or loading the companion collection ``name`` (annotations, summaries) of this
        store, whichever index object asks: ``index_for``/``summaries_for`` make a new index per call, and two of
        them loading one collection at once failed with "in state 'loading'" (seen in ``serve`` under load)."""
        with self._lock:
            return self._companion_locks.setdefault(name, threading.Lock())

    def companion_ready(self, name: str) -> bool:
        """Whether the companion collection ``name`` was made or loaded on the current client: a new index object over
        this store (``index_for`` makes one per ingest and per question) then skips the existence check, the schema
        read and the load, as the chunks' collection is opened once per client. Forgotten with the client."""
        with self._lock:
            return name in self._companions_ready

    def mark_companion_ready(self, name: str) -> None:
        with self._lock:
            if self._client is not None:
                self._companions_ready.add(name)

    # Connection ------------------------------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._connect()
        return self._client

    def _connect(self) -> Any:
        from pymilvus import MilvusClient

        _skip_per_character_string_check()  # once per process is enough; every later connect finds it done
        _skip_scipy_probe()
        milvus = self._settings.milvus
        if self.lite:
            _poll_lite_quickly()
            Path(self.uri).expanduser().parent.mkdir(parents=True, exist_ok=True)
            self._refuse_if_locked()
        token = milvus.token.get_secret_value() if milvus.token else ""
        options = {"grpc_options": LITE_GRPC_OPTIONS} if self.lite else {}
        try:
            client = MilvusClient(
                uri=self.uri, token=token, db_name=milvus.db_name or "", timeout=milvus.timeout_s, **options
            )
        except Exception as error:  # pymilvus raises MilvusException, grpc errors or ConnectionConfigException
            if self.lite:
                self._refuse_if_locked()  # taken between our check and the connect: say so, not "open failed"
            raise self._translate("connect", error) from error
        try:
            self._ensure_collection(client)
        except BaseException:
            client.close()
            raise
        return client

    def _refuse_if_locked(self) -> None:
        """Milvus Lite is one process per file: when another process holds it, say which, in one line."""
        holder = lite_lock_holder(Path(self.uri).expanduser())
        if holder is not None:
            raise KnowledgeBaseLockedError(locked_message(self.display_uri, holder))

    def _ensure_collection(self, client: Any) -> None:
        timeout = self._settings.milvus.timeout_s
        try:
            upgraded = self.collection + schema.UPGRADE_SUFFIX
            if not client.has_collection(self.collection, timeout=timeout) and client.has_collection(
                upgraded, timeout=timeout
            ):  # an upgrade stopped between dropping the old collection and renaming its copy: finish it
                logger.warning("finishing the upgrade of %s: renaming %s", self.collection, upgraded)
                client.rename_collection(upgraded, self.collection, timeout=timeout)
            if not client.has_collection(self.collection, timeout=timeout):
                dimension = self._dimension()
                logger.info("creating collection %s at %s (dimension %d)", self.collection, self.display_uri, dimension)
                client.create_collection(
                    self.collection,
                    schema=schema.build_schema(dimension),
                    index_params=schema.build_index_params(client, lite=self.lite),
                    consistency_level="Strong",  # a read right after a write must see it (idempotent ingest)
                    timeout=timeout,
                )
            info = client.describe_collection(self.collection, timeout=timeout)
            recorded = schema.parse_description((info.get("properties") or {}).get(schema.PROPERTY))
            names = {field["name"] for field in info.get("fields", [])}
            if not recorded and schema.SEARCH_TEXT in names:
                # Just created (or a crash came between creating and labelling): label it while it is empty.
                rows = client.query(self.collection, filter="", output_fields=["count(*)"], timeout=timeout)
                if not rows or int(rows[0]["count(*)"]) == 0:
                    dimension = self._dimension()
                    version = schema.SCHEMA_VERSION if schema.COLLECTION in names else min(schema.LEGACY_VERSIONS)
                    label = schema.description(self._model_name, dimension, version=version)
                    client.alter_collection_properties(
                        self.collection, properties={schema.PROPERTY: label}, timeout=timeout
                    )
                    recorded = schema.parse_description(label)
            # A collection is "released" after a restart; searching needs it loaded (a no-op when it is).
            client.load_collection(self.collection, timeout=timeout)
        except Exception as error:
            raise self._translate("open collection", error) from error
        self.recorded = recorded
        self._has_collections = schema.COLLECTION in names
        self._check_compatible(names)

    def _check_compatible(self, names: set[str]) -> None:
        recorded = self.recorded
        version = recorded.get("researchcrew_schema")
        known = (version == schema.SCHEMA_VERSION and schema.COLLECTION in names) or version in schema.LEGACY_VERSIONS
        if schema.SEARCH_TEXT not in names or not known:
            raise KnowledgeBaseError(
                f"collection {self.collection!r} at {self.display_uri} was not created by this version of "
                "researchcrew; choose another collection (RESEARCHCREW_MILVUS__COLLECTION) or remove it"
            )
        if recorded.get("embedding_model") != self._model_name:
            raise KnowledgeBaseError(
                f"collection {self.collection!r} was built with embedding model {recorded.get('embedding_model')!r}, "
                f"but the settings use {self._model_name!r}; re-ingest into a new collection "
                "(RESEARCHCREW_MILVUS__COLLECTION) or switch the model back"
            )
        if not self.analyzer_current and not self.accept_stale_analyzer:
            raise KnowledgeBaseError(
                f"collection {self.collection!r} holds keyword-search text from analyzer {recorded.get('analyzer')!r}, "
                f"this version uses {ANALYZER_VERSION!r}; run `researchcrew kb reindex` to update it from the stored "
                "chunks (nothing is re-embedded)"
            )

    @property
    def has_collections(self) -> bool:
        """Whether rows carry their document collection (schema 2). A schema-1 knowledge base does not: every chunk
        of it is in ``schema.SHARED``. Connects when not connected yet."""
        self.open()
        return self._has_collections

    @property
    def analyzer_current(self) -> bool:
        """Whether the collection's BM25 text was written by this version's analyzer."""
        return self.recorded.get("analyzer") == ANALYZER_VERSION

    def mark_analyzer_current(self) -> None:
        """Record in the collection that its BM25 text now comes from this version's analyzer."""
        label = schema.description(
            str(self.recorded.get("embedding_model")),
            int(self.recorded.get("dimension", 0)),
            version=int(self.recorded.get("researchcrew_schema", schema.SCHEMA_VERSION)),
        )
        self._call(
            "label collection",
            lambda c, **kw: c.alter_collection_properties(self.collection, properties={schema.PROPERTY: label}, **kw),
        )
        self.recorded = schema.parse_description(label)

    def call(self, operation: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``function(client, *args, timeout=..., **kwargs)`` with failures translated (for maintenance code)."""
        return self._call(operation, function, *args, **kwargs)

    def open(self) -> None:
        """Connect now rather than on the first call (reads the collection's label; see ``recorded``)."""
        _ = self.client

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
            self._companions_ready.clear()
        if client is None:
            return
        try:
            if self.lite:
                # Seal the in-memory buffer into a segment: searches then reuse a cached BM25 index.
                client.flush(self.collection)
        except Exception as error:  # closing must not raise; the data is already in the write-ahead log
            logger.warning("flushing %s on close failed: %s", self.collection, error)
        finally:
            client.close()

    # Calls -----------------------------------------------------------------------------------------------------
    def _call(self, operation: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        client = self.client
        try:
            return function(client, *args, timeout=self._settings.milvus.timeout_s, **kwargs)
        except Exception as error:
            raise self._translate(operation, error) from error

    def _translate(self, operation: str, error: Exception) -> KnowledgeBaseError:
        """Name the failure by what it means for a caller (``failure_class``); an unreachable or timed-out server is
        dropped so that the next call reconnects."""
        from pymilvus.exceptions import ConnectionConfigException

        secrets = [self._settings.milvus.token.get_secret_value()] if self._settings.milvus.token else []
        message = redact(
            f"{operation} on collection {self.collection!r} at {self.display_uri} failed: {error}", secrets
        )
        if isinstance(error, ConnectionConfigException):
            return KnowledgeBaseError(message)
        failure = failure_class(error)
        if failure is None:
            raise error  # not a Milvus failure: a bug, let it surface with its own traceback
        logger.warning("%s", message)
        if issubclass(failure, KnowledgeBaseUnavailableError):
            with self._lock:  # reconnect on the next call
                stale, self._client = self._client, None
                self._companions_ready.clear()
            if stale is not None:
                stale.close()
        return failure(message)

    def insert(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            self._call("insert", lambda c, **kw: c.insert(self.collection, rows, **kw))

    def upsert(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            self._call("upsert", lambda c, **kw: c.upsert(self.collection, rows, **kw))

    def delete(self, expression: str) -> None:
        self._call("delete", lambda c, **kw: c.delete(self.collection, filter=expression, **kw))

    def count(self, expression: str = "") -> int:
        rows = self._call(
            "count",
            lambda c, **kw: c.query(self.collection, filter=expression, output_fields=["count(*)"], **kw),
        )
        return int(rows[0]["count(*)"]) if rows else 0

    def rows(self, expression: str, fields: Sequence[str]) -> Iterator[dict[str, Any]]:
        """All rows matching ``expression``.

        Milvus Lite answers an unlimited query in one go. A server caps one query at 16,384 rows, so there the
        rows are paged with pymilvus' query iterator (which Lite does not fully implement).
        """
        base = expression or f'{schema.PK} != ""'
        output = [schema.PK, *fields]
        if self.lite:
            yield from self._call(
                "query", lambda c, **kw: c.query(self.collection, filter=base, output_fields=output, **kw)
            )
            return
        iterator = self._call(
            "query",
            lambda c, **kw: c.query_iterator(
                self.collection, batch_size=_PAGE, filter=base, output_fields=output, **kw
            ),
        )
        try:
            while True:
                page = self._call("query", lambda _c, **_kw: iterator.next())
                if not page:
                    return
                yield from page
        finally:
            iterator.close()

    def fetch(self, pks: Sequence[str], fields: Sequence[str]) -> list[dict[str, Any]]:
        if not pks:
            return []
        expression = f"{schema.PK} in [{', '.join(schema.quote(pk) for pk in pks)}]"
        return list(
            self._call(
                "get",
                lambda c, **kw: c.query(self.collection, filter=expression, output_fields=list(fields), **kw),
            )
        )

    def upsert_companion(self, name: str, rows: list[dict[str, Any]], *, operation: str) -> None:
        """Upsert ``rows``, each holding every field, into a companion collection of this store, sent as columns.

        pymilvus packs a list of rows value by value in Python (type lookups and a normaliser for every field of every
        row: 17 ms of CPU for a pass's 382 annotation rows, 2026-11-27), and a column in one call per field (7 ms).
        The column path is the gRPC handler's (``MilvusClient`` has none); where a pymilvus version lacks the handler,
        the rows are sent as rows.
        """
        if not rows:
            return

        def write(client: Any, *, timeout: float) -> Any:
            connection = getattr(client, "_get_connection", None)
            context = getattr(client, "_generate_call_context", None)
            if connection is None or context is None:
                return client.upsert(name, rows, timeout=timeout)
            handler, call = connection(), context()  # the call context carries the database name
            described = handler.describe_collection(name, timeout=timeout, context=call)
            columns = [
                {"name": field["name"], "type": field["type"], "values": [row[field["name"]] for row in rows]}
                for field in described["fields"]
                if not field.get("is_function_output")
            ]
            return handler.upsert(name, columns, timeout=timeout, context=call, schema=described)

        self._call(operation, write)

    def search_companion(
        self, name: str, vector: Sequence[float], *, limit: int, expression: str, fields: Sequence[str], operation: str
    ) -> list[tuple[dict[str, Any], float]]:
        """Cosine hits in a companion collection of this store (annotations, summaries): (entity, score), best
        first."""
        params = schema.dense_search_params(lite=self.lite, limit=limit)
        result = self._call(
            operation,
            lambda c, **kw: c.search(
                name,
                data=[list(vector)],
                anns_field=schema.DENSE,
                limit=limit,
                filter=expression,
                output_fields=list(fields),
                search_params=params,
                **kw,
            ),
        )
        hits = list(result[0]) if result else []
        return [(hit.get("entity", hit), float(hit["distance"])) for hit in hits]

    def search_dense(self, vector: list[float], limit: int, expression: str) -> list[dict[str, Any]]:
        params = schema.dense_search_params(lite=self.lite, limit=limit)
        return self._search(schema.DENSE, [vector], limit, expression, params)

    def search_bm25(
        self, analysed_query: str, limit: int, expression: str, fields: Sequence[str] = schema.OUTPUT_FIELDS
    ) -> list[dict[str, Any]]:
        """BM25 hits with ``fields`` (all a hit needs by default; a score-only lookup asks for the key alone)."""
        if not analysed_query.strip():
            return []  # nothing to match (a query of stop words only)
        return self._search(schema.SPARSE, [analysed_query], limit, expression, {"metric_type": "BM25"}, fields)

    def _search(
        self,
        field: str,
        data: list[Any],
        limit: int,
        expression: str,
        params: dict[str, Any],
        fields: Sequence[str] = schema.OUTPUT_FIELDS,
    ) -> list[dict[str, Any]]:
        wanted = list(fields)
        if self._has_collections and len(wanted) > 1 and schema.COLLECTION not in wanted:
            wanted.append(schema.COLLECTION)  # a whole hit says which collection it is in (a key-only lookup not)
        result = self._call(
            f"search {field}",
            lambda c, **kw: c.search(
                self.collection,
                data=data,
                anns_field=field,
                limit=limit,
                filter=expression,
                output_fields=wanted,
                search_params=params,
                **kw,
            ),
        )
        hits = list(result[0]) if result else []
        for hit in hits:
            _check_hit(hit, f"search {field} on collection {self.collection!r} at {self.display_uri}")
        return hits

    def flush(self) -> None:
        self._call("flush", lambda c, **kw: c.flush(self.collection, **kw))
