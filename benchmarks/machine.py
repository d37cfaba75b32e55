"""What CPU a benchmark ran on, so that numbers from different machines are not compared as if alike.

Sessions run on 2-core machines of the same *kind*, but the CPU under them changes: the int8 embedder measured
95.8, 65–74 and 33–35 texts/s on three of them (an AVX-512 VNNI Xeon, another, and an AVX2-only AMD EPYC). The
instructions that matter for int8 inference are listed by name; a result without them cannot be read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# x86 instruction-set extensions that change int8 / float matrix-multiply speed, in /proc/cpuinfo spelling.
INT8_RELEVANT_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def describe_cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """Model name, usable cores and the int8-relevant instruction sets (empty where /proc/cpuinfo is absent)."""
    model, flags = "unknown", set[str]()
    try:
        text = cpuinfo.read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == "unknown":
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 1
    return {
        "model": model,
        "cpus": usable,
        "instruction_sets": [flag for flag in INT8_RELEVANT_FLAGS if flag in flags],
        "onnxruntime": _version("onnxruntime"),
    }


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None
