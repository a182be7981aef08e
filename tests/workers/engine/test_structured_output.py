"""Constrained decoding in the engine, on the tiny random model and its byte-level tokenizer: every
output matches its JSON schema (greedy, sampled, and each fork of ``n``), the grammar ends the
sequence (the tiny model has no EOS), a grammar outranks ``min_tokens`` where only its end is left, a
schema that cannot compile is refused before anything runs, and no KV block leaks. Then SmolLM2 with
its own (GGUF) tokenizer answers a chat question in the schema's shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kvgate.common.models import DEFAULT_MODEL_ID
from kvgate.common.tokenizer import Tokenizer, tokenizer_from_hf_dir
from kvgate.proto.constraint import OutputConstraint
from kvgate.proto.layout import CacheLayout
from kvgate.proto.sampling import FinishReason, SamplingParams
from kvgate.workers.engine import GrammarCompiler, LLMEngine, run_to_completion
from kvgate.workers.model import DecoderModel
from tests.workers.engine.conftest import TinyPair
from tests.workers.engine.helpers import assert_no_leak, engine_for, random_ids, request
from tests.workers.service.tiny_model import write_byte_tokenizer

PROMPT = random_ids(9, seed=7)
PERSON = {
    "type": "object",
    "properties": {
        "mood": {"enum": ["calm", "busy", "away"]},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
    },
    "required": ["mood", "age", "tags"],
    "additionalProperties": False,
}
FLAG = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
        "additionalProperties": False}  # fmt: skip


@pytest.fixture(scope="module")
def byte_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    folder: Path = tmp_path_factory.mktemp("byte-tokenizer")
    write_byte_tokenizer(folder, 320)
    return tokenizer_from_hf_dir(folder)


@pytest.fixture
def engine(tiny: TinyPair, byte_tokenizer: Tokenizer) -> LLMEngine:
    return engine_for(tiny.ours, gpu_blocks=64, tokenizer=byte_tokenizer)


def constrained(schema: dict[str, Any], **fields: Any) -> SamplingParams:
    return SamplingParams(**({"temperature": 0, "max_tokens": 120} | fields),
                          constraint=OutputConstraint.json_schema(schema))  # fmt: skip


def parsed(tokenizer: Tokenizer, token_ids: tuple[int, ...] | list[int]) -> Any:
    return json.loads(tokenizer.decode(token_ids, skip_special_tokens=True))


@pytest.mark.parametrize("sampling", [{"temperature": 0}, {"temperature": 1.0, "seed": 3},
                                      {"temperature": 1.5, "top_p": 0.9, "seed": 11}], ids=str)  # fmt: skip
def test_the_output_validates_and_the_grammar_ends_it(
    engine: LLMEngine, byte_tokenizer: Tokenizer, sampling: dict[str, Any]
) -> None:
    done = run_to_completion(engine, [request("p", PROMPT, constrained(PERSON, **sampling))])["p"]
    jsonschema.validate(parsed(byte_tokenizer, done.token_ids), PERSON)
    assert done.finish_reason is FinishReason.STOP  # no EOS in this model: the grammar's end stops it
    assert_no_leak(engine)


def test_each_fork_follows_its_own_grammar_state(engine: LLMEngine, byte_tokenizer: Tokenizer) -> None:
    params = constrained(PERSON, temperature=1.2, seed=5, n=3)
    engine.add_request(request("n", PROMPT, params))
    tokens: dict[int, list[int]] = {0: [], 1: [], 2: []}
    finished = False
    while not finished:
        for out in engine.step():
            tokens[out.index] += out.new_token_ids
            finished = out.finished
    outputs = [parsed(byte_tokenizer, ids) for ids in tokens.values()]
    for output in outputs:
        jsonschema.validate(output, PERSON)
    assert len({json.dumps(o) for o in outputs}) > 1  # each fork sampled its own, valid, output
    assert_no_leak(engine)


def test_unconstrained_neighbours_in_the_batch_are_untouched(engine: LLMEngine, tiny: TinyPair) -> None:
    free = SamplingParams(temperature=0, max_tokens=10)
    alone = run_to_completion(engine_for(tiny.ours, gpu_blocks=64), [request("f", PROMPT, free)])["f"]
    both = run_to_completion(engine, [request("c", PROMPT, constrained(FLAG)), request("f", PROMPT, free)])
    assert both["f"].token_ids == alone.token_ids
    assert both["c"].finish_reason is FinishReason.STOP


def test_the_grammar_outranks_min_tokens_when_only_its_end_is_left(
    engine: LLMEngine, byte_tokenizer: Tokenizer
) -> None:
    # "}" ends the object and is a stop token blocked until 40 tokens: the grammar allows nothing else
    brace = int(byte_tokenizer.encode("}", add_special_tokens=False)[0])
    params = constrained(FLAG, min_tokens=40, stop_token_ids=(brace,))
    done = run_to_completion(engine, [request("m", PROMPT, params)])["m"]
    assert parsed(byte_tokenizer, done.token_ids) in ({"ok": True}, {"ok": False})
    assert done.finish_reason is FinishReason.STOP


def test_max_tokens_cuts_a_constrained_output_short(engine: LLMEngine) -> None:
    done = run_to_completion(engine, [request("l", PROMPT, constrained(PERSON, max_tokens=4))])["l"]
    assert done.finish_reason is FinishReason.LENGTH
    assert len(done.token_ids) == 4
    assert_no_leak(engine)


@pytest.mark.parametrize("schema", [{"type": "string", "pattern": "(?=x)"}, {"not": {"type": "null"}},
                                    {"type": "integer", "minimum": 3, "maximum": 1},
                                    {"$ref": "#"}], ids=str)  # fmt: skip  # the last: allows no output
def test_a_schema_that_cannot_compile_is_refused_before_it_runs(engine: LLMEngine, schema: dict) -> None:
    with pytest.raises(ValueError, match="cannot be compiled"):
        engine.add_request(request("bad", PROMPT, constrained(schema)))
    assert not engine.has_work()
    assert_no_leak(engine)


def test_without_a_tokenizer_constraints_are_refused(tiny: TinyPair) -> None:
    engine = engine_for(tiny.ours, gpu_blocks=64)
    with pytest.raises(ValueError, match="tokenizer"):
        engine.add_request(request("x", PROMPT, constrained(FLAG)))


def test_compiled_grammars_are_cached_and_bounded(byte_tokenizer: Tokenizer) -> None:
    compiler = GrammarCompiler(byte_tokenizer, 320, (), capacity=2)
    first = compiler.compile(OutputConstraint.json_schema(FLAG))
    assert compiler.compile(OutputConstraint.json_schema(FLAG)) is first
    compiler.compile(OutputConstraint.json_schema(PERSON))
    compiler.compile(OutputConstraint.any_json_object())
    assert len(compiler) == 2
    assert compiler.compile(OutputConstraint.json_schema(FLAG)) is not first  # evicted, compiled again


def test_smollm2_answers_in_the_schemas_shape(smollm2: DecoderModel, tokenizer: Tokenizer) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}  # fmt: skip
    cache = CacheLayout(DEFAULT_MODEL_ID, secret=b"t")
    engine = engine_for(smollm2, gpu_blocks=32, cache=cache, tokenizer=tokenizer)
    chat = [{"role": "user", "content": "Give me a JSON object with a person's name and age."}]
    prompt = tokenizer.encode(tokenizer.apply_chat_template(chat), add_special_tokens=False).tolist()
    done = run_to_completion(engine, [request("s", prompt, constrained(schema, max_tokens=60))])["s"]
    answer = json.loads(tokenizer.decode(done.token_ids))  # no special token: the brace ended it, not EOS
    jsonschema.validate(answer, schema)
    assert answer["name"]  # a real model fills it with a name
    assert done.finish_reason is FinishReason.STOP
    assert_no_leak(engine)


def test_preempted_constrained_sequences_keep_their_grammar_and_same_output(
    tiny: TinyPair, byte_tokenizer: Tokenizer
) -> None:
    small = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9999},
                                              "ok": {"type": "boolean"}},
             "required": ["n", "ok"], "additionalProperties": False}  # fmt: skip  # ~22 tokens
    prompts = [random_ids(n, seed=30 + n) for n in (10, 12, 14)]  # with the output: ~100 tokens, 26 blocks
    requests = [request(f"r{i}", p, constrained(small, max_tokens=40)) for i, p in enumerate(prompts)]
    roomy = run_to_completion(engine_for(tiny.ours, gpu_blocks=64, tokenizer=byte_tokenizer), requests)
    tight = engine_for(tiny.ours, gpu_blocks=12, tokenizer=byte_tokenizer)  # 48 slots for three sequences
    squeezed = run_to_completion(tight, requests)
    assert tight.counters().preemptions > 0
    for name, done in squeezed.items():
        assert done.finish_reason is FinishReason.STOP
        assert done.token_ids == roomy[name].token_ids  # recomputed, the grammar state carried over
        jsonschema.validate(parsed(byte_tokenizer, done.token_ids), small)
    assert_no_leak(tight)
