"""Every setting of the embedding service, read once. Field names are the environment variables.

Values come from the environment, then `.env` at the repository root (the parent of embedder/)
when present, then the defaults below. `SETTINGS_ENV_FILE`, not a setting, names another file to
read instead of that `.env` (the test suite points it at an empty file, as for kb/core/settings.py).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# as kb/core/settings.py reads LOG_LEVEL (this package is built into its image on its own)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# host[:port]: a name or IPv4 address, or an IPv6 address in brackets
HOST_VALUE = re.compile(
    r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)(:[0-9]{1,5})?"
)
QWEN3_RETRIEVAL_TASK = "Given a web search query, retrieve relevant passages that answer the query"
ENV_FILE_VARIABLE = "SETTINGS_ENV_FILE"


def env_file() -> Path:
    """The `.env` file settings are read from (looked up when settings are built)."""
    default = Path(__file__).resolve().parents[2] / ".env"
    return Path(os.environ.get(ENV_FILE_VARIABLE) or default)


def log_level(value: str) -> str:
    """LOG_LEVEL in any case, as the logging module names it; ValueError for another word."""
    level = value.strip().upper()
    if level not in LOG_LEVELS:
        raise ValueError(f"{value!r} is not a logging level (one of {', '.join(LOG_LEVELS)})")
    return level


def _cores() -> int:
    # Cores this process may run on (a container's cpuset), not the host's total.
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class EmbedderSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=True,
    )

    def __init__(self, **values: Any) -> None:
        # `_env_file=None` (no file) or another file given explicitly still wins.
        values.setdefault("_env_file", env_file())
        super().__init__(**values)

    EMBED_MODEL: str = Field(
        "Qwen/Qwen3-Embedding-0.6B",
        description="Model to serve: a local folder, or a hub id already in the Hugging Face cache "
        "(resolved offline; never downloaded at run time).",
    )
    EMBED_CODE_MODEL: str = Field(
        "",
        description="A second model served beside EMBED_MODEL, picked by a request's `model` "
        "field (the host's CODE_EMBED_MODEL, for the code collection); empty or equal to "
        "EMBED_MODEL: one model, loaded once.",
    )
    EMBED_PREVIOUS_MODEL: str = Field(
        "",
        description="The model the index was built with, served beside EMBED_MODEL while "
        "ingest.py rebuilds the index for EMBED_MODEL, so searches keep working until the new "
        "index takes over (docs/guide/model-switch.md); empty once it has.",
    )
    EMBED_HOST: str = Field("127.0.0.1", description="Interface the embedder binds.")
    EMBED_PORT: int = Field(8080, ge=1, le=65535, description="Port the embedder listens on.")
    EMBED_ALLOWED_HOSTS: str = Field(
        "",
        description="Comma-separated Host values accepted besides the defaults localhost, "
        "127.0.0.1, [::1] and embedder (the compose service name) on any port; other "
        "Host headers get 421, an Origin of another host 403 (DNS rebinding, "
        "docs/guide/security.md).",
    )
    EMBED_MAX_TOKENS: int = Field(
        2048,
        ge=8,
        description="Tokens embedded per input (longer inputs are truncated; usage shows the "
        "count). Also capped by the model's own limit.",
    )
    EMBED_QUERY_TASK: str = Field(
        QWEN3_RETRIEVAL_TASK,
        min_length=1,
        description="Task of the Qwen3 query instruction: queries are embedded as "
        "'Instruct: {task}\\nQuery:{text}'.",
    )
    EMBED_BATCH_TOKENS: int = Field(
        2048,
        ge=1,
        description="Padded tokens in flight at once: bounds the memory of a forward pass "
        "whatever the request size. Inputs are sorted by length into micro-batches that run two "
        "side by side on CPU (each at most half this budget); an input longer than that runs "
        "alone.",
    )
    EMBED_MAX_INPUTS: int = Field(
        2048,
        ge=1,
        description="Most inputs in one request, OpenAI's own limit (more -> 413 too_many_inputs).",
    )
    EMBED_MAX_BODY_BYTES: int = Field(
        8 * 1024 * 1024,
        ge=1024,
        description="Largest request body in bytes (larger -> 413 body_too_large).",
    )
    EMBED_QUEUE_SIZE: int = Field(
        32,
        ge=1,
        description="Requests that may wait for the model; beyond it -> 429 with Retry-After.",
    )
    EMBED_DTYPE: Literal["auto", "fp32", "bf16", "int8"] = Field(
        "auto",
        description="Precision: auto = with EMBED_BACKEND=auto on a CPU, the fastest engine that "
        "keeps cosine >= 0.995 to fp32, measured at first start (EMBED_AUTO_MEASURE); else bf16 "
        "where the hardware computes it natively (CPUs with AVX512-BF16 or AMX, CUDA GPUs with "
        "bf16), fp32 elsewhere; fp32 = exact reference; bf16 = half the memory, cosine to fp32 "
        ">= 0.9999, several times faster on CPUs with AMX (slower on CPUs without native bf16); "
        "int8 = int8 Linear layers with per-token scales, CPU only, cosine to fp32 ~0.998 on "
        "MiniLM, fastest on CPUs with VNNI but without AMX. /health reports the precision in use.",
    )
    EMBED_BACKEND: Literal["auto", "torch", "onnx"] = Field(
        "auto",
        description="Engine: auto = with EMBED_DTYPE=auto on a CPU, measured at first start "
        "among those this install carries (torch fp32, bf16, int8; onnx fp32 and int8 when the "
        "model was exported, the image does it with ONNX_EXPORT=true), see EMBED_AUTO_MEASURE; "
        "else torch; torch = PyTorch (fp32, bf16, int8); onnx = ONNX Runtime (fp32, or int8: "
        "per-tensor scales, cosine to fp32 0.98 on one-word inputs), CPU only, from the export "
        "in EMBED_ONNX_DIR. /health reports the engine in use.",
    )
    EMBED_AUTO_MEASURE: bool = Field(
        True,
        description="With EMBED_BACKEND=auto and EMBED_DTYPE=auto on a CPU: at first start, time "
        "each engine on the loaded model, check its vectors against fp32 (lowest cosine >= "
        "0.995) and run the fastest that holds, for documents and for queries; the decision is "
        "kept in EMBED_STATE_DIR for this CPU, model and library versions, and /health shows "
        "it with the figures. false: the per-CPU-class table instead (docs/guide/embedder.md).",
    )
    EMBED_STATE_DIR: str = Field(
        "~/.cache/personal-vector-mcp/embedder",
        description="Writable folder where the embedder keeps what it measured (the engine "
        "EMBED_AUTO_MEASURE chose); the image uses /var/lib/embedder, a volume in compose. "
        "Safe to delete: the next start measures again.",
    )
    EMBED_ONNX_DIR: str = Field(
        "~/.cache/personal-vector-mcp/onnx",
        description="Folder of the ONNX exports (`python embedder/export_onnx.py MODEL` writes "
        "them; the image exports at build time to /opt/onnx).",
    )
    EMBED_DEVICE: Literal["auto", "cpu", "cuda", "mps"] = Field(
        "auto",
        description="Where the model runs: auto = cuda when torch sees a CUDA GPU, else mps on "
        "Apple Silicon run natively (untested here), else cpu.",
    )
    EMBED_THREADS: int = Field(
        default_factory=_cores,
        ge=1,
        description="CPU threads the embedder computes with, shared by the micro-batches running "
        "side by side (a short input such as one query gets them all, or one while another "
        "process holds a core).",
    )
    EMBED_API_KEY: str = Field(
        "",
        description="If set, POST /v1/embeddings and GET /v1/models need 'Authorization: Bearer "
        "<key>' (OpenAI clients send their api_key so); /health stays open. Empty: no key.",
    )
    RERANK_MODEL: str = Field(
        "cross-encoder/ms-marco-TinyBERT-L2-v2",
        description="Cross-encoder served at POST /v1/rerank: a local folder, or a hub id already "
        "in the Hugging Face cache (the Docker image bakes it in at build time, like EMBED_MODEL; "
        "without Docker: `uvx --from huggingface-hub hf download <id>`). "
        "The default is the cheapest candidate by far (every other costs 3.4x or more; 0.2-0.7 s "
        "for 30 passages on a busy 2-core CPU); cross-encoder/ms-marco-MiniLM-L6-v2 ranks "
        "better at ~9-13x the cost, BAAI/bge-reranker-v2-m3 reads many languages (for a GPU) "
        "(docs/design/reranking.md). "
        "Empty: no reranker; search then ranks by the first stage alone.",
    )
    RERANK_MAX_TOKENS: int = Field(
        512,
        ge=16,
        description="Tokens per (query, passage) pair read by the reranker (longer pairs are cut; "
        "also capped by the model's own limit).",
    )
    RERANK_DTYPE: Literal["auto", "fp32", "bf16", "int8"] = Field(
        "auto",
        description="Precision of the reranker: auto = by CPU class (fp32 on CPUs without AMX, "
        "where bf16 ran slower; bf16 with AMX and on a GPU); int8 = dynamic int8 Linear layers, "
        "CPU only: ~1.5x faster than fp32 for MiniLM-L6 but it moves the scores (docs/"
        "reranking.md), so opt-in; fp32; bf16. /health reports the precision in use.",
    )
    RERANK_MAX_DOCUMENTS: int = Field(
        1000,
        ge=1,
        description="Most documents in one /v1/rerank request, Cohere's own limit (more -> 413 "
        "too_many_documents).",
    )
    LOG_LEVEL: Annotated[str, AfterValidator(log_level)] = Field(
        "INFO",
        description="Python logging level: DEBUG, INFO, WARNING, ERROR or CRITICAL, any case.",
    )

    @field_validator("EMBED_ALLOWED_HOSTS")
    @classmethod
    def _exact_hosts(cls, value: str) -> str:
        for host in value.split(","):
            if host.strip() and not HOST_VALUE.fullmatch(host.strip()):
                raise ValueError(
                    f"{host.strip()!r} is not a host[:port] value (no wildcard, scheme or path): "
                    "list the exact Host headers clients send"
                )
        return value
