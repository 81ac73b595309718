"""The candidate rerankers' shapes for bench/rerank.py: random weights in each published
config (compute does not depend on the weights' values) and a word-level tokenizer (one word
"w<n>" = one token) with the family's pair template, so passage lengths are exact.

- cross-encoder/ms-marco-MiniLM-L{12,6,4,2}-v2: BERT, 12/6/4/2 layers, hidden 384, 12 heads
  (33M/22M/19M/16M);
- cross-encoder/ms-marco-TinyBERT-L2-v2: BERT-Tiny, 2 layers, hidden 128, 2 heads (4M);
- mixedbread-ai/mxbai-rerank-{xsmall,base}-v1: DeBERTa-v3 xsmall (12 x 384, 6 heads; 70M with
  its 128k vocabulary) and base (12 x 768; 184M);
- BAAI/bge-reranker-base: XLM-RoBERTa base, 12 layers, hidden 768 (278M);
- BAAI/bge-reranker-v2-m3: XLM-RoBERTa large, 24 layers, hidden 1024 (568M);
- Qwen/Qwen3-Reranker-0.6B: Qwen3, 28 layers, hidden 1024 (0.6B). The published model is a causal
  LM scored on the "yes"/"no" logits of the last token, which the service does not serve
  (embed_server/rerank.py refuses it); its shape is timed here as Qwen3ForSequenceClassification,
  the same decoder pass with a one-logit head on the last token instead of two vocabulary rows
  (and without the card's ~60-token instruction around each pair, so it is a lower bound).

The service serves sequence-classification models (embed_server/rerank.py); every shape here is
built as one, through transformers' Auto classes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

WORDS = 2000


def _bert(layers: int, hidden: int = 384, heads: int = 12) -> tuple[str, dict[str, Any]]:
    return "bert", {
        "vocab_size": 30522, "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": heads, "intermediate_size": 4 * hidden,
        "max_position_embeddings": 512, "type_vocab_size": 2,
    }  # fmt: skip


def _deberta_v3(layers: int, hidden: int, heads: int) -> tuple[str, dict[str, Any]]:
    return "deberta-v2", {
        "vocab_size": 128100, "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": heads, "intermediate_size": 4 * hidden,
        "max_position_embeddings": 512, "type_vocab_size": 0, "relative_attention": True,
        "position_buckets": 256, "max_relative_positions": -1, "pos_att_type": ["p2c", "c2p"],
        "position_biased_input": False, "norm_rel_ebd": "layer_norm", "share_att_key": True,
    }  # fmt: skip


# name -> (family, config); published quality and licence: bench/README.md and
# docs/design/reranking.md
MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "cross-encoder/ms-marco-MiniLM-L12-v2": _bert(12),
    "cross-encoder/ms-marco-MiniLM-L6-v2": _bert(6),
    "cross-encoder/ms-marco-MiniLM-L4-v2": _bert(4),
    "cross-encoder/ms-marco-MiniLM-L2-v2": _bert(2),
    "cross-encoder/ms-marco-TinyBERT-L2-v2": _bert(2, hidden=128, heads=2),
    "mixedbread-ai/mxbai-rerank-xsmall-v1": _deberta_v3(12, 384, 6),
    "mixedbread-ai/mxbai-rerank-base-v1": _deberta_v3(12, 768, 12),
    "BAAI/bge-reranker-base": (
        "xlm-roberta",
        {"vocab_size": 250002, "hidden_size": 768, "num_hidden_layers": 12,
         "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 514,
         "type_vocab_size": 1, "pad_token_id": 1},
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
         "intermediate_size": 3072, "max_position_embeddings": 40960, "rope_theta": 1000000.0,
         "tie_word_embeddings": True, "pad_token_id": 0},
    ),
}  # fmt: skip


def word_tokenizer(folder: Path, family: str) -> None:
    """A word-level tokenizer (one word "w<n>" = one token) with the family's pair template."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    if family == "xlm-roberta":  # <s> A </s></s> B </s>, pad id 1 as in XLM-R
        specials = ["<s>", "<pad>", "</s>", "<unk>"]
    vocab = {tok: i for i, tok in enumerate(specials)} | {f"w{i}": i + 4 for i in range(WORDS)}
    unknown = specials[-1 if family == "xlm-roberta" else 1]
    tok = Tokenizer(models.WordLevel(vocab, unk_token=unknown))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if family != "xlm-roberta":  # BERT's template for the others too: cost is the same
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
    from transformers import AutoConfig, AutoModelForSequenceClassification
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    torch.manual_seed(0)
    config = AutoConfig.for_model(family, **shape, num_labels=1)
    model = AutoModelForSequenceClassification.from_config(config)
    model.to(torch.bfloat16).eval().save_pretrained(folder)
    del model
    word_tokenizer(folder, family)
    return folder
