"""benchmarks/machine.py names the CPU a benchmark ran on, with the instruction sets that decide int8 speed."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

MACHINE = Path(__file__).resolve().parents[2] / "benchmarks" / "machine.py"


def _machine_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmark_machine", MACHINE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reports_model_int8_relevant_instruction_sets_and_runtime(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    processor = "model name\t: Intel(R) Xeon(R) Platinum\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512_vnni\n"
    cpuinfo.write_text(f"processor\t: 0\n{processor}\nprocessor\t: 1\n{processor}")

    described = _machine_module().describe_cpu(cpuinfo)

    assert described["model"] == "Intel(R) Xeon(R) Platinum"
    assert described["instruction_sets"] == ["avx2", "fma", "avx512f", "avx512_vnni"]
    assert described["cpus"] >= 1
    assert described["onnxruntime"]  # installed with the project
