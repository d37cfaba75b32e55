"""The deep-report quality check, measured on the labelled set (issue 21): how well its score separates sound from
flawed reports (AUROC), and per flaw how often it names what is wrong.

    .venv/bin/python benchmarks/deep_quality.py

The set is tests/deep/quality_set.py: sound reports from real offline deep runs over the demo corpus
(tests/deep/data/quality_reports.json, built by benchmarks/deep_quality_build.py) and flawed copies made by named
transformations. The check's thresholds were chosen on the ``tune`` split; ``report`` is measured only. Per split:
AUROC of ``overall`` (higher = sound), how many sound reports have findings (and which), and per flaw (and per
finding kind) the share of flawed reports whose findings name that kind. Prints one JSON document.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def auroc(sound: list[float], flawed: list[float]) -> float:
    """The probability that a sound report scores above a flawed one (ties count half): Mann-Whitney's U."""
    if not sound or not flawed:
        return float("nan")
    wins = sum(1.0 if s > f else 0.5 if s == f else 0.0 for s in sound for f in flawed)
    return wins / (len(sound) * len(flawed))


def measure(split: str) -> dict[str, Any]:
    from researchcrew.deep._quality import score_report
    from tests.deep.quality_set import cases

    sound: list[float] = []
    flawed: list[float] = []
    sound_findings: Counter[str] = Counter()
    detected: dict[str, list[bool]] = defaultdict(list)
    by_kind: dict[str, list[bool]] = defaultdict(list)
    passed_sound = passed_flawed = sound_with_findings = 0
    started = time.perf_counter()
    chosen = cases(split)  # type: ignore[arg-type]
    for case in chosen:
        scores = score_report(case.response, case.plan, case.question, attempt=1, threshold=0.7, evidence=case.evidence)
        kinds = {finding.kind for finding in scores.findings}
        if case.flaw is None:
            sound.append(scores.overall)
            sound_findings.update(kinds)
            sound_with_findings += bool(kinds)
            passed_sound += scores.passed
            continue
        flawed.append(scores.overall)
        passed_flawed += scores.passed
        detected[case.flaw].append(case.kind in kinds)
        by_kind[str(case.kind)].append(case.kind in kinds)
    elapsed = time.perf_counter() - started
    return {
        "sound": len(sound),
        "flawed": len(flawed),
        "auroc": round(auroc(sound, flawed), 4),
        "sound_overall_mean": round(sum(sound) / len(sound), 4),
        "flawed_overall_mean": round(sum(flawed) / len(flawed), 4),
        "sound_passed": passed_sound,
        "flawed_passed": passed_flawed,
        "sound_with_findings": sound_with_findings,
        "sound_findings_by_kind": dict(sound_findings),
        "detection_rate_by_flaw": {flaw: round(sum(hits) / len(hits), 3) for flaw, hits in detected.items()},
        "detection_rate_by_kind": {kind: round(sum(hits) / len(hits), 3) for kind, hits in by_kind.items()},
        "check_ms_per_report": round(elapsed * 1000 / max(1, len(chosen)), 2),
    }


def main() -> None:
    print(
        json.dumps(
            {
                "benchmark": "deep_quality",
                "set": "tests/deep/quality_set.py (demo corpus, offline deep runs; flaws by named transformations)",
                "tune": measure("tune"),
                "report": measure("report"),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
