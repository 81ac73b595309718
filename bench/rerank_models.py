"""The candidate rerankers' shapes for bench/rerank.py: random weights in each published
config (compute does not depend on the weights' values) and a word-level tokenizer (one word
"w<n>" = one token) with the family's pair template, so passage lengths are exact.

- cross-encoder/ms-marco-MiniLM-L{6,4,2}-v2: BERT, 6/4/2 layers, hidden 384, 12 heads (22M/19M/16M);
- cross-encoder/ms-marco-TinyBERT-L2-v2: BERT-Tiny, 2 layers, hidden 128, 2 heads (4M);
- BAAI/bge-reranker-v2-m3: XLM-RoBERTa large, 24 layers, hidden 1024 (568M).

Only sequence-classification cross-encoders: what embedder/embed_server/rerank.py serves.
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


# name -> (family, config); published quality and licence: bench/README.md and
# docs/design/reranking.md
MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "cross-encoder/ms-marco-MiniLM-L6-v2": _bert(6),
    "cross-encoder/ms-marco-MiniLM-L4-v2": _bert(4),
    "cross-encoder/ms-marco-MiniLM-L2-v2": _bert(2),
    "cross-encoder/ms-marco-TinyBERT-L2-v2": _bert(2, hidden=128, heads=2),
    "BAAI/bge-reranker-v2-m3": (
        "xlm-roberta",
        {"vocab_size": 250002, "hidden_size": 1024, "num_hidden_layers": 24,
         "num_attention_heads": 16, "intermediate_size": 4096, "max_position_embeddings": 8194,
         "type_vocab_size": 1, "pad_token_id": 1},
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
