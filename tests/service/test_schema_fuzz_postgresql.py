"""The schema fuzz (tests/service/schema_fuzz.py) against the service on PostgreSQL; its SQLite half is
test_schema_fuzz_sqlite.py (a module each, so that pytest-xdist can run the two halves side by side)."""

from __future__ import annotations

import pytest

from tests.service import schema_fuzz

pytestmark = pytest.mark.postgres

live = schema_fuzz.live_on("postgresql")

test_every_operation_answers_within_its_schema = schema_fuzz.test_every_operation_answers_within_its_schema
test_a_nul_in_any_string_is_refused = schema_fuzz.test_a_nul_in_any_string_is_refused
