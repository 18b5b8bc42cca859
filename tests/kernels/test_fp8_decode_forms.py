"""kernels/triton/fp8_decode_forms.py: the one rule for which W8A16 decode forms the engine may time
and run per row count, and its environment override (what bench/fp8_kernels.py prints to try a
measured rule in a whole decode step). Plain Python: no Triton needed."""

from __future__ import annotations

import pytest

from bringup.kernels.triton import fp8_decode_forms as rule


@pytest.fixture(autouse=True)
def _no_override(monkeypatch):
    monkeypatch.delenv(rule.ENV, raising=False)


def test_each_row_count_takes_the_first_bound_that_covers_it(monkeypatch):
    monkeypatch.setattr(rule, "DENSE_FORMS", ((1, ("vec", "rows")), (4, ("rows", "mma")), (16, ("dot",))))
    assert rule.dense_forms(1) == ("vec", "rows")
    assert rule.dense_forms(3) == ("rows", "mma")
    assert rule.dense_forms(5) == ("dot",)


def test_a_form_is_never_offered_more_rows_than_it_takes(monkeypatch):
    monkeypatch.setattr(rule, "DENSE_FORMS", ((16, ("vec", "rows", "mma")),))
    assert rule.dense_forms(1) == ("vec", "rows", "mma")
    assert rule.dense_forms(8) == ("rows", "mma")  # vec: one row
    assert rule.dense_forms(9) == ("mma",)  # rows: up to VECTOR_ROWS_MAX
    monkeypatch.setattr(rule, "DENSE_FORMS", ((16, ("rows",)),))
    assert rule.dense_forms(12) == ("dot",)  # nothing left: the form that takes every row count


def test_the_environment_replaces_a_table_and_round_trips(monkeypatch):
    text = "dense=1:rows,vec/16:dot,mma;moe=4:mma"
    tables = rule.parse_tables(text)
    assert tables["dense"] == ((1, ("rows", "vec")), (16, ("dot", "mma")))
    assert rule.parse_tables(rule.format_table("dense", tables["dense"]))["dense"] == tables["dense"]
    monkeypatch.setenv(rule.ENV, text)
    assert rule.dense_forms(1) == ("rows", "vec") and rule.dense_forms(2) == ("dot", "mma")
    assert rule.moe_forms(3) == ("mma",)
    monkeypatch.setenv(rule.ENV, "moe=4:mma")  # one table given: the other stays the module's
    assert rule.table("dense") == rule.DENSE_FORMS


@pytest.mark.parametrize("text", ["dense=1:fast", "gemm=1:dot", "dense=x:dot", "dense=1:"])
def test_an_override_that_names_no_real_form_is_refused(text):
    with pytest.raises(ValueError, match=rule.ENV):
        rule.parse_tables(text)
