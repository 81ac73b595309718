"""Queries on a causal model reuse the keys and values of the query instruction.

Every Qwen3 query starts with the same instruction (`Instruct: {task}\\nQuery:`), which is
often most of a short query's tokens. In a causal model a token's keys and values depend only
on the tokens before it, so the instruction's are the same in every query: computed once per
loaded engine, they let each query run only its own tokens through the layers. The vectors are
those of the whole input (fp32 and bf16: up to summation order; int8 quantises each token's
activations on its own scale, so the instruction's tokens quantise as they would with the
query after them, up to the GEMM's rounding of the batch's range).

The cache holds only the instruction's tokens that a tokenizer never merges with what follows
(`stable_prefix`); an input that does not start with exactly them runs whole, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache

# Texts put after the instruction to find the tokens of it that stay put: a tokenizer may merge
# the instruction's last characters with a query's first (Qwen's splits ":how" as one piece).
_FOLLOWERS = ("a", "How", "1", "?", " x", "\u65e5\u672c", "\n", "(")


def stable_prefix(tokenize: Callable[[Sequence[str]], list[np.ndarray]], prompt: str) -> np.ndarray:
    """The leading tokens of `prompt` that every text after it leaves unchanged."""
    encoded = tokenize([prompt + text for text in _FOLLOWERS])
    first = encoded[0]
    length = min(len(ids) for ids in encoded) - 1  # at least the text's own last token differs
    for ids in encoded[1:]:
        differ = np.flatnonzero(ids[:length] != first[:length])
        if len(differ):
            length = int(differ[0])
    return first[: max(0, length)].copy()


@dataclass(frozen=True)
class PromptCache:
    """Per layer, the keys and values of `ids` ((1, kv heads, len(ids), head dim) each)."""

    ids: np.ndarray
    layers: tuple[tuple[torch.Tensor, torch.Tensor], ...]

    @classmethod
    def build(cls, model: torch.nn.Module, ids: np.ndarray) -> PromptCache | None:
        """The cache of `ids` on `model`, or None when there is nothing to keep."""
        if len(ids) == 0:
            return None
        with torch.inference_mode():
            out = model(input_ids=torch.from_numpy(ids)[None], use_cache=True)
        cache = out.past_key_values
        layers = tuple((layer.keys, layer.values) for layer in cache.layers)
        return cls(ids, layers)

    @staticmethod
    def starts(ids: np.ndarray, batch: Sequence[np.ndarray]) -> bool:
        """Whether every input of `batch` starts with `ids` and has more."""
        n = len(ids)
        return all(len(x) > n and np.array_equal(x[:n], ids) for x in batch)

    def last_states(
        self, model: torch.nn.Module, batch: Sequence[np.ndarray], pad_id: int
    ) -> torch.Tensor:
        """The last token's hidden state of each input of `batch` (each `starts` with the cached
        tokens, on the model the cache was made with), computed through the model for the
        tokens after the cached ones only.

        The rest of each input is padded on the right: positions then run on from the cached
        tokens with no gap, and the causal mask keeps the padding out of every real token.
        """
        n = len(self.ids)
        rests = [x[n:] for x in batch]
        longest = max(len(rest) for rest in rests)
        input_ids = torch.full((len(batch), longest), pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), n + longest), dtype=torch.long)
        mask[:, :n] = 1
        for row, rest in enumerate(rests):
            input_ids[row, : len(rest)] = torch.from_numpy(rest)
            mask[row, n : n + len(rest)] = 1
        rows = len(batch)
        device = self.layers[0][0].device
        input_ids, mask = input_ids.to(device), mask.to(device)
        past: Any = DynamicCache(
            ddp_cache_data=[
                (k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1)) for k, v in self.layers
            ]
        )
        hidden = model(
            input_ids=input_ids, attention_mask=mask, past_key_values=past, use_cache=True
        ).last_hidden_state
        last = torch.tensor([len(rest) - 1 for rest in rests], device=device)
        return hidden[torch.arange(rows, device=device), last]
