"""The schema fuzz (tests/service/schema_fuzz.py) against the service on SQLite; its PostgreSQL half is
test_schema_fuzz_postgresql.py (a module each, so that pytest-xdist can run the two halves side by side)."""

from __future__ import annotations

from tests.service import schema_fuzz

live = schema_fuzz.live_on("sqlite")

test_the_schema_lists_every_route = schema_fuzz.test_the_schema_lists_every_route
test_every_operation_answers_within_its_schema = schema_fuzz.test_every_operation_answers_within_its_schema
test_a_nul_in_any_string_is_refused = schema_fuzz.test_a_nul_in_any_string_is_refused
