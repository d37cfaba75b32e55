"""Issue 19 item 1: a running `researchcrew serve` of the data folder is found by the CLI through its Unix socket,
and a command gives the same stdout and exit code through it as in its own process; no service, a stale socket, a
service of another folder or ``--local``: in process, and `researchcrew status` says why."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.cli_batch import cli_batch
from tests.service.processes import ServeProcess, cli

pytestmark = pytest.mark.slow

QUESTION = "What is metamorphic testing?"
_LATENCY = re.compile(r"in \d+ ms")
HEAVY = ("crewai", "pymilvus", "torch", "sqlalchemy", "fastapi", "milvus_lite", "onnxruntime")


# The representative commands (the same list in both modes): arguments and what is typed on stdin.
COMMANDS: dict[str, tuple[list[str], str | None]] = {
    "ask": (["ask", QUESTION, "--session", "same-session"], None),
    "ask --json": (["ask", "How are flaky tests detected?", "--json", "--session", "s2"], None),
    "ask - (stdin)": (["ask", "-", "--session", "s3"], "What is mutation testing?\n"),
    "ask --continue (error)": (["ask", "and then?", "--continue", "--user", "nobody-here"], None),
    "kb stats --json": (["kb", "stats", "--json"], None),
    "kb remove (nothing matches)": (["kb", "remove", "--path", "/no/such/folder"], None),
    "memory export (nobody)": (["memory", "export", "--user", "nobody-here"], None),
    "jobs run (unknown job)": (["jobs", "run", "no-such-job"], None),
    "jobs resume (unknown run)": (["jobs", "resume", "no-such-run"], None),
}


def _commands(env: dict[str, str], *status: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`researchcrew status *status`, then each of the representative commands once, all in one process (the
    test compares what each prints and its exit code, not process starts: tests/helpers/cli_batch.py)."""
    names = list(COMMANDS)
    first, *done = cli_batch(
        [["status", *status], *(COMMANDS[name][0] for name in names)],
        env=env,
        inputs=[None, *(COMMANDS[name][1] for name in names)],
    )
    return first, dict(zip(names, done, strict=True))


def _comparable(name: str, done: subprocess.CompletedProcess[str]) -> tuple[int, object, str]:
    """Exit code, stdout (what varies by run — latencies, run ids, timestamps — left out) and the error line."""
    out: object = _LATENCY.sub("in N ms", done.stdout)
    if name == "ask --json":
        answer = json.loads(done.stdout)
        out = {key: answer[key] for key in ("answer", "citations", "confidence", "answer_kind", "final_reason")}
    elif name.startswith("memory export"):
        out = {key: value for key, value in json.loads(done.stdout).items() if key != "exported_at"}
    error = done.stderr.strip().splitlines()[-1] if done.returncode else ""
    return done.returncode, out, error


def test_without_a_live_service_of_this_folder_commands_run_in_process(
    demo_folder: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """Before the module's running service (``served`` runs from its first user to the module's end)."""
    data_dir, env = demo_folder
    socket_path = data_dir / "service.sock"
    assert not socket_path.exists(), "a service of this folder is still running"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(socket_path))  # a socket file nobody listens on: what a killed service leaves
    stale.close()
    try:
        status = json.loads(cli("status", "--json", env=env).stdout)["commands"]
        assert status["mode"] == "local" and "stale socket" in status["reason"]
        answered = cli("ask", QUESTION, "--json", env=env)
        assert answered.returncode == 0 and json.loads(answered.stdout)["citations"], answered.stderr
    finally:
        socket_path.unlink(missing_ok=True)
    assert "no service is running" in json.loads(cli("status", "--json", env=env).stdout)["commands"]["reason"]


