"""The model's tokenizer, chat template and streaming detokenizer; torch-free (the gateway uses it).

``load_tokenizer(path)`` builds a ``Tokenizer`` from a ``.gguf`` file (byte-level BPE rebuilt from its
metadata) or a Hugging Face directory (``tokenizer.json``); ``IncrementalDetokenizer`` streams text;
``SegmentedEncoder`` reuses the ids of pieces seen before (cut where the tokenizer provably cuts,
cached in a bounded ``SegmentCache``).
"""

from kvgate.common.tokenizer.chat_template import ChatTemplate, ChatTemplateError
from kvgate.common.tokenizer.detokenizer import IncrementalDetokenizer
from kvgate.common.tokenizer.gguf_metadata import read_gguf_metadata
from kvgate.common.tokenizer.loading import load_tokenizer, tokenizer_from_gguf, tokenizer_from_hf_dir
from kvgate.common.tokenizer.segment_cache import DEFAULT_CAPACITY_BYTES, SegmentCache
from kvgate.common.tokenizer.segmented import SegmentedEncoder
from kvgate.common.tokenizer.tokenizer import SpecialTokens, TokenIds, Tokenizer

__all__ = [
    "DEFAULT_CAPACITY_BYTES",
    "ChatTemplate",
    "ChatTemplateError",
    "IncrementalDetokenizer",
    "SegmentCache",
    "SegmentedEncoder",
    "SpecialTokens",
    "TokenIds",
    "Tokenizer",
    "load_tokenizer",
    "read_gguf_metadata",
    "tokenizer_from_gguf",
    "tokenizer_from_hf_dir",
]
