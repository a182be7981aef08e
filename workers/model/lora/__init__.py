"""LoRA adapters: loaded from PEFT checkpoints (``peft``), held by name (``AdapterSet``) and applied
per request inside one batched forward (``LoraBatch``). See ``adapter`` for the maths."""

from kvgate.workers.model.lora.adapter import LORA_MODULES, LoraAdapter, LoraPair
from kvgate.workers.model.lora.adapter_set import AdapterSet
from kvgate.workers.model.lora.batch import LayerLora, LoraBatch
from kvgate.workers.model.lora.library import AdapterLibrary
from kvgate.workers.model.lora.peft import load_peft_adapter

__all__ = [
    "LORA_MODULES",
    "AdapterLibrary",
    "AdapterSet",
    "LayerLora",
    "LoraAdapter",
    "LoraBatch",
    "LoraPair",
    "load_peft_adapter",
]
