"""Structured evidence (issue 22, seed 004): annotations extracted at ingest, and questions answered from them.

    .venv/bin/python benchmarks/structured.py [--rounds 2] [--keep DIR]

Builds three corpora in a temporary folder, from a fixed seed: receipts (Markdown and HTML, a vendor, a date, a
total and an item table) and invoices (CSV line-item exports with a date column); product spec sheets (solar
panels, inverters, batteries) whose dimensions and weights are written in mixed units (m, mm, cm, in; kg, lb); and
paper abstracts that report a sample size, a reagent cost per test or an ImageNet accuracy. The gold answers come
from the generator's own records (metric values, item lists), never from the system under test.

About 90 labelled questions (alternately tune/report), asked through ``AnnotationStage`` (rules, no LLM):
row questions (which rows: receipts containing an item, with a year), document questions (which documents: a
total, a width, a sample size above or below a bound, in any unit), aggregates (count, mean, min, max), and
questions that belong elsewhere (conceptual → long_text; fields no document annotates → hybrid), and questions that
are half a table and half text ("... above 1,000 and what did they find?" → hybrid, its rows still checked). Reports row
precision and recall (micro), aggregate exactness, route accuracy, extraction precision (every stored value found
verbatim in its passage) and the ingest slow-down with annotations on versus off (median of ``--rounds``, after a
warm-up ingest), in wall time and in CPU time (all threads of the process).
Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.machine import describe_cpu

SEED = 22
VENDORS = ["Tire World", "Office Depot", "Lab Supply Co", "AutoParts Plus", "Green Hardware"]
ITEMS = [
    ("All-season tires", 89.50),
    ("Snow tires", 112.00),
    ("Wiper blades", 12.00),
    ("Motor oil", 24.99),
    ("Brake pads", 45.00),
    ("Printer paper", 5.99),
    ("Toner cartridge", 64.00),
    ("Nitrile gloves", 9.50),
    ("Pipette tips", 18.25),
    ("Air filter", 15.75),
    ("Spark plugs", 7.80),
]
SEARCH_ITEMS = ["tires", "wiper blades", "motor oil", "brake pads", "printer paper", "toner", "gloves", "pipette tips"]
LENGTH_UNITS = [
    ("m", 1.0, "{:.3f} m"),
    ("mm", 1e-3, "{:.0f} mm"),
    ("cm", 1e-2, "{:.1f} cm"),
    ("in", 0.0254, "{:.1f} in"),
]
MASS_UNITS = [("kg", 1.0, "{:.1f} kg"), ("lb", 0.45359237, "{:.1f} lb")]


@dataclass
class Corpus:
    folder: Path
    receipts: list[dict[str, Any]] = field(default_factory=list)  # title, vendor, date, items [(name, qty, price)]
    products: list[dict[str, Any]] = field(default_factory=list)  # title, kind, width, height, weight, power
    papers: list[dict[str, Any]] = field(default_factory=list)  # title, sample, cost, accuracy


def _written(value_metric: float, unit: tuple[str, float, str]) -> tuple[str, float]:
    """The value as written in ``unit`` and the metric value that text stands for (after rounding)."""
    text = unit[2].format(value_metric / unit[1])
    number = float(text.split()[0]) * unit[1]
    return text, number


def build_corpus(folder: Path) -> Corpus:
    rng = random.Random(SEED)
    corpus = Corpus(folder)
    for number in range(1, 31):
        year = rng.choice([2023, 2024])
        date = f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        items = [(name, rng.randint(1, 6), price) for name, price in rng.sample(ITEMS, rng.randint(2, 5))]
        vendor = rng.choice(VENDORS)
        total = round(sum(qty * price for _, qty, price in items), 2)
        if number <= 22:  # receipts: Markdown and HTML, with facts
            title = f"Receipt R{number:03d}"
            corpus.receipts.append({"title": title, "vendor": vendor, "date": date, "items": items, "total": total})
            if number % 2:
                table = "\n".join(f"| {name} | {qty} | ${price:.2f} |" for name, qty, price in items)
                text = (
                    f"# {title}\n\nVendor: {vendor}\n\nDate: {date}\n\nThank you for shopping with us.\n\n"
                    f"| Item | Qty | Price |\n|---|---|---|\n{table}\n\nTotal: ${total:.2f}\n"
                )
                (folder / f"receipt-{number:03d}.md").write_text(text, encoding="utf-8")
            else:
                cells = "".join(
                    f"<tr><td>{name}</td><td>{qty}</td><td>${price:.2f}</td></tr>" for name, qty, price in items
                )
                html = (
                    f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>"
                    f"<p>Vendor: {vendor}. Date: {date}. Items bought for the research station.</p>"
                    f"<table><tr><th>Item</th><th>Qty</th><th>Price</th></tr>{cells}</table>"
                    f"<p>Total: ${total:.2f}</p></article></body></html>"
                )
                (folder / f"receipt-{number:03d}.html").write_text(html, encoding="utf-8")
        else:  # invoices: CSV line items with their date
            title = f"invoice {number:03d}"
            corpus.receipts.append({"title": title, "vendor": vendor, "date": date, "items": items, "total": None})
            lines = ["Item,Qty,Unit price,Date"] + [f"{name},{qty},${price:.2f},{date}" for name, qty, price in items]
            (folder / f"invoice-{number:03d}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    kinds = [("solar panel", 14), ("inverter", 5), ("battery", 5)]
    serial = 0
    for kind, count in kinds:
        for _ in range(count):
            serial += 1
            brand = rng.choice(["Sun", "Helio", "Bright", "Volt", "Terra"]) + rng.choice(["Max", "Ray", "Cell", "Core"])
            model = f"{brand} {serial * 10 + 300}"
            title = f"{model} {kind} spec sheet"
            width_m = (
                rng.choice([0.95, 1.0, 1.05, 1.134, 1.15, 1.25, 1.303, 1.35])
                if kind == "solar panel"
                else rng.uniform(0.3, 0.7)
            )
            height_m = rng.uniform(1.6, 2.3) if kind == "solar panel" else rng.uniform(0.3, 0.9)
            weight_kg = rng.uniform(15, 30) if kind == "solar panel" else rng.uniform(8, 60)
            power = rng.choice([300, 330, 370, 400, 430, 460, 500]) if kind != "battery" else None
            width_text, width = _written(width_m, rng.choice(LENGTH_UNITS))
            height_text, height = _written(height_m, rng.choice(LENGTH_UNITS))
            weight_text, weight = _written(weight_kg, rng.choice(MASS_UNITS))
            facts = [f"Model: {model}", f"Width: {width_text}", f"Height: {height_text}", f"Weight: {weight_text}"]
            if power is not None:
                facts.append(f"Power: {power} W")
            text = (
                f"# {title}\n\nThe {model} is a {kind} for off-grid research stations.\n\n## Specifications\n\n"
                + "\n".join(f"- {fact}" for fact in facts)
                + "\n"
            )
            (folder / f"spec-{serial:03d}.md").write_text(text, encoding="utf-8")
            corpus.products.append(
                {"title": title, "kind": kind, "width": width, "height": height, "weight": weight, "power": power}
            )
    for number in range(1, 15):
        pooled = number <= 7
        sample = rng.choice([320, 640, 850, 1204, 1900, 2500, 5310, 7400])
        if pooled:
            cost = rng.choice([1.10, 2.35, 3.15, 0.95, 4.20])
            title = f"Pooled testing study {number}: group testing for screening"
            facts = [f"Sample size: {sample:,}", f"Reagent cost per test: ${cost:.2f}"]
            corpus.papers.append({"title": title, "sample": sample, "cost": cost, "accuracy": None})
        else:
            accuracy = rng.choice([71.2, 76.1, 79.8, 81.5, 84.0, 87.3])
            title = f"Vision paper {number}: a convolutional model for image classification"
            facts = [f"Sample size: {sample:,} images", f"Accuracy on ImageNet: {accuracy}%"]
            corpus.papers.append({"title": title, "sample": sample, "cost": None, "accuracy": accuracy})
        text = (
            f"# {title}\n\n## Abstract\n\nWe study the problem with a new method and report our results below.\n\n"
            + "\n\n".join(facts)
            + "\n"
        )
        (folder / f"paper-{number:03d}.md").write_text(text, encoding="utf-8")
    return corpus


def _stem_words(text: str) -> set[str]:
    from researchcrew.text.terms import stem, term_words

    return {stem(word) for word in term_words(text)}


def questions(corpus: Corpus) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def add(question: str, route: str, kind: str, gold: Any = None) -> None:
        found.append({"question": question, "route": route, "kind": kind, "gold": gold})

    def item_rows(term: str, year: int | None = None, *, invoices: bool = False) -> list[list[str]]:
        """Rows whose item holds the term; "receipts" are the receipts, invoices only when the question says so."""
        wanted = _stem_words(term)
        return sorted(
            [receipt["title"], name]
            for receipt in corpus.receipts
            for name, _, _ in receipt["items"]
            if wanted <= _stem_words(name)
            and (year is None or receipt["date"].startswith(str(year)))
            and (invoices or receipt["total"] is not None)
        )

    for term in SEARCH_ITEMS:
        add(f"receipts containing {term}", "structured", "rows", item_rows(term))
        add(f"Which invoices or receipts include {term}?", "structured", "rows", item_rows(term, invoices=True))
        add(f"receipts containing {term} in 2024", "structured", "rows", item_rows(term, 2024))
    receipts = [r for r in corpus.receipts if r["total"] is not None]
    for bound in (100, 200, 300, 400, 500):
        add(
            f"Which receipts have a total above ${bound}?",
            "structured",
            "docs",
            sorted(r["title"] for r in receipts if r["total"] > bound),
        )
    for bound in (150, 250, 350):
        add(
            f"receipts with a total under ${bound}",
            "structured",
            "docs",
            sorted(r["title"] for r in receipts if r["total"] < bound),
        )
    for term in SEARCH_ITEMS[:6]:
        documents = {row[0] for row in item_rows(term)}
        add(f"How many receipts contain {term}?", "structured", "aggregate", ("count", float(len(documents))))
    panels = [p for p in corpus.products if p["kind"] == "solar panel"]
    for bound in (1.0, 1.1, 1.2, 1.3):
        add(
            f"Which solar panels have a width ≤ {bound} m?",
            "structured",
            "docs",
            sorted(p["title"] for p in panels if p["width"] <= bound + 1e-9),
        )
    for bound in (40, 44, 48):
        add(
            f"solar panels narrower than {bound} in",
            "structured",
            "docs",
            sorted(p["title"] for p in panels if p["width"] < bound * 0.0254 - 1e-9),
        )
    for bound in (18, 22, 25):
        add(
            f"solar panels with a weight above {bound} kg",
            "structured",
            "docs",
            sorted(p["title"] for p in panels if p["weight"] > bound + 1e-9),
        )
    for bound in (350, 400, 450):
        add(
            f"solar panels with power above {bound} W",
            "structured",
            "docs",
            sorted(p["title"] for p in panels if p["power"] > bound),
        )
    for bound in (10, 20, 30):
        add(
            f"Which products have a weight under {bound} kg?",
            "structured",
            "docs",
            sorted(p["title"] for p in corpus.products if p["weight"] < bound - 1e-9),
        )
    batteries = [p for p in corpus.products if p["kind"] == "battery"]
    inverters = [p for p in corpus.products if p["kind"] == "inverter"]
    add(
        "average width of the solar panels",
        "structured",
        "aggregate",
        ("mean", statistics.fmean(p["width"] for p in panels)),
    )
    add("maximum power of the solar panels", "structured", "aggregate", ("max", float(max(p["power"] for p in panels))))
    add("minimum weight of the solar panels", "structured", "aggregate", ("min", min(p["weight"] for p in panels)))
    add(
        "average weight of the batteries",
        "structured",
        "aggregate",
        ("mean", statistics.fmean(p["weight"] for p in batteries)),
    )
    add("maximum width of the inverters", "structured", "aggregate", ("max", max(p["width"] for p in inverters)))
    for bound in (500, 1000, 2000, 5000):
        add(
            f"Which studies report a sample size above {bound:,}?",
            "structured",
            "docs",
            sorted(p["title"] for p in corpus.papers if p["sample"] > bound),
        )
    for bound in (800, 3000):
        add(
            f"studies with a sample size under {bound:,}",
            "structured",
            "docs",
            sorted(p["title"] for p in corpus.papers if p["sample"] < bound),
        )
    vision = [p for p in corpus.papers if p["accuracy"] is not None]
    pooled = [p for p in corpus.papers if p["cost"] is not None]
    add("List the accuracy each paper reports on ImageNet", "structured", "docs", sorted(p["title"] for p in vision))
    for bound in (75, 80, 85):
        add(
            f"papers with accuracy on ImageNet above {bound}%",
            "structured",
            "docs",
            sorted(p["title"] for p in vision if p["accuracy"] > bound),
        )
    add(
        "Average reagent cost per test across the pooled testing papers",
        "structured",
        "aggregate",
        ("mean", statistics.fmean(p["cost"] for p in pooled)),
    )
    add("maximum reagent cost per test", "structured", "aggregate", ("max", max(p["cost"] for p in pooled)))
    add("minimum reagent cost per test", "structured", "aggregate", ("min", min(p["cost"] for p in pooled)))
    for question in (
        "Why does pooled testing reduce reagent use?",
        "Explain how solar panel efficiency degrades over time",
        "How does group testing work?",
        "Describe the method the vision papers propose",
        "Why do research stations need off-grid power?",
        "How do convolutional models classify images?",
        "Summarize what the pooled testing studies found",
        "What causes tire wear on field station trucks?",
        "Explain why batteries lose capacity in the cold",
        "How can pooling be combined with screening programmes?",
    ):
        add(question, "long_text", "conceptual")
    # Half a table, half text: the rows answer the first part, the passages the rest (hybrid, rows still exact).
    for bound in (1000, 3000):
        add(
            f"Which studies report a sample size above {bound:,} and what did they find?",
            "hybrid",
            "docs",
            sorted(p["title"] for p in corpus.papers if p["sample"] > bound),
        )
    add(
        "papers with accuracy on ImageNet above 80% and how did they train their models?",
        "hybrid",
        "docs",
        sorted(p["title"] for p in vision if p["accuracy"] > 80),
    )
    add(
        "solar panels with power above 400 W and what did the field tests show",
        "hybrid",
        "docs",
        sorted(p["title"] for p in panels if p["power"] > 400),
    )
    for question in (
        "Which receipts show the cashier?",
        "List the payment method of each receipt",
        "Which studies list their funding source?",
        "List the inverter efficiency for each model",
        "Which panels list a frame colour?",
    ):
        add(question, "hybrid", "conceptual")
    for number, item in enumerate(found):
        item["split"] = "tune" if number % 2 == 0 else "report"
    return found


def _identity(kind: str, row: Any) -> Any:
    if kind == "rows":
        return (row.document, str(row.values[1]))
    return row.document


def evaluate(stage: Any, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from researchcrew.contracts.tables import StructuredRequest

    results = []
    for item in items:
        outcome = asyncio.run(stage.run(StructuredRequest(question=item["question"], page_size=5, deadline_s=60)))
        route = outcome.route.tried[0] if outcome.route.tried else outcome.route.route
        entry = {**item, "chosen_route": route}
        if item["kind"] in ("rows", "docs"):
            got = {_identity(item["kind"], row) for row in outcome.all_rows}
            gold = {tuple(g) if isinstance(g, list) else g for g in item["gold"]}
            entry.update(returned=len(got), gold_count=len(gold), correct=len(got & gold))
        elif item["kind"] == "aggregate":
            _operation, value = item["gold"]
            aggregates = outcome.table.aggregates if outcome.table else []
            got_value = aggregates[0].value if aggregates else None
            entry.update(
                got=got_value,
                exact=got_value is not None and abs(got_value - value) <= 1e-6 * max(1.0, abs(value)),
            )
        results.append(entry)
    return results


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [r for r in results if r["kind"] in ("rows", "docs")]
    returned = sum(r["returned"] for r in rows)
    gold = sum(r["gold_count"] for r in rows)
    correct = sum(r["correct"] for r in rows)
    aggregates = [r for r in results if r["kind"] == "aggregate"]
    return {
        "questions": len(results),
        "row_precision": round(correct / returned, 4) if returned else None,
        "row_recall": round(correct / gold, 4) if gold else None,
        "aggregates_exact": f"{sum(r['exact'] for r in aggregates)}/{len(aggregates)}",
        "route_accuracy": round(sum(r["route"] == r["chosen_route"] for r in results) / len(results), 4),
    }


def ingest_seconds(folder: Path, data_dir: Path, *, annotate: bool, embedder: Any) -> tuple[float, Any]:
    from researchcrew.knowledge.collection import KnowledgeBase
    from researchcrew.knowledge.ingest import ingest_paths
    from researchcrew.settings import Settings

    shutil.rmtree(data_dir, ignore_errors=True)
    # "on" is the extraction overall: annotations and the long-text route's summaries (none are made here: no
    # document is long; benchmarks/long_text.py measures a corpus with long ones).
    settings = Settings(data_dir=data_dir, structured={"annotate": annotate, "summaries": annotate})
    kb = KnowledgeBase(settings, embedder=embedder)
    kb.store.open()  # the chunks' collection is made before the clock starts ...
    made = time.perf_counter()
    if annotate:  # ... and so is the annotations' one: both are made once per knowledge base, not per ingest
        from researchcrew.knowledge.annotations import index_for

        annotations = index_for(kb)
        assert annotations is not None
        annotations.count(["shared"])
        COLLECTION_SETUP.append(time.perf_counter() - made)
    started = time.perf_counter()
    cpu = time.process_time()
    report = ingest_paths(kb, folder, progress=False)
    CPU_SECONDS["on" if annotate else "off"].append(time.process_time() - cpu)
    seconds = time.perf_counter() - started - report.setup_seconds
    return seconds, (kb, report)


COLLECTION_SETUP: list[float] = []  # seconds to make the annotations' collection in a fresh knowledge base
# CPU seconds of each ingest, every thread of this process (embedding workers, Milvus Lite's server threads): what
# extraction adds in work, which other processes' load on a shared machine moves far less than the wall time.
CPU_SECONDS: dict[str, list[float]] = {"off": [], "on": []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="ingest rounds with annotations on and off")
    parser.add_argument("--keep", type=Path, help="build the corpus and data here and keep them")
    options = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from researchcrew.embedding.embedder import default_cache_dir, get_embedder
    from researchcrew.knowledge.annotations import index_for
    from researchcrew.pipeline._structured import AnnotationStage
    from researchcrew.settings import EmbeddingSettings

    root = options.keep or Path(tempfile.mkdtemp(prefix="structured-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    folder = root / "corpus"
    folder.mkdir(exist_ok=True)
    corpus = build_corpus(folder)
    embedder = get_embedder(EmbeddingSettings(cache_dir=default_cache_dir()))
    embedder.embed_documents(["warm up"])
    timings: dict[str, list[float]] = {"off": [], "on": []}
    annotation_seconds: list[float] = []
    ingest_seconds(folder, root / "data-warm-up", annotate=True, embedder=embedder)[1][0].close()  # Milvus, imports
    CPU_SECONDS["on"].clear()
    kept: Any = None
    for number in range(options.rounds):
        for mode in ("off", "on") if number % 2 == 0 else ("on", "off"):
            data_dir = root / f"data-{mode}-{number}"  # a fresh knowledge base each time: everything is new to it
            seconds, (kb, report) = ingest_seconds(folder, data_dir, annotate=mode == "on", embedder=embedder)
            timings[mode].append(seconds)
            if mode == "off":
                kb.close()
                continue
            annotation_seconds.append(report.annotation_seconds)
            if kept is not None:
                kept[0].close()
            kept = (kb, report)
    kb, report = kept
    index = index_for(kb)
    stored = index.read(["shared"])
    passages = index.passages([item.annotation.chunk_id for item in stored], ["shared"])
    values = [
        (value.text, passages.get(("shared", item.annotation.chunk_id), {}).get("text", ""))
        for item in stored
        for value in item.annotation.values
    ]
    found = sum(text in passage for text, passage in values)
    items = questions(corpus)
    started = time.perf_counter()
    results = evaluate(AnnotationStage(index), items)
    per_question = (time.perf_counter() - started) / len(items)
    off, on = statistics.median(timings["off"]), statistics.median(timings["on"])
    misses = [
        {
            k: r[k]
            for k in ("question", "route", "chosen_route", "returned", "gold_count", "correct", "got", "gold")
            if k in r
        }
        for r in results
        if r["route"] != r["chosen_route"]
        or (r["kind"] in ("rows", "docs") and not (r["returned"] == r["gold_count"] == r["correct"]))
        or (r["kind"] == "aggregate" and not r["exact"])
    ]
    output = {
        "machine": describe_cpu(),
        "load_average": os.getloadavg(),
        "corpus": {
            "files": len(list(folder.iterdir())),
            "receipts_and_invoices": len(corpus.receipts),
            "products": len(corpus.products),
            "papers": len(corpus.papers),
            "annotations": len(stored),
            "documents": report.documents_added,
            "chunks": report.chunks_added,
        },
        "extraction_precision": round(found / len(values), 4) if values else None,
        "values_checked": len(values),
        "ingest_seconds": {"annotations_off": round(off, 3), "annotations_on": round(on, 3), "rounds": options.rounds},
        "ingest_slowdown": round(on / off - 1, 4) if off else None,
        "ingest_cpu_seconds": {mode: round(statistics.median(CPU_SECONDS[mode]), 3) for mode in ("off", "on")},
        "ingest_cpu_slowdown": round(
            statistics.median(CPU_SECONDS["on"]) / statistics.median(CPU_SECONDS["off"]) - 1, 4
        ),
        "annotation_seconds": round(statistics.median(annotation_seconds), 3),
        # One-off per knowledge base, outside the ingest times above (as the chunks' collection is).
        "annotation_collection_setup_seconds": round(statistics.median(COLLECTION_SETUP), 3),
        "annotation_share_of_ingest": round(statistics.median(annotation_seconds) / on, 4) if on else None,
        "tune": summarise([r for r in results if r["split"] == "tune"]),
        "report": summarise([r for r in results if r["split"] == "report"]),
        "all": summarise(results),
        "seconds_per_question": round(per_question, 4),
        "misses": misses,
    }
    kb.close()
    if options.keep is None:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(output, indent=2, default=str))


if __name__ == "__main__":
    main()
