"""Ending the ``researchcrew`` process once its command is done, without the interpreter's teardown.

When a command returns, everything it opened is already closed (``with_runtime`` closes the runtime: memory writes
flushed, the memory store and the knowledge base closed). What Python does after that — tearing down some 1,500
imported modules one by one and running the finalizers of onnxruntime, gRPC, faiss and pandas — changes nothing on
disk, yet cost 0.6 s of a first answer on an idle machine (issue 19) and several seconds on a loaded one.

``finish_process`` keeps what matters of a normal exit, in the interpreter's own order: non-daemon threads are
joined (``threading._shutdown``: thread pools finish their queued work first), then the ``atexit`` handlers run
(logging's flush, Milvus Lite's server release), stdout and stderr are flushed; then the process ends with the
command's exit status (``os._exit``). Used only by the console script, never when ``main(argv)`` is called from
Python (tests, embedding applications): they keep their interpreter.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_status(code: object) -> int:
    """The status ``SystemExit(code)`` ends a process with: None → 0, an int as it is, anything else is printed to
    stderr and gives 1 (as the interpreter does)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def finish_process(code: object) -> NoReturn:
    """End the process now with ``SystemExit(code)``'s status, after joining threads, running ``atexit`` handlers
    and flushing stdio; falls back to a normal exit where the interpreter offers no thread shutdown hook."""
    shutdown_threads = getattr(threading, "_shutdown", None)
    if shutdown_threads is None:  # another Python implementation: exit the ordinary way
        raise SystemExit(code)
    status = exit_status(code)
    shutdown_threads()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``researchcrew ... | head``): as Python reports it
            status = status or 120
    os._exit(status)
