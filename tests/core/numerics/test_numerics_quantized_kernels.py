"""check-kernels covers a GGUF model's quantized products (core/numerics/quantized_calls.py): each
layer's CPU form (Q8_0 widened or blockwise, the int4 product of Q4_0/Q4_1/Q4_K, Q6_K's bf16 copy,
the blocks' own product under BRINGUP_KERNELS=reference) in each phase, against the dequantising reference reading the file's
own blocks, with its form's tolerance; a wrong re-laid form is a KERNEL_WRONG finding. `bringup
compare` of a kept-blocks model names its scheme and tolerates the bf16 rounding of its products."""

from __future__ import annotations

import json

import pytest
from gguf_helpers import byte_level_vocab, tiny_llama, write_gguf
from kernel_check_helpers import engine_for

from bringup.cli import main
from bringup.core.numerics.check_kernels import result_findings
from bringup.core.numerics.kernels_child import check_engine
from bringup.core.numerics.quantized_calls import FORMS

pytest.importorskip("gguf")
pytestmark = pytest.mark.slow  # starts real engines


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Two tiny GGUF Llamas: Q4_0 attention, Q4_1 MLP and a tied Q8_0 embedding ("blocks"); Q8_0
    attention, Q4_K and Q6_K MLP and an own Q6_K head ("kquants", 256 columns for the K types)."""
    tokens, merges = byte_level_vocab()
    folder = tmp_path_factory.mktemp("quantized_check")
    tied = write_gguf(tiny_llama(len(tokens), tie_word_embeddings=True), folder / "tied.gguf", tokens, merges,
                      quant="blocks")
    kquants = write_gguf(tiny_llama(len(tokens), hidden_size=256, intermediate_size=256, num_hidden_layers=1,
                                    head_dim=64), folder / "kquants.gguf", tokens, merges, quant="kquants")
    return {"tied": tied, "kquants": kquants}


def _gguf_rows(engine) -> list[dict]:
    return [row for row in check_engine(engine) if row["name"].startswith("gguf_")]


# file -> the (op, ggml type, form) its check must show, in both phases
EXPECTED = {
    "tied": {("gguf_linear", "Q4_0", "int4"), ("gguf_linear", "Q4_1", "int4"), ("gguf_linear", "Q8_0", "widened"),
             ("gguf_embedding", "Q8_0", "widened")},
    "kquants": {("gguf_linear", "Q8_0", "blockwise"), ("gguf_linear", "Q4_K", "int4"), ("gguf_linear", "Q6_K", "bf16 copy"),
                ("gguf_embedding", "Q8_0", "blocks")},
}


@pytest.mark.parametrize("which", sorted(EXPECTED))
def test_every_quantized_form_is_checked_in_both_phases_within_its_tolerance(files, which):
    rows = _gguf_rows(engine_for(files[which], dtype="auto"))
    seen = {(row["name"], *row["variant"].split()[:1], " ".join(row["variant"].split()[1:-1]), row["phase"])
            for row in rows}
    assert seen == {(*kind, phase) for kind in EXPECTED[which] for phase in ("prefill", "decode")}
    for row in rows:
        form = " ".join(row["variant"].split()[1:-1])
        implementation, dtype, tol = FORMS[form]
        assert (row["implementation"], row["dtype"], row["tolerance"]) == (implementation, dtype, tol)
        assert row["ok"] and row["max_rel_err"] <= tol, row
        assert row["shape"][0] >= 1 and (row["phase"] != "decode" or row["shape"][0] == 1)
    assert not result_findings(rows, "cpu")


def test_under_reference_kernels_the_blocks_own_product_is_checked_at_float32(files, monkeypatch):
    monkeypatch.setenv("BRINGUP_KERNELS", "reference")  # no CPU forms: every layer multiplies its blocks
    rows = _gguf_rows(engine_for(files["kquants"], dtype="auto"))
    assert {row["variant"].split()[0] for row in rows} == {"Q8_0", "Q4_K", "Q6_K"}
    assert all(" blocks " in row["variant"] and row["implementation"] == "reference" and row["tolerance"] == 1e-4
               and row["ok"] for row in rows)


def test_a_wrong_re_laid_form_is_a_finding(files):
    """The reference reads the file's blocks, not the engine's re-laid forms: forms made wrong after
    loading (the Q4_1 layers' int4 scales, one block of the widened head's scales, which the tied
    embedding shares) fail their rows; the untouched Q4_0 layers pass."""
    engine = engine_for(files["tied"], dtype="auto")
    for m in engine.model.modules():
        if getattr(m, "ggml_type", None) == "Q4_1" and m.int4 is not None:
            m.int4[1][..., 0] *= 1.2  # the scales, 20 % off
    engine.model.lm_head.widened[1][0] *= -1  # the first block's scales, sign flipped
    rows = _gguf_rows(engine)
    wrong = {row["key"] for row in rows if not row["ok"]}
    assert {key.split(":")[1].rsplit(" ", 1)[0] for key in wrong} == {"Q4_1 int4", "Q8_0 widened"}
    assert len(wrong) == len([row for row in rows if "Q4_0" not in row["variant"]])
    findings = result_findings(rows, "cpu")
    assert len(findings) == len(wrong) and {f.code for f in findings} == {"KERNEL_WRONG"}
    assert any("gguf_linear (decode) [Q8_0 widened 320x64]" in f.explanation for f in findings)


def test_compare_of_kept_blocks_names_them_and_tolerates_their_bf16_products(files, capsys, no_orphans):
    # Kept blocks (--dtype auto on the CPU): float32 activations around bf16 products, against the file
    # dequantised to float32 with the reference kernels: bfloat16's tolerance, the scheme named.
    assert main(["compare", str(files["kquants"]), "--device", "cpu", "--json"]) == 0
    kept = json.loads(capsys.readouterr().out)
    assert kept["dtype"] == "float32" and kept["tolerance"] == 5e-2 and kept["first_divergent_layer"] is None
    assert kept["weights"] == "GGUF Q4_K, Q6_K, Q8_0 blocks, bfloat16 products"
    # (the bf16 rounding is there to see: beyond float32's 1e-3, within bfloat16's)
    assert all(1e-3 < layer["rel_err"] <= 5e-2 for layer in kept["layers"])
    from bringup.core.session_report import SessionRecord, render_html

    assert "cpu float32 (GGUF Q4_K, Q6_K, Q8_0 blocks, bfloat16 products) against" in render_html(
        SessionRecord(numerics={"compare": kept}))
    # Dequantised at load, the run is float32 throughout: float32's tolerance, no scheme named.
    assert main(["compare", str(files["kquants"]), "--device", "cpu", "--dtype", "float32", "--json"]) == 0
    dense = json.loads(capsys.readouterr().out)
    assert dense["tolerance"] == 1e-3 and "weights" not in dense
    assert all(layer["rel_err"] < 1e-5 for layer in dense["layers"])
