"""A GGUF file's quantized matrices kept as llama.cpp's blocks in the engine.

With `--dtype auto` the linear layers (and the embedding, and a lm_head tied to it) whose tensors
are Q8_0, Q4_0, Q4_1, Q5_0, Q4_K or Q6_K hold the file's bytes as they are (`weight`: uint8 rows of
blocks, loaded under the tensor's own name), and multiply through kernels/reference/gguf_blocks.py
(a slab of rows dequantised per product). On the CPU, `prepare_for_cpu` re-lays the 4-bit types
once into torch's int4 layout (kernels/cpu/gguf_int4.py, the same half byte a weight), the fastest
product torch has for them, with bf16 activations; a Q8_0 output projection (and the embedding
tied to it) is widened once to bf16 codes and float32 scales (kernels/cpu/gguf_q8_widened.py); a
Q6_K or Q5_0 layer, which torch has no product for, gets a bf16 copy (kernels/cpu/gguf_bf16_copy.py).
So memory is the quantized model's: the float32 copy of every weight that dequantising at load
made (and its packed oneDNN twin) is gone. An explicit --dtype dequantises at load, as before.
"""

from __future__ import annotations

import torch
from torch import nn

from bringup.kernels.reference.gguf_blocks import BLOCKS, gguf_embedding, gguf_linear, row_bytes

KEPT_TYPES = frozenset(BLOCKS)
BF16_COPY_TYPES = ("Q6_K", "Q5_0")  # no torch product reads their codes (6 bits; 5 bits)
# form (GgufLinear.form) -> (the product it runs, the dtype of that product's arithmetic): what
# /server_info says runs and what check-kernels names and tolerates (core/numerics/quantized_calls.py).
FORM_PRODUCTS = {
    "widened": ("cpu: widened Q8_0", "bfloat16"),
    "int4": ("cpu: int4 product", "bfloat16"),
    "blockwise": ("cpu: blockwise Q8_0", "bfloat16"),
    "bf16 copy": ("cpu: bf16 copy", "bfloat16"),
    "blocks": ("reference", "float32"),
}
# The activations' dtype of a model whose blocks are kept. float32: with the whole model in bf16,
# SmolLM2-135M Q4_1 answered "What is the capital of France?" with noise where float32 says Paris
# (the walk in tests/app/test_gui_walk.py); the int4 product still runs bf16 inside (kernels/cpu/gguf_int4.py).
ACTIVATION_DTYPE = torch.float32


class GgufLinear(nn.Module):
    def __init__(self, in_features: int, out_features: int, ggml_type: str, bias: bool = False):
        super().__init__()
        self.in_features, self.out_features, self.ggml_type = in_features, out_features, ggml_type
        self.weight = nn.Parameter(torch.empty(out_features, row_bytes(ggml_type, in_features), dtype=torch.uint8),
                                   requires_grad=False)
        self.bias = nn.Parameter(torch.empty(out_features), requires_grad=False) if bias else None
        self.int4 = None  # (packed codes, scales and zeros) once prepare_for_cpu re-laid a 4-bit type
        self.cpu_q8 = False  # Q8_0 through the CPU's blockwise product (prepare_for_cpu)
        self.widened = None  # (bf16 codes, float32 scales) of a Q8_0 output projection (prepare_for_cpu)
        self.dense = None  # a Q6_K or Q5_0 layer's bf16 copy of its weight (prepare_for_cpu says why)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.widened is not None:
            from bringup.kernels.cpu.gguf_q8_widened import widened_linear

            return widened_linear(x, *self.widened, self.bias)
        if self.dense is not None:
            from bringup.kernels.cpu.gguf_bf16_copy import bf16_copy_linear

            return bf16_copy_linear(x, self.dense, self.bias)
        if self.int4 is not None:
            from bringup.kernels.cpu.gguf_int4 import int4_linear

            return int4_linear(x, *self.int4, self.in_features, self.bias)
        if self.cpu_q8:
            from bringup.kernels.cpu.gguf_q8 import q8_0_linear

            return q8_0_linear(x, self.weight, self.in_features, self.bias)
        return gguf_linear(x, self.weight, self.ggml_type, self.in_features, self.bias)

    @property
    def form(self) -> str:
        """The product this layer runs (check-kernels names and tolerates it by this): "widened",
        "bf16 copy", "int4", "blockwise" (Q8_0 widened per call) or "blocks" (the reference)."""
        if self.widened is not None:
            return "widened"
        if self.dense is not None:
            return "bf16 copy"
        if self.int4 is not None:
            return "int4"
        return "blockwise" if self.cpu_q8 else "blocks"

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, {self.ggml_type} blocks"


