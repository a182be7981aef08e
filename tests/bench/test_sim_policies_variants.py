"""The variant traces ``bench/sim_policies.py`` runs beside the shapes' defaults: each is its shape
written with its own options, reusing less (``pastes_sparse``) or more (``pastes_loyal``) than the
default pastes trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.sim_policies import VARIANTS, _trace
from tests.bench.scripts import reused_tokens


def _reusable(path: str) -> float:
    """The share of the trace's prompt tokens an unlimited cache reuses."""
    records = [json.loads(line) for line in Path(path).read_text().splitlines()]
    return sum(reused_tokens(records)) / sum(r["input_length"] for r in records)


def test_sparse_and_loyal_variants_reuse_less_and_more_than_the_default(tmp_path: Path) -> None:
    default = _reusable(_trace("pastes", 0, tmp_path))
    assert _reusable(_trace("pastes_sparse", 0, tmp_path)) < default - 0.05
    assert _reusable(_trace("pastes_loyal", 0, tmp_path)) > default + 0.05


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_variant_is_its_shape_with_its_options(tmp_path: Path, name: str) -> None:
    shape, _options = VARIANTS[name]
    variant = Path(_trace(name, 0, tmp_path)).read_text()
    assert variant != Path(_trace(shape, 0, tmp_path)).read_text()
    assert variant == Path(_trace(name, 0, tmp_path / "again")).read_text()  # a seed fixes the file
