"""README.md's "Command line" synopsis names every command and option the CLI has."""

from __future__ import annotations

import re
from pathlib import Path

import click

from orthobench.cli import cli

README = Path(__file__).resolve().parents[2] / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def _commands(group: click.Group, prefix: str = ""):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


def _unnamed(params, text: str) -> list[str]:
    """The options of ``params`` of which no spelling (``-o`` or ``--output``) is in ``text``."""
    return [
        max(param.opts, key=len)
        for param in params
        if param.opts
        and param.opts[0].startswith("-")
        and not any(re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", text) for opt in param.opts)
    ]


def test_synopsis_names_every_command_and_long_option():
    synopsis = _section("Command line")
    missing = []
    for path, command in _commands(cli):
        if not re.search(
            rf"orthobench {re.escape(path)}\b|\| {re.escape(path.split()[-1])}\b", synopsis
        ):
            missing.append(path)
        missing += [f"{path} {opt}" for opt in _unnamed(command.params, synopsis)]
    missing += _unnamed(cli.params, synopsis)
    assert not missing, f"README 'Command line' does not name: {missing}"