class GgufEmbedding(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, ggml_type: str, dtype: torch.dtype):
        super().__init__()
        self.num_embeddings, self.embedding_dim, self.ggml_type, self.out_dtype = (num_embeddings, embedding_dim,
                                                                                  ggml_type, dtype)
        self.weight = nn.Parameter(torch.empty(num_embeddings, row_bytes(ggml_type, embedding_dim), dtype=torch.uint8),
                                   requires_grad=False)
        self.widened = None  # the tied output projection's widened Q8_0 form, read in place of the blocks

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.widened is not None:
            from bringup.kernels.cpu.gguf_q8_widened import widened_rows

            return widened_rows(ids, *self.widened, self.out_dtype)
        return gguf_embedding(ids, self.weight, self.ggml_type, self.embedding_dim, self.out_dtype)

    @property
    def form(self) -> str:
        return "widened" if self.widened is not None else "blocks"


def keep_gguf_blocks(model: nn.Module, quant, running) -> None:
    """Swap the modules whose GGUF tensor is a kept block type for their block-holding forms (on
    the meta device). A lm_head tied to a kept embedding becomes a GgufLinear sharing its bytes."""
    dtype = model.dtype
    replaced, dequantised = [], set()
    for name, module in list(model.named_modules()):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            scheme = quant.scheme_for(name)
            if scheme.weight_dtype not in KEPT_TYPES:
                if scheme.quantized:  # a type with no product here (Q5_0...): read dequantised, as float32
                    dequantised.add(scheme.weight_dtype)
                continue
            if isinstance(module, nn.Embedding):
                new = GgufEmbedding(module.num_embeddings, module.embedding_dim, scheme.weight_dtype, dtype)
            else:
                new = GgufLinear(module.in_features, module.out_features, scheme.weight_dtype, module.bias is not None)
            replaced.append((name, new))
    for name, new in replaced:
        parent, _, leaf = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, leaf, new)
    embed = model.input_embedding
    if getattr(model, "tied", False) and isinstance(embed, GgufEmbedding):
        model.lm_head = GgufLinear(embed.embedding_dim, embed.num_embeddings, embed.ggml_type)
        model.tie_weights()
    types = {m.ggml_type for m in model.modules() if isinstance(m, (GgufLinear, GgufEmbedding))}
    running.quantized_linears = sum(isinstance(m, GgufLinear) for m in model.modules())
    running.dense_linears = sum(type(m) is nn.Linear for m in model.modules())
    if types:
        running.label = blocks_label(types) + (
            f"; {', '.join(sorted(dequantised))} dequantised to {str(dtype).removeprefix('torch.')}" if dequantised else "")
    running.kernels = {"gguf_linear": "reference"}


def blocks_label(ggml_types) -> str:
    """e.g. "GGUF Q4_1, Q8_0 blocks"."""
    return f"GGUF {', '.join(sorted(set(ggml_types)))} blocks"


def emptied(weight: torch.Tensor) -> nn.Parameter:
    """A [rows, 0] stand-in for blocks that live elsewhere now, on a storage of its own: a slice
    `w[:, :0]` (even `.contiguous()`, which returns an empty view as it is) keeps all the blocks alive."""
    return nn.Parameter(torch.empty((weight.shape[0], 0), dtype=weight.dtype), requires_grad=False)


def prepare_for_cpu(model: nn.Module) -> int:
    """Give each GGUF layer its CPU form (the int4 layout of the 4-bit types, Q8_0's blockwise
    product, a Q8_0 output projection widened, a Q6_K or Q5_0 layer's bf16 copy); returns how many got one."""
    from bringup.kernels.cpu.gguf_bf16_copy import bf16_copy
    from bringup.kernels.cpu.gguf_int4 import INT4_TYPES, pack_int4

    from bringup.kernels.dispatch import kernel_choice

    from .heap import trim_heap

    if kernel_choice() == "reference":  # BRINGUP_KERNELS=reference: the blocks' own product everywhere
        return 0
    done = 0
    head = getattr(model, "lm_head", None)
    if isinstance(head, GgufLinear) and head.ggml_type == "Q8_0" and head.weight.device.type == "cpu":
        done += _widen_head(model, head)
    shared = {id(e.weight) for e in model.modules() if isinstance(e, GgufEmbedding)}
    for m in model.modules():
        if not isinstance(m, GgufLinear) or m.widened is not None:
            continue
        if m.ggml_type in BF16_COPY_TYPES:
            # torch has no product for their blocks: dequantising Q6_K's per product cost 150 times
            # the int4 product (kernels/cpu/gguf_bf16_copy.py). A tied embedding keeps reading the blocks.
            m.dense = bf16_copy(m.weight.data, m.ggml_type, m.in_features)
        elif m.ggml_type == "Q8_0" and m.weight.device.type == "cpu":
            m.cpu_q8 = True
        elif m.ggml_type in INT4_TYPES and m.int4 is None and m.in_features % 32 == 0:
            m.int4 = pack_int4(m.weight.data, m.ggml_type, m.in_features)
        else:
            continue
        if (m.dense is not None or m.int4 is not None) and id(m.weight) not in shared:
            m.weight = emptied(m.weight)  # the weight lives in its CPU form now: no second copy
        # The re-layout's temporaries (int32 codes, float32 scales: 8x a 4-bit layer) freed between
        # the layers' new forms stay with glibc: kept, they were SmolLM2's peak (+330 MiB).
        trim_heap()
        done += 1
    running = getattr(model, "weight_scheme", None)
    if running is not None and done:
        running.kernels = {"gguf_linear": forms_running(model), "lm_head": _head_form(head)}
        arithmetic = products_dtype(model)
        running.products_dtype = arithmetic if arithmetic != str(ACTIVATION_DTYPE).removeprefix("torch.") else ""
    return done


