"""Several `researchcrew` commands run one after another in one child process, each as click's ``CliRunner`` runs
it: its own exit code, stdout, stderr (and stdin), as separate processes would give them.

A command in its own process pays the interpreter's start and its imports (crewAI, torch, Milvus Lite's client:
~6 s idle, 15 s and more under load) every time; where a test compares what many commands print, not the process
boundary, one process pays them once. Between commands the child undoes what a command leaves in the process's
logging (a new process has no root handler and every logger at its default level), so each command logs as it
would alone; everything a command opens it closes itself (``with_runtime``), as it must for the console script.

    first, second = cli_batch([["kb", "stats", "--json"], ["ask", "-"]], env=env, inputs=[None, "What is X?\n"])
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from tempfile import TemporaryDirectory

_CHILD = r"""
import json, logging, sys, traceback
from click.testing import CliRunner
from researchcrew.cli import cli

commands = json.loads(open(sys.argv[1]).read())
manager = logging.root.manager
levels = {name: log.level for name, log in manager.loggerDict.items() if isinstance(log, logging.Logger)}
results = []
for args, given in commands:
    logging.root.handlers.clear()  # as in a new process: the command's basicConfig adds a handler on its stderr
    logging.root.setLevel(logging.WARNING)
    for name, log in list(manager.loggerDict.items()):
        if isinstance(log, logging.Logger):
            log.setLevel(levels.get(name, logging.NOTSET))
    result = CliRunner().invoke(cli, args, input=given, prog_name="researchcrew")
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):  # as the interpreter says it
        stderr += "".join(traceback.format_exception(result.exception))
    results.append({"returncode": result.exit_code, "stdout": result.stdout, "stderr": stderr})
logging.root.handlers.clear()
with open(sys.argv[2], "w") as out:
    json.dump(results, out)
"""


def cli_batch(
    commands: Sequence[Sequence[str]],
    *,
    env: dict[str, str],
    inputs: Sequence[str | None] | None = None,
    timeout: float = 600,
) -> list[subprocess.CompletedProcess[str]]:
    """What each of ``commands`` (argument lists, without the program name) gave, in order, run in one child
    process with ``env``; ``inputs[i]``, if given, is command i's stdin."""
    given = list(inputs) if inputs is not None else [None] * len(commands)
    assert len(given) == len(commands)
    with TemporaryDirectory(prefix="cli-batch-") as folder:
        request, answer = Path(folder) / "commands.json", Path(folder) / "results.json"
        request.write_text(json.dumps([[list(args), text] for args, text in zip(commands, given, strict=True)]))
        child = subprocess.run(
            [sys.executable, "-c", _CHILD, str(request), str(answer)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert child.returncode == 0 and answer.exists(), child.stderr[-3000:]
        results = json.loads(answer.read_text())
    return [
        subprocess.CompletedProcess(["researchcrew", *args], r["returncode"], r["stdout"], r["stderr"])
        for args, r in zip(commands, results, strict=True)
    ]
