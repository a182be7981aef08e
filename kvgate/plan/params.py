"""How many parameters a decoder has, counted from its :class:`ModelConfig` alone (no weights read).

Per layer: the attention projections (q and o: ``num_heads x head_dim``, k and v: ``num_kv_heads x
head_dim``, each times ``hidden_size``, plus their biases where the family has them), the feed-forward
(SwiGLU/GeGLU: gate, up, down = ``3 x hidden x intermediate``; MoE: that per expert, plus the router),
and the RMSNorm weights (2 per layer, 4 with sandwich norms, plus q/k head norms). Around them: the
embeddings, the final norm, and the output head unless it is tied to the embeddings. This is what
``load_model`` allocates, so weights in memory are this count x the compute dtype's bytes, whatever the
file's quantisation (GGUF weights are dequantised on load).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the workers' package imports torch: not at the CLI's start
    from kvgate.workers.model.config import ModelConfig


def parameter_count(config: ModelConfig) -> int:
    """Every weight and bias of the model ``config`` describes. Pure."""
    c = config
    embeddings = c.vocab_size * c.hidden_size
    head = 0 if c.tie_word_embeddings else embeddings
    return embeddings + head + c.hidden_size + c.num_layers * layer_parameters(c)


def layer_parameters(config: ModelConfig) -> int:
    """One decoder layer's weights and biases. Pure."""
    return _attention(config) + _feed_forward(config) + _norms(config)


def _attention(c: ModelConfig) -> int:
    q = c.num_heads * c.head_dim
    kv = c.num_kv_heads * c.head_dim
    weights = 2 * c.hidden_size * q + 2 * c.hidden_size * kv  # q, o; k, v
    biases = (q + 2 * kv if c.qkv_bias else 0) + (c.hidden_size if c.o_bias else 0)
    return weights + biases


def _feed_forward(c: ModelConfig) -> int:
    if c.moe is not None:
        expert = 3 * c.hidden_size * c.moe.intermediate_size
        return c.moe.num_experts * expert + c.hidden_size * c.moe.num_experts  # experts + router
    biases = 2 * c.intermediate_size + c.hidden_size if c.mlp_bias else 0
    return 3 * c.hidden_size * c.intermediate_size + biases


def _norms(c: ModelConfig) -> int:
    hidden_norms = (4 if c.sandwich_norms else 2) * c.hidden_size
    return hidden_norms + (2 * c.head_dim if c.qk_norm else 0)
