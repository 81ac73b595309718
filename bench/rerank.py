"""Added latency of the rerank stage for each candidate reranker's shape, side by side.

Random weights (compute does not depend on their values) in the shape of each candidate:

- cross-encoder/ms-marco-MiniLM-L6-v2: BERT, 6 layers, hidden 384 (22M parameters);
- BAAI/bge-reranker-v2-m3: XLM-RoBERTa large, 24 layers, hidden 1024 (568M);
- Qwen/Qwen3-Reranker-0.6B: Qwen3 0.6B, a causal LM scored on its "yes"/"no" logits of the last
  token, with the model card's prompt template around each pair (~70 tokens).

Each reranks one query (12 tokens) against 10, 30 and 50 passages of 300 tokens, through the
service's own code (embedder/rerank.py's Reranker and embedder/batching.py's Engine, in this
process: tokenizing, length-sorted micro-batches under EMBED_BATCH_TOKENS, the forward passes),
in the precision EMBED_DTYPE=auto picks here. Requests run interleaved across models and repeat;
p50/p95 per cell. A model whose single 10-passage run already exceeds the time budget gets its
larger sizes estimated linearly from that run (marked `~`); `--quick` also builds the deep
models with 2 layers and scales their times to full depth (marked `*`), so it stays short even
where a large model takes minutes.

    uv run bench/rerank.py [--quick] [--json] [--repeats N]

The default reranker is the fastest candidate whose p50 at 30 passages is within TARGET_S.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "embedder"))

from batching import Engine  # noqa: E402
from config import EmbedderSettings  # noqa: E402
from hardware import cpu_has_native_bf16, resolve_device, resolve_dtype  # noqa: E402

QUICK_LAYERS = 2
TARGET_S = 1.0  # the default must add at most this (p50, 30 passages, this machine)
SIZES = (10, 30, 50)
QUERY_TOKENS, PASSAGE_TOKENS = 12, 300
QWEN_TEMPLATE_TOKENS = (58, 12)  # system + instruction before the pair, the answer cue after
WORDS = 2000

# name -> (family, config); published quality and licence: bench/README.md and docs/reranking.md
MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "cross-encoder/ms-marco-MiniLM-L6-v2": (
        "bert",
        {"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
         "num_attention_heads": 12, "intermediate_size": 1536, "max_position_embeddings": 512,
         "type_vocab_size": 2},
    ),
    "BAAI/bge-reranker-v2-m3": (
        "xlm-roberta",
        {"vocab_size": 250002, "hidden_size": 1024, "num_hidden_layers": 24,
         "num_attention_heads": 16, "intermediate_size": 4096, "max_position_embeddings": 8194,
         "type_vocab_size": 1, "pad_token_id": 1},
    ),
    "Qwen/Qwen3-Reranker-0.6B": (
        "qwen3",
        {"vocab_size": 151669, "hidden_size": 1024, "num_hidden_layers": 28,
         "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
         "intermediate_size": 3072, "max_position_embeddings": 32768,
         "tie_word_embeddings": True},
    ),
}  # fmt: skip


def cpu_class() -> str:
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    bf16 = "native bf16 (AVX512-BF16/AMX)" if cpu_has_native_bf16() else "no native bf16"
    return f"{name}, {EmbedderSettings(_env_file=None).EMBED_THREADS} threads, {bf16}"


def word_tokenizer(folder: Path, family: str) -> None:
    """A word-level tokenizer (one word "w<n>" = one token) with the family's pair template."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    if family == "xlm-roberta":  # <s> A </s></s> B </s>, pad id 1 as in XLM-R
        specials = ["<s>", "<pad>", "</s>", "<unk>"]
    vocab = {tok: i for i, tok in enumerate(specials)} | {f"w{i}": i + 4 for i in range(WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=specials[-1 if family != "bert" else 1]))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if family == "bert":
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
        )
        pad, max_length = "[PAD]", 512
    else:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>",
            pair="<s> $A </s> </s> $B </s>",
            special_tokens=[("<s>", 0), ("</s>", 2)],
        )
        pad, max_length = "<pad>", 8192
    PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=pad, model_max_length=max_length
    ).save_pretrained(folder)


def build_cross_encoder(folder: Path, family: str, shape: dict[str, Any]) -> Path:
    import torch
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        XLMRobertaConfig,
        XLMRobertaForSequenceClassification,
    )
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    torch.manual_seed(0)
    if family == "bert":
        model = BertForSequenceClassification(BertConfig(**shape, num_labels=1))
    else:
        model = XLMRobertaForSequenceClassification(XLMRobertaConfig(**shape, num_labels=1))
    model.to(torch.bfloat16).eval().save_pretrained(folder)
    del model
    word_tokenizer(folder, family)
    return folder


