"""Loading PEFT LoRA folders: what fits the model loads, fused the way kvgate's modules are fused; what
kvgate would not apply faithfully is refused with a message that names it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from kvgate.workers.model.families import model_config
from kvgate.workers.model.lora import AdapterSet, LoraBatch, load_peft_adapter
from tests.workers.model.tiny import COMMON

CONFIG = model_config({**COMMON, "model_type": "llama"})  # hidden 64, 4 heads x 16, 2 KV heads, I 96
PREFIX = "base_model.model.model.layers"


def _adapter(folder: Path, tensors: dict[str, torch.Tensor], **config: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(
        json.dumps({"peft_type": "LORA", "r": 2, "lora_alpha": 4, **config})
    )
    save_file(tensors, folder / "adapter_model.safetensors")
    return folder


def _pair(module: str, rows: int, inputs: int = 64, layer: int = 0, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        f"{PREFIX}.{layer}.{module}.lora_A.weight": torch.randn(2, inputs, generator=g),
        f"{PREFIX}.{layer}.{module}.lora_B.weight": torch.randn(rows, 2, generator=g),
    }


def test_k_and_v_shards_fuse_into_qkv_rows_and_q_rows_stay_untouched(tmp_path: Path) -> None:
    folder = _adapter(
        tmp_path / "kv", {**_pair("self_attn.k_proj", 32), **_pair("self_attn.v_proj", 32, seed=1)}
    )
    adapter = load_peft_adapter(folder, "kv", CONFIG)
    pair = adapter.pair(0, "attn.qkv")
    assert pair is not None
    assert pair.scale == 2.0  # alpha / r
    assert pair.a.shape == (4, 64)
    assert pair.b.shape == (64 + 32 + 32, 4)
    x = torch.randn(3, 64)
    y = torch.zeros(3, 128)
    pair.add_to(x, y)
    assert torch.all(y[:, :64] == 0)  # q rows: the adapter does not train q
    tensors = {**_pair("self_attn.k_proj", 32), **_pair("self_attn.v_proj", 32, seed=1)}
    a_k, b_k = (
        tensors[f"{PREFIX}.0.self_attn.k_proj.lora_A.weight"],
        tensors[f"{PREFIX}.0.self_attn.k_proj.lora_B.weight"],
    )
    torch.testing.assert_close(y[:, 64:96], 2.0 * (x @ a_k.T) @ b_k.T)
    assert adapter.pair(1, "attn.qkv") is None
    assert adapter.pair(0, "attn.o") is None


def test_rslora_scales_by_the_square_root_of_the_rank(tmp_path: Path) -> None:
    folder = _adapter(tmp_path / "rs", _pair("self_attn.o_proj", 64), use_rslora=True)
    assert load_peft_adapter(folder, "rs", CONFIG).pair(0, "attn.o").scale == pytest.approx(4 / 2**0.5)


@pytest.mark.parametrize(
    ("config", "tensors", "message"),
    [
        ({"use_dora": True}, _pair("self_attn.o_proj", 64), "use_dora not supported"),
        ({"bias": "lora_only"}, _pair("self_attn.o_proj", 64), "bias not supported"),
        ({"modules_to_save": ["lm_head"]}, _pair("self_attn.o_proj", 64), "modules_to_save not supported"),
        ({"rank_pattern": {"o_proj": 4}}, _pair("self_attn.o_proj", 64), "rank_pattern not supported"),
        (
            {},
            {"base_model.model.lm_head.lora_A.weight": torch.zeros(2, 64)},
            "not a LoRA update of a decoder layer",
        ),
        ({}, _pair("self_attn.rotary_emb", 64), "targets a module kvgate cannot adapt"),
        ({}, _pair("self_attn.o_proj", 64, layer=7), "targets a module kvgate cannot adapt"),
        ({}, _pair("self_attn.o_proj", 64, inputs=32), "do not fit rank 2 and 64 inputs"),
        ({}, _pair("self_attn.q_proj", 63), "has 63 rows, expected 64"),
        ({}, {f"{PREFIX}.0.self_attn.o_proj.lora_A.weight": torch.zeros(2, 64)}, "lora_A or lora_B alone"),
    ],
)
def test_what_kvgate_would_not_apply_faithfully_is_refused(
    tmp_path: Path, config: dict, tensors: dict[str, torch.Tensor], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        load_peft_adapter(_adapter(tmp_path / "bad", tensors, **config), "bad", CONFIG)


def test_a_folder_without_the_adapter_files_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no adapter_config\.json"):
        load_peft_adapter(tmp_path, "missing", CONFIG)


def test_the_adapter_set_names_what_it_holds_and_refuses_duplicates(tmp_path: Path) -> None:
    adapter = load_peft_adapter(_adapter(tmp_path / "a", _pair("self_attn.o_proj", 64)), "a", CONFIG)
    assert AdapterSet([adapter]).names == ("a",)
    with pytest.raises(ValueError, match="given twice"):
        AdapterSet([adapter, adapter])
    with pytest.raises(ValueError, match=r"'b' is not loaded on this worker \(loaded: a\)"):
        AdapterSet([adapter]).get("b")


def test_a_batch_groups_rows_by_adapter_and_skips_the_base_rows(tmp_path: Path) -> None:
    a = load_peft_adapter(_adapter(tmp_path / "a", _pair("self_attn.o_proj", 64)), "a", CONFIG)
    b = load_peft_adapter(_adapter(tmp_path / "b", _pair("self_attn.o_proj", 64, seed=5)), "b", CONFIG)
    assert LoraBatch.build([(None, 3), (None, 1)], "cpu") is None
    whole = LoraBatch.build([(a, 2), (a, 3)], "cpu")
    assert whole is not None
    assert whole.groups[0].rows is None  # one adapter on every row: no gather
    batch = LoraBatch.build([(a, 2), (None, 1), (b, 1), (a, 1)], "cpu")
    assert batch is not None
    assert {g.adapter.name: g.rows.tolist() for g in batch.groups} == {"a": [0, 1, 4], "b": [3]}
    x, y = torch.randn(5, 64), torch.zeros(5, 64)
    batch.at(0).add("attn.o", x, y)
    assert torch.all(y[2] == 0)  # the base model's row
    expected = torch.zeros(1, 64)
    b.pair(0, "attn.o").add_to(x[3:4], expected)
    torch.testing.assert_close(y[3:4], expected)
