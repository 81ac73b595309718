"""EMBED_DTYPE=int8 on torch: int8 Linear layers that keep the accuracy bound, on CPU.

Dynamic int8 as torch.ao ships it quantises a layer's whole input with one scale, fitted to its
largest value: one-word inputs and the tokens that carry outsized activations lose most of their
resolution (MiniLM: lowest cosine to fp32 0.96, one- and two-word inputs 0.89). Three changes
bring it within 0.995 (bench/embed_throughput.py measures it; docs/guide/embedder.md has the
figures):

- **per-token scales**: each token's row is divided by its own largest magnitude before the
  int8 GEMM and multiplied back after, so the GEMM's one scale fits every row;
- **SmoothQuant scaling**: input channels that carry outliers are scaled down and the weights'
  matching columns up (s_j = max|x_j|^0.6 / max|w_j|^0.4, from a calibration pass in fp32 over
  fixed texts), which moves the difficulty from activations to weights, quantised per channel;
- **the FFN down projections get more than one 8-bit pass**: they read the activation
  function's long-tailed output, which cost the most (MiniLM, one- and two-word inputs: 0.9925
  with them in one int8 pass, 0.9985 in bf16). Where the CPU has VNNI but no AMX (AMD Zen 4,
  Intel Ice Lake) they run **two-pass**: what the GEMM's 8-bit grid loses of each input row is
  rescaled and run as more rows of the same GEMM, so the input is ~16-bit while the weights are
  read once (a one-token query reads every weight, memory-bound: 20 rows cost about what 41 do;
  0.8 ms against bf16's 1.6 ms per layer there, equal at 2,048 rows; MiniLM short inputs
  0.9980). With AMX they stay in bf16 (its tiles are faster still: 0.5 ms, and 15 against 124
  ms at 2,048 rows); without VNNI in fp32 (with the 7-bit weights there two-pass puts short
  inputs at 0.9945, under the bound, although native Zen 3 runs a query's 10 rows 2x faster).

Linear layers that read the same tensor (attention's query, key and value; the FFN's gate and
up projections) run as one GEMM with one quantisation of their input. The GEMM is
`quantized::linear_dynamic`: fbgemm's (VNNI where the CPU has it), or oneDNN's with AMX, whose
int8 tiles it uses (hardware.int8_gemm).
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

SMOOTH_ALPHA = 0.6  # MiniLM over Cranfield: 0.6 kept most (0.4 and 0.5 a little less)
# Two-pass inputs are near 16-bit: less of the difficulty moves to the weights (MiniLM short
# inputs: 0.9954 at 0, 0.9980 at 0.3, 0.9976 at 0.4-0.5)
TWO_PASS_ALPHA = 0.3
# FFN down projections: Qwen3 (and Llama-style) mlp.down_proj, BERT's layer.N.output.dense
FFN_DOWN = re.compile(r"(^|\.)down_proj$|(^|\.)layer\.\d+\.output\.dense$")
_EPS = 1e-5


@contextmanager
def _quiet() -> Iterator[None]:
    # torch's quantised-tensor API is deprecated in favour of torchao (one more dependency); the
    # fbgemm kernels it wraps are still the fast int8 path on x86. Only its notices are silenced.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@dataclass
class Calibration:
    """What a calibration pass saw: per Linear layer, the largest |input| per channel; the groups
    of Linear layers that read the same input tensor (in the order they ran); and, per group, the
    RMSNorm whose output that input is, if any."""

    maxima: dict[str, torch.Tensor]
    groups: list[list[str]]
    norms: dict[str, str]  # first member of a group -> the RMSNorm module producing its input


Batch = tuple[torch.Tensor, torch.Tensor]  # token ids and attention mask, (batch, seq) each


def calibrate(
    model: torch.nn.Module,
    batches: Sequence[Batch],
    forward: Callable[[torch.Tensor, torch.Tensor], object],
    workers: int = 1,
) -> Calibration:
    """Watch `model` while `forward` runs each batch, `workers` of them side by side (forward
    hooks, removed afterwards); the maxima leave padded positions out (no real token's)."""
    local = threading.local()  # the mask of the batch this thread runs, flattened
    lock = threading.Lock()
    maxima: dict[str, torch.Tensor] = {}
    readers: dict[int, list[str]] = {}
    produced: dict[int, str] = {}
    keep: list[torch.Tensor] = []  # tensors stay alive, so their ids are not reused
    hooks = []

    def linear_hook(name: str) -> Callable[..., None]:
        def record(module: torch.nn.Module, args: tuple[torch.Tensor, ...], output: Any) -> None:
            x = args[0]
            rows = x.detach().reshape(-1, x.shape[-1])
            if rows.shape[0] == local.mask.shape[0]:
                rows = rows[local.mask]
            peak = rows.abs().amax(0).float()
            with lock:
                maxima[name] = torch.maximum(maxima[name], peak) if name in maxima else peak
                group = readers.setdefault(id(x), [])
                if name not in group:
                    group.append(name)
                keep.append(x)

        return record

    def norm_hook(name: str) -> Callable[..., None]:
        def record(module: torch.nn.Module, args: Any, output: torch.Tensor) -> None:
            with lock:
                produced[id(output)] = name
                keep.append(output)

        return record

    def run(batch: Batch) -> None:
        local.mask = batch[1].reshape(-1).bool()
        forward(*batch)

    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            hooks.append(module.register_forward_hook(linear_hook(name)))
        elif type(module).__name__.endswith("RMSNorm"):
            hooks.append(module.register_forward_hook(norm_hook(name)))
    try:
        if workers > 1 and len(batches) > 1:
            with ThreadPoolExecutor(workers, thread_name_prefix="calibrate") as pool:
                list(pool.map(run, batches))
        else:
            for batch in batches:
                run(batch)
    finally:
        for handle in hooks:
            handle.remove()
    groups: list[list[str]] = []
    norms: dict[str, str] = {}
    seen: set[str] = set()
    for tensor_id, names in readers.items():
        fresh = [n for n in names if n not in seen]
        if fresh:
            groups.append(fresh)
            seen.update(fresh)
            if tensor_id in produced:
                norms[fresh[0]] = produced[tensor_id]
    return Calibration(maxima, groups, norms)


class _Group:
    """Linear layers reading one input, as one int8 GEMM with per-token activation scales."""

    def __init__(
        self,
        linears: Sequence[torch.nn.Linear],
        act_max: torch.Tensor,
        reduce_range: bool,
        norm: torch.nn.Module | None = None,
        two_pass: bool = False,
    ) -> None:
        weight = torch.cat([lin.weight.detach().float() for lin in linears])
        self.two_pass = two_pass
        alpha = TWO_PASS_ALPHA if two_pass else SMOOTH_ALPHA
        smooth = (
            act_max.clamp_min(_EPS) ** alpha / weight.abs().amax(0).clamp_min(_EPS) ** (1 - alpha)
        ).clamp_min(_EPS)
        weight = weight * smooth
        self.inverse: torch.Tensor | None = (1 / smooth).contiguous()
        if norm is not None:  # the input's RMSNorm scales by 1/s itself: one op fewer per pass
            scale: Any = norm.weight
            with torch.no_grad():
                scale.div_(smooth.to(scale.dtype))
            self.inverse = None
        # Per output channel, symmetric. 7 bits where the CPU lacks VNNI: its u8 x s8 pair sums
        # are 16-bit and full-range weights overflow them (as the ONNX export does).
        levels = 63 if reduce_range else 127
        scale = weight.abs().amax(1).clamp_min(1e-12) / levels
        with _quiet():
            qweight = torch.quantize_per_channel(
                weight, scale.double(), torch.zeros(len(scale), dtype=torch.long), 0, torch.qint8
            )
            self.packed = torch.ops.quantized.linear_prepack(qweight, None)
        biases = [lin.bias for lin in linears]
        self.bias = (
            None
            if all(b is None for b in biases)
            else torch.cat(
                [
                    b.detach().float() if b is not None else torch.zeros(lin.out_features)
                    for b, lin in zip(biases, linears, strict=True)
                ]
            )
        )
        self.sizes = [lin.out_features for lin in linears]
        self.nbytes = weight.numel() + 12 * len(scale)  # int8 weights, their scales and zeros
        self._last = threading.local()  # micro-batches run side by side in threads

    def __call__(self, x: torch.Tensor, index: int) -> torch.Tensor:
        last = self._last
        if getattr(last, "x", None) is not x:
            if self.inverse is not None:
                x_ = x * self.inverse
                rows = x_.abs().amax(-1, keepdim=True)  # 10x faster than vector_norm(inf)
                scaled = x_.div_(rows.clamp_min_(1e-12))
            else:
                rows = x.abs().amax(-1, keepdim=True)
                scaled = x / rows.clamp_min_(1e-12)
            # every row now spans [-1, 1]: the GEMM's one scale fits them all
            gemm = _two_pass if self.two_pass else _one_pass
            y = gemm(scaled, self.packed).mul_(rows)
            if self.bias is not None:
                y.add_(self.bias)
            last.x, last.outputs = x, y.split(self.sizes, dim=-1) if len(self.sizes) > 1 else [y]
        out: torch.Tensor = last.outputs[index]
        if index == len(self.sizes) - 1:
            last.x = last.outputs = None  # the group's last reader: free the input
        return out


def _one_pass(scaled: torch.Tensor, packed: Any) -> torch.Tensor:
    return torch.ops.quantized.linear_dynamic(scaled, packed, False)


# The GEMM quantises its input to u8 over the tensor's [min, max]: for [-1, 1], steps of 2/255
# from zero point 127 (torch's choice of parameters; a step of 2/254 leaves 150x the error).
_STEP = 2 / 255
_ZERO = 127


def _two_pass(scaled: torch.Tensor, packed: Any) -> torch.Tensor:
    """`scaled` (rows spanning [-1, 1]) times the int8 weights, its input ~16-bit: what the
    8-bit grid loses of each row, rescaled to [-1, 1], runs as more rows of the same GEMM."""
    flat = scaled.reshape(-1, scaled.shape[-1])
    rows = flat.shape[0]
    grid = torch.round(flat / _STEP).add_(_ZERO).clamp_(0, 255).sub_(_ZERO).mul_(_STEP)
    lost = flat - grid
    lost_max = lost.abs().amax(-1, keepdim=True).clamp_min_(1e-12)
    pin = flat.new_zeros(1, flat.shape[-1])  # holds the tensor's range at exactly [-1, 1]
    pin[0, :2] = torch.tensor([-1.0, 1.0])
    y = _one_pass(torch.cat([flat, lost.div_(lost_max), pin]), packed)
    out = y[:rows].addcmul_(y[rows : 2 * rows], lost_max)
    return out.reshape(*scaled.shape[:-1], out.shape[-1])


class KeptLinear(torch.nn.Module):
    """An FFN down projection int8 leaves in floating point, its weights in `dtype` (bf16 or
    fp32); it takes and returns the model's fp32."""

    def __init__(self, linear: torch.nn.Linear, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype
        self.weight = torch.nn.Parameter(linear.weight.detach().to(dtype), requires_grad=False)
        bias = linear.bias
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach().to(dtype), False)
        self.in_features = linear.in_features
        self.out_features = linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # .to: no copy where dtypes match
        return torch.nn.functional.linear(x.to(self.dtype), self.weight, self.bias).to(x.dtype)


class Int8Linear(torch.nn.Module):
    """One member of a `_Group`, in place of the Linear layer it quantised."""

    def __init__(self, group: _Group, index: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.group = group
        self.index = index
        self.in_features = in_features
        self.out_features = out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.group(x, self.index)


# Decoders whose RMSNorm outputs feed only the projections that read them (pre-norm): the
# smoothing can be folded into the norm's weight. Elsewhere (BERT's post-norm layers feed the
# residual too) the input is scaled at run time.
PRE_NORM = {"qwen3", "qwen2", "llama", "mistral"}


def quantize(
    model: torch.nn.Module,
    seen: Calibration,
    reduce_range: bool,
    workers: int = 1,
    down: torch.dtype | None = torch.float32,
    gemm: str = "fbgemm",
) -> torch.nn.Module:
    """`model` (fp32) with its Linear layers int8 as described above, in place, from what
    `calibrate` saw of it (`workers` groups packed side by side); the FFN down projections
    (FFN_DOWN) stay in `down` (bf16 or fp32), or run two-pass int8 where `down` is None
    (fbgemm's input grid: with `gemm` "fbgemm" only). `gemm`: the quantized engine whose
    kernels the packed weights run on (fbgemm, or onednn, which uses AMX's int8 tiles)."""
    if down is None and gemm != "fbgemm":
        raise ValueError("two-pass int8 needs fbgemm's GEMM")
    modules = dict(model.named_modules())
    if down is not None and down != torch.float32:
        for name, module in list(modules.items()):
            if isinstance(module, torch.nn.Linear) and FFN_DOWN.search(name):
                parent, _, child = name.rpartition(".")
                setattr(modules[parent] if parent else model, child, KeptLinear(module, down))
    fold = getattr(getattr(model, "config", None), "model_type", None) in PRE_NORM
    plans: list[tuple[list[str], list[torch.nn.Linear], torch.nn.Module | None]] = []
    for names in seen.groups:
        norm_name = seen.norms.get(names[0]) if fold else None
        quantised = [n for n in names if down is None or not FFN_DOWN.search(n)]
        if not quantised:
            continue
        if len(quantised) < len(names):  # a reader kept in fp32 needs the norm's output as is
            norm_name = None
        linears = [m for n in quantised if isinstance(m := modules[n], torch.nn.Linear)]
        plans.append((quantised, linears, modules[norm_name] if norm_name else None))

    def build(plan: tuple[list[str], list[torch.nn.Linear], torch.nn.Module | None]) -> _Group:
        names, linears, norm = plan
        two_pass = down is None and bool(FFN_DOWN.search(names[0]))
        return _Group(linears, seen.maxima[names[0]], reduce_range, norm, two_pass)

    # packing the weights for fbgemm takes most of the time: groups packed side by side
    # the engine is read when weights are packed; each pack then keeps its kernels
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = gemm
    try:
        with ThreadPoolExecutor(max(1, workers), thread_name_prefix="int8-pack") as pool:
            groups = list(pool.map(build, plans))
    finally:
        torch.backends.quantized.engine = before
    for (names, linears, _), group in zip(plans, groups, strict=True):
        for index, (name, lin) in enumerate(zip(names, linears, strict=True)):
            parent, _, child = name.rpartition(".")
            member = Int8Linear(group, index, lin.in_features, lin.out_features)
            setattr(modules[parent] if parent else model, child, member)
    return model


def packed_bytes(model: torch.nn.Module) -> int:
    """Bytes of the int8 weights `quantize` packed (they are no parameters of the model)."""
    groups = {id(m.group): m.group for m in model.modules() if isinstance(m, Int8Linear)}
    return sum(group.nbytes for group in groups.values())
