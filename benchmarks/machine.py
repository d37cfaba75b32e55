"""What CPU a benchmark ran on, so that numbers from different machines are not compared as if alike.

Sessions run on 2-core machines of the same *kind*, but the CPU under them changes: the int8 embedder measured
95.8, 65–74 and 33–35 texts/s on three of them (two AVX-512 VNNI Xeons and an AVX2-only AMD EPYC). The
instructions that matter for int8 inference are listed by name; a result without them cannot be read.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from researchcrew.embedding._cpu import read_cpu_info, usable_cpus

# x86 instruction-set extensions that change int8 / float matrix-multiply speed, in /proc/cpuinfo spelling.
INT8_RELEVANT_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def describe_cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """Model name, usable cores, the int8-relevant instruction sets and the onnxruntime version."""
    cpu = read_cpu_info(cpuinfo)
    return {
        "model": cpu.model,
        "cpus": usable_cpus(),
        "instruction_sets": [flag for flag in INT8_RELEVANT_FLAGS if flag in cpu.flags],
        "int8_sums_saturate": cpu.int8_sums_saturate,
        "onnxruntime": _version("onnxruntime"),
    }


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None
