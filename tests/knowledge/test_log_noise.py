"""Milvus Lite's harmless "AllocTimestamp: Method not implemented" gRPC error is not shown to users; other gRPC
errors still are."""

from __future__ import annotations

import logging
import sys

import pytest

import researchcrew.knowledge._store  # noqa: F401 - installs the filter


def _grpc_error_record(method_name: str) -> logging.LogRecord:
    def raiser() -> None:
        raise NotImplementedError("Method not implemented!")

    raiser.__code__ = raiser.__code__.replace(co_name=method_name)
    try:
        raiser()
    except NotImplementedError:
        exc_info = sys.exc_info()
    return logging.LogRecord(
        "grpc._server",
        logging.ERROR,
        __file__,
        1,
        "Exception calling application: %s",
        ("Method not implemented!",),
        exc_info,
    )


@pytest.mark.parametrize(("method", "shown"), [("AllocTimestamp", False), ("Search", True)])
def test_only_the_known_harmless_error_is_dropped(method: str, shown: bool) -> None:
    assert logging.getLogger("grpc._server").filter(_grpc_error_record(method)) is shown
