"""The satind command lines of a deployment recipe (configs/), checked with satind's own
parser: a recipe whose command would fail at its first run fails here instead."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

from satind.cli import parser

CONFIGS = Path(__file__).parent.parent.parent / "configs"
# Shell words that end one command and start the next.
# `2>&1` and the like, taken out before the words are split (its & is no operator).
DUPLICATION = re.compile(r"\d*[<>]&\d+")
REDIRECTION = re.compile(r"^(\d*|&)(>>|>|<)&?")
# Words before a command that run it: `exec satind`, `srun -N2 satind`, `until satind ...`.
WRAPPERS = {"exec", "env", "srun", "if", "until", "while", "time", "command", "nohup"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*=")
OPERATORS = {";", "&", "&&", "|", "||", "(", ")", "{", "}", "!", "then", "do", "else"}


def shell_commands(text: str) -> list[list[str]]:
    """The simple commands of a piece of shell, as words (quotes removed, variables left as
    they are written, comments dropped, line continuations joined); the script that a
    command hands to ``sh -c`` or ``bash -c`` gives its own commands too."""
    text = DUPLICATION.sub(" ", text.replace("\\\n", " "))
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()\n")
    lexer.whitespace_split = True
    lexer.whitespace = " \t\r"  # a newline ends a command: it is punctuation here
    commands: list[list[str]] = [[]]
    target = False  # the next word is a redirection's target
    for word in lexer:
        if target:
            target = False
        elif word in OPERATORS or set(word) <= set(";&|()\n"):
            commands.append([])
        elif redirection := REDIRECTION.match(word):
            target = redirection.end() == len(word)  # `> FILE`, not `>FILE`
        else:
            commands[-1].append(word)
    out = []
    for words in filter(None, commands):
        out.append(words)
        for i, word in enumerate(words[:-2]):
            if word in ("sh", "bash") and words[i + 1] == "-c":
                out += shell_commands(words[i + 2])
                break
    return out


def satind_commands(text: str) -> list[list[str]]:
    """Each satind command in a piece of shell: the words after the word `satind` (or a path
    to it) where it is the command run, perhaps through a wrapper (exec, srun and its
    options, if, until, VAR=value ...); not where it is an argument (`pip install satind`)."""
    out = []
    for words in shell_commands(text):
        for i, word in enumerate(words):
            if word == "satind" or word.endswith("/satind"):
                out.append(words[i + 1 :])
                break
            if not (word in WRAPPERS or word.startswith("-") or ASSIGNMENT.match(word)):
                break
    return out


def expand(argv: list[str], env: Mapping[str, str]) -> list[str]:
    """``$NAME``, ``${NAME}`` and ``${NAME:-default}`` in each word, from ``env`` (a name it
    lacks: its default, else an error — a recipe's variable the test forgot)."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name in env:
            return env[name]
        if match.group(3) is not None:
            return match.group(3)
        raise KeyError(f"${name} in {argv}")

    pattern = re.compile(
        r"\$(?:([A-Za-z_][A-Za-z_0-9]*|\d)|\{([A-Za-z_][A-Za-z_0-9]*)(?::-([^}]*))?\})"
    )
    return [pattern.sub(value, word) for word in argv]


def option_names(command: str | None) -> set[str]:
    """Every option string of the top level and of ``command``."""
    top, commands = parser.build()
    names = {s for a in top._actions for s in a.option_strings}
    if command is not None:
        names |= {s for a in commands[command]._actions for s in a.option_strings}
    return names


def check(argv: list[str]) -> argparse.Namespace:
    """``satind ARGV`` as satind reads it; every option named in full (argparse would take an
    abbreviation, which a later option could make ambiguous).

    Raises:
        AssertionError: the parser refuses it, or an option is not named exactly.
    """
    try:
        args = parser.parse(argv)
    except SystemExit as exc:
        raise AssertionError(f"satind refuses {shlex.join(argv)} (exit {exc.code})") from None
    assert args.command is not None, f"no command in {argv}"
    known = option_names(args.command)
    for word in argv[: argv.index("--")] if "--" in argv else argv:
        if word.startswith("--"):
            name = word.split("=", 1)[0]
            assert name in known, f"{name} is not an option of satind {args.command}"
    return args
