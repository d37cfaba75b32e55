"""What the CPU offers for int8 matrix multiplication, which decides how fast and how exact the int8 embedder is.

With VNNI (AVX-512 VNNI, AVX-VNNI) or AMX, ONNX Runtime sums u8×s8 products in 32 bits: the int8 vectors are as
exact as int8 allows. With AVX2 alone it adds pairs of products in 16 bits, which saturates, and the vectors drift a
little further from the float model's (retrieval quality does not notice; the cosine bounds per CPU kind are in
benchmarks/README.md). Users and tests should know which case they are in.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

_EXACT_INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


@dataclass(frozen=True)
class CpuInfo:
    model: str
    flags: frozenset[str]
    machine: str

    @property
    def int8_sums_saturate(self) -> bool:
        """True on x86 CPUs whose int8 kernels add products in 16 bits (AVX2 without VNNI or AMX)."""
        x86 = self.machine.lower() in {"x86_64", "amd64", "i686", "i386"}
        return x86 and "avx2" in self.flags and not (self.flags & _EXACT_INT8_FLAGS)


def read_cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> CpuInfo:
    """The first processor's model name and flags (``unknown`` and none where ``/proc/cpuinfo`` cannot be read)."""
    model, flags = "unknown", frozenset[str]()
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == "unknown":
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = frozenset(value.split())
    return CpuInfo(model=model, flags=flags, machine=platform.machine())


def usable_cpus() -> int:
    """Cores this process may run on (a container or taskset may allow fewer than the machine has)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
