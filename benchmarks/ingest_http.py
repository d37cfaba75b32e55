"""Ingest over HTTP vs in process: SciFact (5,183 abstracts) uploaded to `researchcrew serve` keeps ≥ 90 % of the
in-process ingest rate measured in the same run (issue 19).

    .venv/bin/python benchmarks/ingest_http.py                  # the whole corpus, one upload (a few minutes)
    .venv/bin/python benchmarks/ingest_http.py --limit 1000     # the first 1,000 abstracts
    .venv/bin/python benchmarks/ingest_http.py --files 4        # the corpus split into 4 files, one request

Both sides run in a process of their own, each into a fresh data folder (a Milvus Lite file is one process's):

1. **In process**: `researchcrew ingest corpus.jsonl --json`, as a user ingests on the machine that holds the file.
   Its rate is the report's ``documents_per_second``: reading, chunking, embedding and writing, *without* opening
   the knowledge base and loading the model (a one-off per process).
2. **Over HTTP**: `researchcrew serve --no-auth` (warm: the model and the knowledge base open at start-up), then
   ``POST /v1/documents`` with the file(s) as ``multipart/form-data``; the time runs from the first byte sent until
   the last document's ``GET /v1/documents/{id}/events`` stream says ``ready`` — upload, the loaders' check at the
   door, the background ingestion and its bookkeeping all count.

Prints one JSON document: both rates (the median over ``--rounds``, which alternate which side goes first), the
ratio of the medians (target ≥ 0.9), and the machine (CPU, load average before/after: the machine may be shared).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import describe_cpu  # benchmarks/machine.py (this script's own folder is on sys.path)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT.parent / "shared" / "data" / "scifact" / "corpus.jsonl"
TARGET_RATIO = 0.9


def environment(data_dir: Path) -> dict[str, str]:
    from researchcrew.embedding.embedder import default_cache_dir

    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCHCREW_")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "RESEARCHCREW_DATA_DIR": str(data_dir),
            "RESEARCHCREW_ENABLED_SOURCES": '["rag"]',
            "RESEARCHCREW_EMBEDDING__CACHE_DIR": str(default_cache_dir()),
            "RESEARCHCREW_DOCUMENTS__MAX_FILE_BYTES": str(64 * 1024 * 1024),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "CREWAI_DISABLE_TELEMETRY": "true",
            "OTEL_SDK_DISABLED": "true",
            "GRPC_VERBOSITY": "NONE",
        }
    )
    return env


CLI = [sys.executable, "-c", "from researchcrew.cli import main; main()"]


def split(corpus: Path, limit: int | None, files: int, folder: Path) -> tuple[list[Path], int]:
    lines = [line for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    lines = lines[:limit] if limit else lines
    paths: list[Path] = []
    per_file = -(-len(lines) // files)
    for index in range(files):
        part = lines[index * per_file : (index + 1) * per_file]
        if part:
            path = folder / f"scifact-{index + 1}.jsonl"
            path.write_text("\n".join(part) + "\n", encoding="utf-8")
            paths.append(path)
    return paths, len(lines)


def in_process(paths: list[Path], data_dir: Path) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run(
        [*CLI, "ingest", *map(str, paths), "--json"], env=environment(data_dir), capture_output=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"ingest failed ({done.returncode}):\n{done.stderr.decode(errors='replace')[-3000:]}")
    report = json.loads(done.stdout)
    return {
        "documents": report["documents_added"] + report["documents_replaced"],
        "chunks": report["chunks_added"],
        "seconds_ingesting": round(report["seconds"] - report["setup_seconds"], 2),
        "seconds_with_startup": round(time.perf_counter() - started, 2),
        "documents_per_second": round(report["documents_per_second"], 2),
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / "serve.log").open("wb") as log:
        return subprocess.Popen(
            [*CLI, "serve", "--no-auth", "--port", str(port)],
            env=environment(data_dir),
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def server_log(data_dir: Path) -> str:
    return (data_dir / "serve.log").read_text(errors="replace")[-3000:]


def over_http(paths: list[Path], data_dir: Path) -> dict[str, Any]:
    port = free_port()
    uploads = [(path.name, path.read_bytes()) for path in paths]
    process = start_server(data_dir, port)
    try:
        return asyncio.run(upload_and_wait(f"http://127.0.0.1:{port}", uploads, process, data_dir))
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()


async def upload_and_wait(
    base: str, uploads: list[tuple[str, bytes]], process: subprocess.Popen[bytes], data_dir: Path
) -> dict[str, Any]:
    import httpx

    async with httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(600, connect=5)) as client:
        ready_s = await wait_ready(client, process, data_dir)
        files = [("file", (name, content, "application/x-ndjson")) for name, content in uploads]
        started = time.perf_counter()
        response = await client.post("/v1/documents", files=files)
        if response.status_code != 202:
            raise SystemExit(f"upload refused: {response.status_code} {response.text}")
        accepted_s = time.perf_counter() - started
        documents = response.json()["documents"]
        finals = await asyncio.gather(*(final_event(client, document["id"]) for document in documents))
        seconds = time.perf_counter() - started
    failed = [event for event in finals if event["status"] != "ready"]
    if failed:
        raise SystemExit(f"ingestion failed: {failed}")
    records = sum(document["records"] for document in documents)
    return {
        "documents": records,
        "chunks": sum(event["chunks"] for event in finals),
        "server_ready_s": round(ready_s, 2),
        "upload_accepted_s": round(accepted_s, 2),
        "seconds": round(seconds, 2),
        "documents_per_second": round(records / seconds, 2),
    }


async def wait_ready(client: Any, process: subprocess.Popen[bytes], data_dir: Path) -> float:
    import httpx

    started = time.perf_counter()
    while time.perf_counter() - started < 300:
        if process.poll() is not None:
            raise SystemExit(f"serve exited:\n{server_log(data_dir)}")
        try:
            if (await client.get("/readyz")).status_code == 200:
                return time.perf_counter() - started
        except httpx.TransportError:
            await asyncio.sleep(0.2)  # not listening yet
        else:
            await asyncio.sleep(0.2)
    raise SystemExit(f"serve was not ready within 300 s:\n{server_log(data_dir)}")


async def final_event(client: Any, document_id: str) -> dict[str, Any]:
    """The last event of the document's progress stream (ready or failed)."""
    last: dict[str, Any] = {}
    async with client.stream("GET", f"/v1/documents/{document_id}/events") as stream:
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                last = json.loads(line[6:])
    return last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--limit", type=int, default=None, help="Only the first N abstracts.")
    parser.add_argument("--files", type=int, default=1, help="Split the corpus into this many files (one request).")
    parser.add_argument(
        "--rounds", type=int, default=1, help="Measure both sides this many times, alternating which goes first."
    )
    args = parser.parse_args()
    if not args.corpus.exists():
        raise SystemExit(f"{args.corpus} is missing (../shared/data/scifact from the project root)")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="researchcrew-ingest-http-") as folder:
        root = Path(folder)
        paths, records = split(args.corpus, args.limit, max(1, args.files), root)
        local_runs: list[dict[str, Any]] = []
        remote_runs: list[dict[str, Any]] = []
        for round_number in range(max(1, args.rounds)):
            sides = [
                lambda n=round_number: local_runs.append(in_process(paths, root / f"in-process-{n}")),
                lambda n=round_number: remote_runs.append(over_http(paths, root / f"http-{n}")),
            ]
            for side in sides if round_number % 2 == 0 else reversed(sides):
                side()
    local_rate = statistics.median(run["documents_per_second"] for run in local_runs)
    remote_rate = statistics.median(run["documents_per_second"] for run in remote_runs)
    ratio = remote_rate / local_rate if local_rate else 0.0
    local = {"documents_per_second_median": local_rate, "runs": local_runs}
    remote = {"documents_per_second_median": remote_rate, "runs": remote_runs}
    print(
        json.dumps(
            {
                "benchmark": "ingest_http",
                "corpus": str(args.corpus),
                "records": records,
                "files": len(paths),
                "in_process": local,
                "http": remote,
                "ratio": round(ratio, 3),
                "target_ratio": TARGET_RATIO,
                "meets_target": ratio >= TARGET_RATIO,
                "machine": {
                    "cpu": describe_cpu(),
                    "load_before": [round(x, 2) for x in load_before],
                    "load_after": [round(x, 2) for x in os.getloadavg()],
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