def forms_running(model: nn.Module) -> str:
    """The products the GGUF linears run, each with the types and number of layers it takes, e.g.
    "cpu: int4 product (Q4_1 x210); cpu: widened Q8_0 (Q8_0 x1)"."""
    from collections import Counter

    counts = Counter((m.form, m.ggml_type) for m in model.modules() if isinstance(m, GgufLinear))
    by_form: dict[str, list[str]] = {}
    for (form, ggml_type), n in sorted(counts.items()):
        by_form.setdefault(form, []).append(f"{ggml_type} x{n}")
    return "; ".join(f"{FORM_PRODUCTS[form][0]} ({', '.join(types)})" for form, types in by_form.items())


def products_dtype(model: nn.Module) -> str | None:
    """The least precise arithmetic a GGUF layer of `model` runs in ("bfloat16": a bf16 form, the
    activations float32 otherwise), or None for a model with no GGUF layers."""
    found = {FORM_PRODUCTS[m.form][1] for m in model.modules() if isinstance(m, (GgufLinear, GgufEmbedding))}
    return "bfloat16" if "bfloat16" in found else ("float32" if found else None)


def _widen_head(model: nn.Module, head: GgufLinear) -> int:
    """A Q8_0 output projection widened once (2 bytes a weight, read whole every step faster than
    the blocks widened per call); a tied embedding reads its rows from the same tensors, so the
    shared blocks go (SmolLM2: 58 MiB where a float32 copy and the blocks held 137)."""
    from bringup.kernels.cpu.gguf_q8_widened import widen_q8_0

    head.widened = widen_q8_0(head.weight.data, head.in_features)
    stand_in = emptied(head.weight)
    for m in model.modules():
        if isinstance(m, GgufEmbedding) and m.weight is head.weight:
            m.widened, m.weight = head.widened, stand_in
    head.weight = stand_in
    return 1


def _head_form(head) -> str:
    if not isinstance(head, GgufLinear):
        return "as its weight"
    if head.widened is not None:
        return "Q8_0 widened (bf16 codes, float32 scales)"
    return f"bf16 copy ({head.ggml_type})" if head.dense is not None else "as its blocks"


def release_load_memory() -> None:
    """Once a GGUF file's weights are in the model: drop any parsed reader still cached (the weights'
    own went as they were read: gguf_file.iter_gguf_weights; the tokenizer parses the file itself)
    and hand the heap the load freed back to the system (glibc keeps it otherwise)."""
    import gc

    from bringup.core.sources.gguf_file import forget_readers

    from .heap import trim_heap

    forget_readers()
    gc.collect()
    trim_heap()


def cpu_copies_bytes(model: nn.Module) -> int:
    """Bytes prepare_for_cpu added beyond the file's blocks: the Q6_K / Q5_0 layers' bf16 copies and a
    widened Q8_0 output projection, less the blocks each freed (the int4 layout is the blocks' size)."""
    total = 0
    for m in model.modules():
        if not isinstance(m, GgufLinear):
            continue
        held = [m.dense] if m.dense is not None else list(m.widened or ())
        if not held:
            continue
        total += sum(t.numel() * t.element_size() for t in held)
        if m.weight.numel() == 0:  # its blocks went
            total -= m.out_features * row_bytes(m.ggml_type, m.in_features)
    return total


def copies_held(model: nn.Module) -> str:
    """The layers cpu_copies_bytes counts, by form: "1 widened" (a Q8_0 head), "2 bf16 copy" (Q6_K, Q5_0)."""
    from collections import Counter

    forms = Counter(m.form for m in model.modules()
                    if isinstance(m, GgufLinear) and (m.dense is not None or m.widened is not None))
    return ", ".join(f"{n} {form}" for form, n in sorted(forms.items()))


def kept_block_names(model: nn.Module) -> set[str]:
    """Parameter names that take a GGUF tensor's bytes as they are."""
    return {n for n, p in model.named_parameters() if p.dtype == torch.uint8}
