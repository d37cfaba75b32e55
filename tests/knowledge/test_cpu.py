"""researchcrew.embedding._cpu tells whether this CPU's int8 kernels sum products exactly (VNNI) or saturate (AVX2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from researchcrew.embedding import _cpu as cpu


def _cpuinfo(tmp_path: Path, flags: str, model: str = "Some CPU") -> Path:
    processor = f"model name\t: {model}\nflags\t\t: fpu sse2 {flags}\n"
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\n{processor}\nprocessor\t: 1\n{processor}")
    return path


@pytest.mark.parametrize(
    ("flags", "saturates"),
    [
        ("avx avx2 fma", True),  # e.g. AMD EPYC Zen 3
        ("avx2 avx512f avx512_vnni", False),  # Xeon with AVX-512 VNNI
        ("avx2 avx_vnni", False),  # Alder Lake and later
        ("avx2 avx512f amx_int8", False),
        ("sse4_2", False),  # no AVX2: not the vpmaddubsw kernel this flag is about
    ],
)
def test_int8_saturation_follows_the_instruction_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: str, saturates: bool
) -> None:
    monkeypatch.setattr(cpu.platform, "machine", lambda: "x86_64")
    info = cpu.read_cpu_info(_cpuinfo(tmp_path, flags, model="AMD EPYC"))
    assert info.model == "AMD EPYC"
    assert info.int8_sums_saturate is saturates


def test_other_architectures_never_count_as_saturating(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu.platform, "machine", lambda: "aarch64")
    assert cpu.read_cpu_info(_cpuinfo(tmp_path, "avx2")).int8_sums_saturate is False


def test_an_unreadable_cpuinfo_gives_unknown(tmp_path: Path) -> None:
    info = cpu.read_cpu_info(tmp_path / "absent")
    assert info.model == "unknown" and info.flags == frozenset() and info.int8_sums_saturate is False


def test_usable_cpus_follows_the_affinity_mask_not_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu.os, "sched_getaffinity", lambda pid: {3}, raising=False)  # taskset -c 3
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 64)
    assert cpu.usable_cpus() == 1