def test_each_command_answers_the_same_through_the_service_as_in_process(
    demo_folder: tuple[Path, dict[str, str]], request: pytest.FixtureRequest
) -> None:
    """In process first; then through the module's running service (``served``, started here: one start of
    `researchcrew serve` for the module; its fixture checks that SIGTERM removes the socket)."""
    data_dir, env = demo_folder
    status, in_process = _commands(env)
    assert "in process" in status.stdout
    server: ServeProcess = request.getfixturevalue("served")
    socket_path = data_dir / "service.sock"
    assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600  # its owner only: permissions authenticate
    status, through_service = _commands(env, "--json")
    assert json.loads(status.stdout)["commands"]["mode"] == "service", status.stdout
    log = server.log()
    assert "POST /v1/ask" in log and "GET /v1/kb/stats" in log  # they did go through the service
    for name, done in in_process.items():
        assert _comparable(name, through_service[name]) == _comparable(name, done), name
    assert in_process["ask"].returncode == 0 and "[1]" in in_process["ask"].stdout
    assert in_process["ask --continue (error)"].returncode == 1


def test_the_thin_path_imports_no_heavy_library(served: ServeProcess, demo_folder: tuple[Path, dict[str, str]]) -> None:
    _, env = demo_folder
    probe = (  # main(argv) returns through SystemExit (as the console script, it would end the process at once)
        "import sys\nfrom researchcrew.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as end:\n    code = end.code\n"
        f"print('LOADED', sorted(m for m in {HEAVY!r} if m in sys.modules), code, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "ask", QUESTION, "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert json.loads(done.stdout)["citations"], done.stderr
    assert "LOADED [] 0" in done.stderr, done.stderr


def test_a_service_of_another_folder_or_local_is_not_used(
    served: ServeProcess, demo_folder: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    data_dir, env = demo_folder
    other = tmp_path / "o"
    other.mkdir()
    os.symlink(data_dir / "service.sock", other / "service.sock")  # the socket answers, for another folder
    elsewhere = json.loads(cli("status", "--json", env={**env, "RESEARCHCREW_DATA_DIR": str(other)}).stdout)
    assert elsewhere["commands"]["mode"] == "local"
    assert f"serves {data_dir.resolve()}" in elsewhere["commands"]["reason"]
    forced = json.loads(cli("status", "--json", "--local", env=env).stdout)["commands"]
    assert forced["mode"] == "local" and "as asked" in forced["reason"]
    by_env = json.loads(cli("status", "--json", env={**env, "RESEARCHCREW_LOCAL": "1"}).stdout)["commands"]
    assert by_env["mode"] == "local"


def test_over_tcp_the_local_user_header_is_not_trusted(served: ServeProcess) -> None:
    """Only the socket (its owner's) acts as any user without a key; over TCP the header is ignored."""
    with httpx.Client(base_url=served.url, timeout=30) as http:
        identity = http.get("/v1/service", headers={"X-Researchcrew-User": "ada"})
        assert identity.status_code == 200 and identity.json()["local"] is False  # --no-auth: the local user
        refused = http.post("/v1/kb/ingest", json={"paths": ["/etc/hostname"]})
        assert refused.status_code == 403, refused.text  # files of the service's machine: its owner only
        assert http.get("/v1/kb/stats").status_code == 403
        assert http.post("/v1/kb/remove", json={"source_keys": ["x"]}).status_code == 403


async def test_the_sdk_asks_and_streams_through_the_service(
    served: ServeProcess, demo_folder: tuple[Path, dict[str, str]]
) -> None:
    from researchcrew import ResearchAssistant
    from researchcrew.contracts import FinalResponse, ProgressEvent

    data_dir, _ = demo_folder
    for url in (f"unix://{data_dir / 'service.sock'}", served.url):
        async with ResearchAssistant(service_url=url) as assistant:
            answer = await assistant.ask(QUESTION, user_id="ada", session_id="sdk")
            assert answer.citations and all(c.source_type == "rag" for c in answer.citations)
            items = [item async for item in assistant.stream(QUESTION, user_id="ada", session_id="sdk2")]
        assert isinstance(items[-1], FinalResponse) and items[-1].citations
        assert any(isinstance(item, ProgressEvent) and item.status == "source" for item in items[:-1])
