"""The default model: a small random-weight checkpoint with Nemotron-3-Nano's exact layer pattern.

`make run` and `bringup serve` with no SOURCE must serve something real with no network. This
module builds, once, a NemotronH checkpoint with the same 52 blocks as NVIDIA-Nemotron-3-Nano-30B-A3B
(23 Mamba2, 23 MoE, 6 attention at [5, 12, 19, 26, 33, 42]) at a small width, with transformers' own
config and model classes, plus a byte-level BPE tokenizer trained here on a corpus the project
ships. The weights are random (seeded), so the text is noise, but every code path of the engine,
pools and server is the real one.

The folder is written to the user's cache atomically (built in a temporary folder, then renamed),
so a crash never leaves half a checkpoint behind, and it is reused afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Its name and where it lives belong to the model sources (the engine generates it, sources find it).
from bringup.core.sources.default_source import DEFAULT_CHECKPOINT_NAME, RECIPE_VERSION, is_complete, is_default
from bringup.core.sources.default_source import checkpoint_dir as _checkpoint_dir

# The pattern of NVIDIA-Nemotron-3-Nano-30B-A3B (M = Mamba2, E = MoE, * = attention).
NEMOTRON_3_NANO_PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"

SPECIAL_TOKENS = ("<|pad|>", "<|bos|>", "<|eos|>", "<|system|>", "<|user|>", "<|assistant|>")
# A plain role-tagged template; the model's random weights do not care, but the server's chat
# endpoint exercises the real apply_chat_template path.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@dataclass(frozen=True)
class DefaultModelSpec:
    """The widths of the generated checkpoint. The pattern is always Nemotron-3-Nano's."""

    hidden_size: int = 256
    vocab_size: int = 2048  # the tokenizer's target; the trainer may stop short on a small corpus
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 64
    mamba_num_heads: int = 8
    mamba_head_dim: int = 32
    n_groups: int = 2
    ssm_state_size: int = 32
    conv_kernel: int = 4
    chunk_size: int = 64
    n_routed_experts: int = 8
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 128
    moe_shared_expert_intermediate_size: int = 256
    max_position_embeddings: int = 8192
    # Wider than transformers' 0.02 so that the logits of a random model are spread out: greedy
    # choices are then far from ties and comparisons between implementations are meaningful.
    initializer_range: float = 0.05
    dtype: str = "float32"
    seed: int = 1234
    pattern: str = field(default=NEMOTRON_3_NANO_PATTERN)

    def key(self) -> str:
        """A short fingerprint of the recipe, part of the folder name for non-default specs."""
        blob = json.dumps({"recipe": RECIPE_VERSION, **asdict(self)}, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:10]


DEFAULT_SPEC = DefaultModelSpec()
# A much smaller variant for tests: same pattern, tiny widths, builds in about a second.
TINY_TEST_SPEC = DefaultModelSpec(
    hidden_size=64, vocab_size=512, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
    mamba_num_heads=4, mamba_head_dim=16, n_groups=1, ssm_state_size=16, chunk_size=32,
    n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
    moe_shared_expert_intermediate_size=64, max_position_embeddings=2048,
)


def checkpoint_dir(spec: DefaultModelSpec = DEFAULT_SPEC, root: Path | None = None) -> Path:
    return _checkpoint_dir(None if spec == DEFAULT_SPEC else spec.key(), root)


def ensure_default_checkpoint(spec: DefaultModelSpec = DEFAULT_SPEC, root: Path | None = None) -> Path:
    """The folder of the default checkpoint, building it first if the cache does not hold it."""
    final = checkpoint_dir(spec, root)
    if is_complete(final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        build_checkpoint(tmp, spec)
        try:
            os.rename(tmp, final)
        except OSError:
            # Another process finished first (the target exists and is not empty): use theirs.
            if not is_complete(final):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def corpus_text() -> str:
    from importlib import resources

    return resources.files("bringup.resources").joinpath("tokenizer_corpus.txt").read_text(encoding="utf-8")


def build_tokenizer(vocab_size: int):
    """A byte-level BPE trained on the shipped corpus, wrapped as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),  # ids 0, 1, 2 = pad, bos, eos, as in NemotronH configs
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus_text().splitlines(keepends=True), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<|pad|>", bos_token="<|bos|>", eos_token="<|eos|>",
        model_max_length=DEFAULT_SPEC.max_position_embeddings,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_config(spec: DefaultModelSpec, vocab_size: int):
    from transformers import NemotronHConfig

    return NemotronHConfig(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        hybrid_override_pattern=spec.pattern,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        head_dim=spec.head_dim,
        intermediate_size=spec.moe_intermediate_size,
        mamba_num_heads=spec.mamba_num_heads,
        mamba_head_dim=spec.mamba_head_dim,
        n_groups=spec.n_groups,
        ssm_state_size=spec.ssm_state_size,
        conv_kernel=spec.conv_kernel,
        chunk_size=spec.chunk_size,
        n_routed_experts=spec.n_routed_experts,
        num_experts_per_tok=spec.num_experts_per_tok,
        moe_intermediate_size=spec.moe_intermediate_size,
        moe_shared_expert_intermediate_size=spec.moe_shared_expert_intermediate_size,
        routed_scaling_factor=2.5,  # as Nemotron-3-Nano
        n_group=1,
        topk_group=1,
        max_position_embeddings=spec.max_position_embeddings,
        initializer_range=spec.initializer_range,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
        dtype=spec.dtype,
    )


def build_checkpoint(folder: Path, spec: DefaultModelSpec = DEFAULT_SPEC) -> None:
    """Write config, safetensors weights and tokenizer of `spec` into `folder` (deterministic)."""
    import torch
    from transformers import NemotronHForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a carriage-return bar is noise in the engine's log
    tokenizer = build_tokenizer(spec.vocab_size)
    config = build_config(spec, len(tokenizer))
    with torch.random.fork_rng(devices=[]):  # leave the caller's random state alone
        torch.manual_seed(spec.seed)
        model = NemotronHForCausalLM(config).to(getattr(torch, spec.dtype))
    model.generation_config.pad_token_id = 0
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    add_legacy_config_keys(folder / "config.json", spec.pattern)
    (folder / "bringup_default_model.json").write_text(
        json.dumps({"name": DEFAULT_CHECKPOINT_NAME, "recipe": RECIPE_VERSION, "spec": asdict(spec)}, indent=2) + "\n"
    )


def add_legacy_config_keys(config_path: Path, pattern: str) -> None:
    """Also write the keys the published Nemotron-3-Nano config uses, for readers that expect them.

    transformers 5 saves only `layers_block_type`; SGLang and older tools read
    `hybrid_override_pattern` and `num_hidden_layers`. transformers ignores both when
    `layers_block_type` is present, so the config still loads to the same model.
    """
    config = json.loads(config_path.read_text())
    config["hybrid_override_pattern"] = pattern
    config["num_hidden_layers"] = len(pattern)
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def resolve_default(source: str | None) -> str | None:
    """The checkpoint folder when `source` names the default model (built on first use), else None."""
    return str(ensure_default_checkpoint()) if is_default(source) else None
