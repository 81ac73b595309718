"""A random-weight model of the Qwen3-Embedding-0.6B shape, and chunks of known token lengths.

Compute and memory do not depend on the weights' values, so the benchmarks measure the real
model's cost without its weights (which are never downloaded here). The tokenizer is word-level
(one word "w<n>" = one token, `<|endoftext|>` appended as the real one does), so a chunk's length
in tokens is exact. Weights are saved in bf16, the precision the published checkpoint ships in.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
from pathlib import Path

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
USED_IDS = WORDS + 2  # with <|endoftext|> and <unk>: the smallest embedding table the text fits


def build_qwen3_shape(folder: Path, shape: dict[str, int] = QWEN3_06B) -> Path:
    """Random-weight Qwen3 of `shape` plus a word-level tokenizer appending <|endoftext|>."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3Model
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
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
    config = Qwen3Config(**shape, pad_token_id=0, eos_token_id=0)
    Qwen3Model(config).to(torch.bfloat16).eval().save_pretrained(folder)
    return folder


def build_apart(folder: Path, layers: int, vocab: int = QWEN3_06B["vocab_size"]) -> Path:
    """`build_qwen3_shape` with `layers` layers and `vocab` embedding rows in a child process:
    building needs the fp32 model in memory (~2.4 GB at full size), which a long-lived process
    would keep reserved."""
    argv = [sys.executable, __file__, str(folder), f"--layers={layers}", f"--vocab={vocab}"]
    subprocess.run(argv, check=True, timeout=900)
    return folder


def make_chunks(n: int, seed: int = 1, low: int = 50, high: int = 400) -> list[str]:
    """`n` texts of uniformly `low`..`high` tokens (words + <|endoftext|>), in arrival order."""
    rng = random.Random(seed)
    return [
        " ".join(f"w{rng.randrange(WORDS)}" for _ in range(rng.randint(low - 1, high - 1)))
        for _ in range(n)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where to write the model (created if needed)")
    parser.add_argument("--layers", type=int, default=QWEN3_06B["num_hidden_layers"])
    parser.add_argument("--vocab", type=int, default=QWEN3_06B["vocab_size"])
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    shape = QWEN3_06B | {"num_hidden_layers": args.layers, "vocab_size": args.vocab}
    build_qwen3_shape(args.folder, shape)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