class Qwen3YesNo:
    """Qwen3-Reranker's scoring: the causal LM over the templated pair, score = logit("yes") -
    logit("no") at the last token (only those two rows of the LM head are computed). Left
    padding; the shape `batching.Engine` drives, like embedder/rerank.py's Reranker."""

    dimensions = 1

    def __init__(self, shape: dict[str, Any], dtype: str, threads: int) -> None:
        import torch
        from transformers import Qwen3Config, Qwen3ForCausalLM

        torch.manual_seed(0)
        model = Qwen3ForCausalLM(Qwen3Config(**shape, pad_token_id=0, eos_token_id=0))
        model.to(torch.bfloat16 if dtype == "bf16" else torch.float32).eval()
        self.body = model.model
        self.yes_no = model.lm_head.weight[[9693, 2152]].detach().clone()  # two vocabulary rows
        self.threads = threads
        self.parallelism = min(2, threads)

    def tokenize(self, pairs: Sequence[tuple[str, str]]) -> list[np.ndarray]:
        before, after = QWEN_TEMPLATE_TOKENS
        out = []
        for query, doc in pairs:
            words = len(query.split()) + len(doc.split())
            out.append(np.arange(before + words + after, dtype=np.int64) % WORDS + 4)
        return out

    def embed_ids(self, batch: Sequence[np.ndarray], side_by_side: int = 1) -> np.ndarray:
        import torch

        longest = max(len(ids) for ids in batch)
        input_ids = torch.zeros((len(batch), longest), dtype=torch.long)
        mask = torch.zeros((len(batch), longest), dtype=torch.long)
        for row, ids in enumerate(batch):
            input_ids[row, longest - len(ids) :] = torch.from_numpy(ids)
            mask[row, longest - len(ids) :] = 1
        wanted = max(1, self.threads // side_by_side)
        if torch.get_num_threads() != wanted:
            torch.set_num_threads(wanted)
        with torch.inference_mode():
            hidden = self.body(input_ids=input_ids, attention_mask=mask, use_cache=False)
            logits = hidden.last_hidden_state[:, -1] @ self.yes_no.T
        return (logits[:, 0] - logits[:, 1]).float().reshape(-1, 1).numpy()


def load(name: str, dtype: str, folder: Path, settings: EmbedderSettings, layers: int) -> Any:
    family, shape = MODELS[name]
    shape = shape | {"num_hidden_layers": layers}
    if family == "qwen3":
        return Qwen3YesNo(shape, dtype, settings.EMBED_THREADS)
    from rerank import Reranker

    if not folder.exists():
        build_cross_encoder(folder, family, shape)
    update = {"RERANK_MODEL": str(folder), "RERANK_DTYPE": dtype}
    return Reranker(settings.model_copy(update=update))


def make_pairs(n: int, rng: random.Random, tokens: int = PASSAGE_TOKENS) -> list[tuple[str, str]]:
    def words(count: int) -> str:
        return " ".join(f"w{rng.randrange(WORDS)}" for _ in range(count))

    query = words(QUERY_TOKENS)
    return [(query, words(tokens)) for _ in range(n)]


def timed(engine: Engine, pairs: list[tuple[str, str]]) -> float:
    started = time.perf_counter()
    scores = engine.submit(pairs).result().vectors  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    assert scores.shape == (len(pairs), 1) and np.isfinite(scores).all()
    return elapsed


def measure(
    variants: Sequence[tuple[str, str]],
    repeats: int,
    budget_s: float,
    log: Callable[[str], None],
    max_layers: int | None = None,
    sizes: Sequence[int] = SIZES,
    tokens: int = PASSAGE_TOKENS,
) -> dict[str, dict[int, dict[str, Any]]]:
    """Latency samples per (model, precision) and size, one model in memory at a time.

    `max_layers`: build deeper models with only that many layers and scale their times by
    full depth / built depth (every layer costs the same; `--quick`), marked as scaled."""
    settings = EmbedderSettings(_env_file=None, EMBED_MODEL="-")
    rng = random.Random(14)
    results: dict[str, dict[int, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, dtype in variants:
            started = time.perf_counter()
            full = MODELS[name][1]["num_hidden_layers"]
            # the small model always at full depth: its figure picks the default
            layers = full if full <= 6 or not max_layers else max_layers
            folder = Path(tmp) / f"{name.replace('/', '--')}-{layers}"
            model = load(name, dtype, folder, settings, layers)
            scale = full / layers
            log(
                f"  built {name} {dtype}, {layers} of {full} layers "
                f"({time.perf_counter() - started:.0f} s)"
            )
            engine = Engine(
                model,
                batch_tokens=settings.EMBED_BATCH_TOKENS,
                queue_size=4,
                max_round_inputs=1000,
            )
            engine.start()
            timed(engine, make_pairs(2, rng))  # warm-up
            samples: dict[int, list[float]] = {n: [] for n in sizes}
            spent = 0.0
            for _ in range(repeats):
                for n in sizes:
                    if samples[n] and spent > budget_s:
                        continue
                    if not samples[n] and samples[sizes[0]] and n != sizes[0]:
                        estimate = statistics.median(samples[sizes[0]]) * n / sizes[0]
                        if spent + estimate > budget_s * 1.5:
                            continue
                    took = timed(engine, make_pairs(n, rng, tokens))
                    samples[n].append(took * scale)
                    spent += took
            engine.stop()
            del engine, model
            gc.collect()
            base = samples[sizes[0]]
            name = label(name, dtype)
            results[name] = {}
            for n in sizes:
                got = samples[n]
                if got:
                    p95 = float(np.percentile(got, 95)) if len(got) > 1 else got[0]
                    cell = {"p50": statistics.median(got), "p95": p95, "runs": len(got)}
                    cell["scaled_from_layers"] = layers if scale != 1 else None
                else:  # linear in passages: every passage is one more pair of equal length
                    cell = {"p50": statistics.median(base) * n / sizes[0], "runs": 0}
                results[name][n] = cell
    return results


def label(name: str, dtype: str) -> str:
    return f"{name} {dtype}"


def cell(value: dict[str, Any]) -> str:
    if not value["runs"]:
        return f"~{value['p50'] * 1000:,.0f} (est.)"
    mark = "*" if value.get("scaled_from_layers") else ""
    return f"{mark}{value['p50'] * 1000:,.0f} / {value['p95'] * 1000:,.0f}"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"fewer repeats; models deeper than {QUICK_LAYERS} layers built with {QUICK_LAYERS} "
        "and their times scaled to full depth (~3 minutes)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON object as the last line")
    p.add_argument("--repeats", type=int, default=None, help="runs per size (default 5; quick 3)")
    p.add_argument(
        "--models", default=",".join(MODELS), help="comma-separated candidates to measure"
    )
    p.add_argument(
        "--passage-tokens", type=int, default=PASSAGE_TOKENS, help="tokens per passage (300)"
    )
    p.add_argument(
        "--sizes", default=",".join(map(str, SIZES)), help="passages per request (10,30,50)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    chosen = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in MODELS]
    if unknown or not chosen:
        print(
            f"error: --models: unknown {unknown}; choose from {', '.join(MODELS)}", file=sys.stderr
        )
        return 2
    repeats = args.repeats or (3 if args.quick else 5)
    try:
        sizes = sorted({int(n) for n in args.sizes.split(",") if n.strip()})
    except ValueError:
        sizes = []
    if 30 not in sizes or sizes[0] < 1 or args.passage_tokens < 1:
        print("error: --sizes must include 30 (the target's size); sizes and "
              "--passage-tokens must be positive", file=sys.stderr)  # fmt: skip
        return 2
    budget = 20.0 if args.quick else 240.0
    settings = EmbedderSettings(_env_file=None, EMBED_MODEL="-")
    dtype = resolve_dtype(settings.EMBED_DTYPE, resolve_device("cpu"))
    # Every model in fp32 and in the precision auto picks here (when that differs).
    variants = list(dict.fromkeys((n, d) for n in chosen for d in ("fp32", dtype)))
    names = [label(n, d) for n, d in variants]
    print(
        f"CPU: {cpu_class()}; precision {dtype} (EMBED_DTYPE=auto); EMBED_BATCH_TOKENS="
        f"{settings.EMBED_BATCH_TOKENS}; query {QUERY_TOKENS} + passage {args.passage_tokens} "
        f"tokens per pair; up to {repeats} runs per cell, {budget:.0f} s per model",
        flush=True,
    )
    results = measure(
        variants,
        repeats,
        budget,
        lambda line: print(line, flush=True),
        max_layers=QUICK_LAYERS if args.quick else None,
        sizes=sizes,
        tokens=args.passage_tokens,
    )
    headers = ["model", *(f"{n} passages p50 / p95 ms" for n in sizes)]
    width = max(len(n) for n in names)
    print(f"{headers[0]:{width}s}  " + "  ".join(f"{h:>26s}" for h in headers[1:]))
    for name in names:
        row = "  ".join(f"{cell(results[name][n]):>26s}" for n in sizes)
        print(f"{name:{width}s}  {row}")
    if args.quick:
        print(f"* built with {QUICK_LAYERS} layers, time scaled to the full depth (--quick)")
    # The default: the fastest measured at 30 passages (the target says whether it is enough).
    measured = [n for n in names if results[n][30]["runs"]]
    default = min(measured, key=lambda n: results[n][30]["p50"]) if measured else None
    added = results[default][30]["p50"] * 1000 if default else None
    if default and added is not None:
        verdict = "meets" if added <= TARGET_S * 1000 else "MISSES"
        print(
            f"default: {default}, adds {added:,.0f} ms p50 for 30 passages: {verdict} the "
            f"target of <= {TARGET_S * 1000:.0f} ms on this machine"
        )
    if args.json:
        table = {
            name: {str(n): {k: round(v, 4) if isinstance(v, float) else v for k, v in c.items()}
                   for n, c in cells.items()}
            for name, cells in results.items()
        }  # fmt: skip
        summary = {"cpu": cpu_class(), "dtype": dtype, "latency_s": table}
        default_model = default and default.rsplit(" ", 1)[0]
        summary["default_dtype"] = default and default.rsplit(" ", 1)[1]
        summary |= {"default_model": default_model, "added_p50_ms_30": added and round(added, 1)}
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
