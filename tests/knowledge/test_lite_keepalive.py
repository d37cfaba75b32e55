"""Issue 19 item 5: no gRPC ``GOAWAY ... too_many_pings`` on stderr. The cause: pymilvus pings its channel every 10 s
even without a call in flight, and Milvus Lite's gRPC server (gRPC's default enforcement: one ping per 5 minutes
without data) answers with GOAWAY, which gRPC's core logs. The Lite channel is opened without keep-alive pings."""

from __future__ import annotations

from pathlib import Path

import pytest

from researchcrew.knowledge._store import CollectionStore
from researchcrew.settings import Settings

pytestmark = pytest.mark.slow

_GRPC_MIN_PING_INTERVAL_MS = 5 * 60 * 1000  # what a gRPC server accepts by default without data in between


def test_the_milvus_lite_channel_sends_no_keepalive_pings(tmp_path: Path) -> None:
    store = CollectionStore(Settings(data_dir=tmp_path / "data"), dimension=lambda: 8, model_name="test-model")
    try:
        handler = store.client._get_connection()  # pymilvus' GrpcHandler: the options its channel was built with
        options = handler._grpc_options
        assert options["grpc.keepalive_permit_without_calls"] is False
        assert options["grpc.keepalive_time_ms"] >= _GRPC_MIN_PING_INTERVAL_MS
    finally:
        store.close()


def test_a_milvus_server_keeps_pymilvus_keepalive() -> None:
    """A Milvus server permits 10 s pings; its channel is left as pymilvus builds it (checked without connecting)."""
    store = CollectionStore(
        Settings(milvus={"uri": "http://127.0.0.1:19530"}), dimension=lambda: 8, model_name="test-model"
    )
    assert not store.lite
