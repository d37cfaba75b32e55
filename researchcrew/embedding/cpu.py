"""What the CPU offers for int8 matrix multiplication, which decides how fast and how exact the int8 embedder is.

ONNX Runtime multiplies u8 activations by s8 weights. With VNNI (``vpdpbusd``: AVX-512 VNNI, AVX-VNNI) or AMX the
products are summed in 32 bits and the result is exact. With AVX2 alone it uses ``vpmaddubsw``, which adds pairs
of products in *16* bits and saturates: the int8 vectors drift a little further from the float model's (measured on
an AMD EPYC Zen 3: cosine mean 0.993, min 0.983 over 500 SciFact abstracts, against ≥ 0.99 on a VNNI Xeon).
Retrieval did not notice (SciFact hybrid nDCG@10 0.749 from either CPU's vectors), but users and tests should
know which case they are in. ONNX Runtime's ``reduce_range`` (7-bit weights) avoids the saturation at the cost of
one bit of precision, and measured no better overall (benchmarks/README.md).
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
