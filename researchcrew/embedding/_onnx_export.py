"""The one-off conversion of a sentence-transformers model to ONNX, cached per model and recipe.

Not sentence-transformers' own ``backend="onnx"``: it needs ``optimum``, which pins an older ``transformers`` than
crewAI brings. The export is three steps, into a temporary directory renamed into place (two processes exporting at
once, or a crash mid-export, never leave a half-written model):

1. **Trace** the transformer (token embeddings out) with ``torch.onnx.export``.
2. **Fuse** BERT-family graphs with ONNX Runtime's transformer optimizer (the same arithmetic in fewer operators).
3. **Quantise** (the default) the matrix multiplications' weights to int8 per output channel, with per-call
   activation scales: several times the float model's speed; per-channel scales keep the vectors close to the
   float model's, where the library's default per-tensor scales do not.

The cache key is a fingerprint of the model files (names, sizes, modification times) and ``EXPORT_RECIPE``. What was
measured for each step, and what was tried and dropped: benchmarks/README.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import warnings
from pathlib import Path

from researchcrew.embedding._cpu import read_cpu_info
from researchcrew.embedding._onnx_layout import ModelLayout
from researchcrew.errors import ModelUnavailableError

logger = logging.getLogger(__name__)

# Bump when the export recipe changes, so cached exports made by an older recipe are not reused.
EXPORT_RECIPE = "2"
_OPSET = 17
_FUSABLE_MODEL_TYPES = frozenset({"bert"})


def _fingerprint(directory: Path) -> str:
    """Identifies the model files cheaply (names, sizes, modification times) plus the export recipe."""
    digest = hashlib.sha256(f"recipe={EXPORT_RECIPE};opset={_OPSET}".encode())
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(directory)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def export_model(layout: ModelLayout, cache_dir: Path, *, quantize: bool) -> Path:
    """The cached ONNX file for this model (float or int8), exporting it first if needed."""
    variant = "int8" if quantize else "fp32"
    target = cache_dir / "onnx" / f"{layout.directory.name}-{_fingerprint(layout.directory)}-{variant}"
    model_file = target / "model.onnx"
    if model_file.is_file():
        return model_file
    try:
        (cache_dir / "onnx").mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=cache_dir / "onnx"))
    except OSError as error:
        message = f"cannot export to ONNX: cache directory {cache_dir} is not usable ({error})"
        raise ModelUnavailableError(message) from error
    try:
        logger.info("exporting %s to ONNX (%s), once; cached in %s", layout.directory.name, variant, target)
        if quantize and read_cpu_info().int8_sums_saturate:
            logger.info(
                "this CPU has AVX2 but no VNNI: int8 vectors come within about 0.98 cosine of the float model's "
                "instead of 0.99 (retrieval measured unchanged); embedding.onnx_quantize=false gives exact vectors"
            )
        traced = work / "traced.onnx"
        _export_float(layout.directory, traced)
        fused = _fuse(layout.directory, traced, work / "fused.onnx")
        if quantize:
            _quantize(fused, work / "model.onnx")
        else:
            fused.rename(work / "model.onnx")
        for leftover in (traced, work / "fused.onnx"):
            leftover.unlink(missing_ok=True)
        (work / "export.json").write_text(
            json.dumps({"source": str(layout.directory), "variant": variant, "recipe": EXPORT_RECIPE}, indent=2)
        )
        try:
            work.rename(target)
        except OSError:  # another process finished first: its export is as good as ours
            if not model_file.is_file():
                raise
    except (OSError, RuntimeError, ValueError, ImportError) as error:
        raise ModelUnavailableError(f"cannot export {layout.directory.name} to ONNX: {error}") from error
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return model_file


def _export_float(model_dir: Path, destination: Path) -> None:
    """Trace the transformer (token embeddings out) with torch's TorchScript-based ONNX exporter."""
    import inspect

    import torch
    from transformers import AutoModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    # Eager attention traces into plain ops that every ONNX Runtime build runs; SDPA would add shape checks.
    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager")
    model.eval()
    names = ["input_ids", "attention_mask"]
    if "token_type_ids" in inspect.signature(model.forward).parameters:
        names.append("token_type_ids")

    class _TokenEmbeddings(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.inner(**dict(zip(names, inputs, strict=True))).last_hidden_state  # type: ignore[no-any-return]

    # Trace with real padding in the batch: a mask of all ones could let the model skip masking in the trace.
    input_ids = torch.full((2, 16), 1000, dtype=torch.long)
    attention_mask = torch.ones((2, 16), dtype=torch.long)
    attention_mask[1, 9:] = 0
    sample = (input_ids, attention_mask, torch.zeros((2, 16), dtype=torch.long))[: len(names)]
    axes = {name: {0: "batch", 1: "sequence"} for name in [*names, "token_embeddings"]}
    with warnings.catch_warnings(), torch.no_grad():
        # A one-off conversion: the exporter announces its own deprecation and that it folds shape checks into
        # constants (correct here: every input shares one sequence length). Neither concerns our callers.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # type: ignore[attr-defined]
        warnings.filterwarnings("ignore", message=".*operator of advanced indexing.*", category=UserWarning)
        torch.onnx.export(
            _TokenEmbeddings(model),
            sample,
            str(destination),
            dynamo=False,
            input_names=names,
            output_names=["token_embeddings"],
            dynamic_axes=axes,
            opset_version=_OPSET,
            do_constant_folding=True,
        )


def _fuse(model_dir: Path, source: Path, destination: Path) -> Path:
    """The graph with ONNX Runtime's fused transformer kernels, or ``source`` unchanged for other architectures."""
    config = json.loads((model_dir / "config.json").read_text())
    if config.get("model_type") not in _FUSABLE_MODEL_TYPES:
        logger.info("no fusion recipe for model type %r; using the traced graph", config.get("model_type"))
        return source
    from onnxruntime.transformers import optimizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the optimizer's own imports, not our concern
        fused = optimizer.optimize_model(
            str(source),
            model_type="bert",
            num_heads=int(config["num_attention_heads"]),
            hidden_size=int(config["hidden_size"]),
            opt_level=0,  # graph fusions only; the session applies its own optimisations at load
        )
    logger.debug("fused operators: %s", fused.get_fused_operator_statistics())
    fused.save_model_to_file(str(destination))
    return destination


def _quantize(source: Path, destination: Path) -> None:
    """Dynamic int8 quantisation, weights per output channel (see the module docstring for why)."""
    # The quantizer logs advice on the root logger ("consider pre-processing", meant for static quantisation of
    # vision models); it is not actionable here and would land in a user's terminal on the first ingest.
    advice = _DropRecordsFrom("onnxruntime/quantization")
    logging.getLogger().addFilter(advice)
    try:
        _quantize_dynamic(source, destination)
    finally:
        logging.getLogger().removeFilter(advice)


class _DropRecordsFrom(logging.Filter):
    def __init__(self, path_part: str) -> None:
        super().__init__()
        self._path_part = path_part

    def filter(self, record: logging.LogRecord) -> bool:
        return self._path_part not in record.pathname.replace("\\", "/")


def _quantize_dynamic(source: Path, destination: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(source),
        str(destination),
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul", "Attention"],
        per_channel=True,
        # The traced graph leaves some intermediate types to inference; float is what they are.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
