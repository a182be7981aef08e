"""Tool-call formats: how each model family writes its calls, and reading them back from its text."""

from kvgate.gateway.core.call_formats.format import CallFormat
from kvgate.gateway.core.call_formats.hermes import HERMES
from kvgate.gateway.core.call_formats.llama_json import LLAMA_JSON
from kvgate.gateway.core.call_formats.mistral import MISTRAL
from kvgate.gateway.core.call_formats.reading import CallReading
from kvgate.gateway.core.call_formats.scanner import FormatScanner
from kvgate.gateway.core.call_formats.served import FAMILY_FORMATS, marker_ids, served_formats

__all__ = [
    "FAMILY_FORMATS", "HERMES", "LLAMA_JSON", "MISTRAL", "CallFormat", "CallReading", "FormatScanner",
    "marker_ids", "served_formats",
]  # fmt: skip
