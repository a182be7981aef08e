"""``ChatTemplate`` renders as ``transformers`` does: sandboxed, trimmed blocks, its helper globals."""

from __future__ import annotations

import pytest

from kvgate.common.tokenizer import ChatTemplate, ChatTemplateError

HI = [{"role": "user", "content": "héllo 😀"}]


def test_blocks_are_trimmed_and_special_tokens_are_variables() -> None:
    # trim_blocks drops the newline after a block tag, lstrip_blocks the indentation before one
    source = (
        "{{ bos_token }}\n{% for m in messages %}\n"
        "  {% if m %}[{{ m.role }}] {{ m.content }}{% endif %}\n{% endfor %}"
    )
    assert ChatTemplate(source, {"bos_token": "<s>"}).render(HI) == "<s>\n[user] héllo 😀"


def test_generation_prompt_flag_and_extra_variables() -> None:
    source = "{{ tools | length }}{% if add_generation_prompt %}A:{% endif %}"
    template = ChatTemplate(source)
    assert template.render(HI, tools=[1, 2]) == "2A:"
    assert template.render(HI, add_generation_prompt=False, tools=[]) == "0"


def test_tojson_keeps_unicode_and_takes_arguments() -> None:
    template = ChatTemplate("{{ messages[0] | tojson }}|{{ messages[0] | tojson(indent=1, sort_keys=True) }}")
    compact, indented = template.render(HI).split("|")
    assert compact == '{"role": "user", "content": "héllo 😀"}'
    assert indented == '{\n "content": "héllo 😀",\n "role": "user"\n}'


def test_raise_exception_becomes_a_chat_template_error() -> None:
    template = ChatTemplate(
        "{% if messages[0].role != 'system' %}{{ raise_exception('system first') }}{% endif %}"
    )
    with pytest.raises(ChatTemplateError, match="system first"):
        template.render(HI)


def test_the_sandbox_forbids_mutation_and_private_attributes() -> None:
    with pytest.raises(ChatTemplateError):
        ChatTemplate("{{ messages.append(1) }}").render(HI)
    with pytest.raises(ChatTemplateError):
        ChatTemplate("{{ messages.__class__.__mro__[1].__subclasses__() }}").render(HI)


def test_loop_controls_strftime_and_generation_blocks() -> None:
    source = (
        "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}{{ m.content }}{% endfor %}"
        "{% generation %}<gen>{% endgeneration %}{{ strftime_now('%Y') | length }}"
    )
    assert ChatTemplate(source).render([*HI, {"role": "user", "content": "second"}]) == "héllo 😀<gen>4"


def test_invalid_source_is_rejected_at_construction() -> None:
    with pytest.raises(ChatTemplateError, match="invalid chat template"):
        ChatTemplate("{% for m in messages %}")
