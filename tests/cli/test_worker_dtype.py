"""``--dtype``: the workers' weights and KV cache, ``auto`` by default (bfloat16 on a GPU, float32 on a
CPU), an explicit choice on either, and a clear refusal of anything else; ``--gemm`` likewise."""

from __future__ import annotations

import pytest

from kvgate.cli.cluster_args import settings_from
from kvgate.cli.main import build_parser
from kvgate.cluster.settings import ClusterSettings
from kvgate.cluster.worker_specs import engine_config


def _settings(*flags: str) -> ClusterSettings:
    args = build_parser().parse_args(["up", *flags])
    return settings_from(args, local=True)


@pytest.mark.parametrize(("flags", "gpu", "dtype", "kernels"), [
    ((), False, "float32", "sdpa"),
    ((), True, "bfloat16", "triton"),
    (("--dtype", "bfloat16"), False, "bfloat16", "sdpa"),
    (("--dtype", "float32"), True, "float32", "triton"),
    (("--dtype", "float16"), False, "float16", "sdpa"),
])  # fmt: skip
def test_the_dtype_reaches_the_engine(flags: tuple[str, ...], gpu: bool, dtype: str, kernels: str) -> None:
    config = engine_config(_settings(*flags), gpu)
    assert (config.dtype, config.kernel_backend) == (dtype, kernels)


def test_an_unknown_dtype_is_refused_naming_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["up", "--dtype", "int4"])
    assert "--dtype: invalid choice: 'int4'" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "gemm"), [((), "auto"), (("--gemm", "linear"), "linear")])
def test_the_gemm_form_reaches_the_engine(flags: tuple[str, ...], gemm: str) -> None:
    """``--gemm``: how decode-sized products run (``auto``: measured at load), on CPU and GPU alike."""
    for gpu in (False, True):
        assert engine_config(_settings(*flags), gpu).gemm == gemm


def test_an_unknown_gemm_form_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["up", "--gemm", "fastest"])
    assert "--gemm: invalid choice: 'fastest'" in capsys.readouterr().err
