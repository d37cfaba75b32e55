"""The hostile-input sweep (tests/service/hostile_inputs.py) against the service on SQLite; its PostgreSQL half is
test_hostile_inputs_postgresql.py (a module each, so that pytest-xdist can run the two halves side by side)."""

from __future__ import annotations

from tests.service import hostile_inputs

service = hostile_inputs.service_on("sqlite")
http = hostile_inputs.http

test_the_sweep_covers_every_route_and_input = hostile_inputs.test_the_sweep_covers_every_route_and_input
test_every_route_refuses_every_hostile_input = hostile_inputs.test_every_route_refuses_every_hostile_input
test_an_overlong_url_is_refused = hostile_inputs.test_an_overlong_url_is_refused
test_a_deep_jsonl_line_is_a_422_and_the_connection_lives_on = (
    hostile_inputs.test_a_deep_jsonl_line_is_a_422_and_the_connection_lives_on
)
test_a_nul_is_refused_alike_on_every_backend = hostile_inputs.test_a_nul_is_refused_alike_on_every_backend
test_a_flag_is_a_json_boolean_on_every_door = hostile_inputs.test_a_flag_is_a_json_boolean_on_every_door
test_a_tool_option_is_keyed_by_a_source_type_on_every_door = (
    hostile_inputs.test_a_tool_option_is_keyed_by_a_source_type_on_every_door
)
