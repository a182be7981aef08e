"""``--help`` that shows every option's default: argparse's ``ArgumentDefaultsHelpFormatter``, minus
the noise (no "(default: None)", "(default: False)" or a repeatable option's "(default: [])",
nothing added to a help text that already says its default in words, such as "(default: one per
GPU, or 2 on CPU)")."""

from __future__ import annotations

import argparse


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: <value>)`` to an option's help unless the default is None, False, an
    empty list or suppressed, or the help already mentions a default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if not shows_default(action) or "default" in text.lower():
            return action.help
        return f"{text} (default: %(default)s)".lstrip()


def shows_default(action: argparse.Action) -> bool:
    """Whether ``action`` has a default worth showing (an option's, not None, False, an empty list
    (a repeatable option given no value) or suppressed)."""
    default = action.default
    quiet = default is None or default is False or default == [] or default == argparse.SUPPRESS
    return bool(action.option_strings) and not quiet and action.help != argparse.SUPPRESS


def show_bare_defaults(parser: argparse.ArgumentParser) -> None:
    """Gives an option without help text one that shows its default (argparse prints no help line,
    so no default either, for an option without help). Mutates ``parser``'s actions; call once,
    after its arguments are added."""
    for action in parser._actions:
        if action.help is None and shows_default(action):
            action.help = "(default: %(default)s)"
