"""The gateway's check of output constraints: a schema that compiles passes, one that does not is an
INVALID_REQUEST naming the field it came in, and verdicts are remembered (bounded) so an agent's
repeated schema is compiled once."""

from __future__ import annotations

import pytest

from kvgate.gateway.core import constraints
from kvgate.gateway.core.constraints import ConstraintChecker
from kvgate.gateway.errors import ErrorKind, GatewayError
from kvgate.proto.constraint import ConstraintKind, OutputConstraint

GOOD = OutputConstraint.json_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
BAD = OutputConstraint.json_schema({"type": "integer", "minimum": 3, "maximum": 1})


async def test_a_schema_that_compiles_passes_and_none_is_free_text() -> None:
    checker = ConstraintChecker()
    await checker.check(GOOD, "response_format")
    await checker.check(None, "response_format")
    await checker.check(OutputConstraint(ConstraintKind.LARK, 'start: "yes" | "no"'), "tools")


@pytest.mark.parametrize("param", ["response_format", "guided_json", "tools"])
async def test_a_schema_that_does_not_is_a_client_error_naming_its_field(param: str) -> None:
    with pytest.raises(GatewayError) as refused:
        await ConstraintChecker().check(BAD, param)
    assert refused.value.kind is ErrorKind.INVALID_REQUEST
    assert refused.value.param == param
    assert "Unsatisfiable schema: minimum (3) is greater than maximum (1)" in str(refused.value)


async def test_verdicts_are_remembered_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[OutputConstraint] = []
    real = constraints.grammar_error

    def counting(constraint: OutputConstraint) -> str | None:
        compiled.append(constraint)
        return real(constraint)

    monkeypatch.setattr(constraints, "grammar_error", counting)
    checker = ConstraintChecker(capacity=2)
    for _ in range(3):
        await checker.check(GOOD, "response_format")
        with pytest.raises(GatewayError):
            await checker.check(BAD, "response_format")
    assert compiled == [GOOD, BAD]  # each compiled once, its verdict (good or bad) remembered
    await checker.check(OutputConstraint.any_json_object(), "response_format")  # evicts GOOD, the oldest
    await checker.check(GOOD, "response_format")
    assert compiled == [GOOD, BAD, OutputConstraint.any_json_object(), GOOD]
