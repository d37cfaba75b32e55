# researchcrew: the API (`researchcrew serve`), batch workers (`researchcrew worker`) and the scheduler
# (`researchcrew scheduler`) all run this image; docker-compose.yml starts each with its own command.
#
# torch is installed first, as the CPU build from PyTorch's CPU index, so that pip never resolves the multi-GB CUDA
# build; the int8 ONNX export of the embedding model is then made once, here, at build time, so that a container
# starts embedding at once instead of exporting (~20 s) on its first question.
FROM python:3.11.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CREWAI_DISABLE_TELEMETRY=true \
    OTEL_SDK_DISABLED=true \
    CREWAI_TRACING_ENABLED=false \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    RESEARCHCREW_DATA_DIR=/data \
    RESEARCHCREW_EMBEDDING__CACHE_DIR=/opt/researchcrew/models

# DejaVu Sans: the Unicode font the PDF export of deep research reports embeds (researchcrew/deep/export/_pdf.py).
RUN apt-get update && apt-get install -y --no-install-recommends fonts-dejavu-core && rm -rf /var/lib/apt/lists/*

RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"

WORKDIR /opt/researchcrew/src
COPY pyproject.toml README.md ./
COPY researchcrew ./researchcrew
RUN pip install . \
    && python -c "import torch; assert not torch.cuda.is_available() and '+cpu' in torch.__version__, torch.__version__"

# The int8 ONNX embedder, built once into the image (embedding.cache_dir above points at it).
RUN python -c "from researchcrew.embedding.embedder import get_embedder; from researchcrew.settings import Settings; \
e = get_embedder(Settings()); assert type(e).__name__.lower().startswith('onnx'), type(e); print('embedder ready:', e)"

RUN useradd --create-home --uid 10001 researchcrew && mkdir -p /data && chown researchcrew /data
USER researchcrew
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
CMD ["researchcrew", "serve"]
