"""The types of the command line's values: what each must be, and the message that says so
when it is not (argparse prints it with the command's usage, exit code 2)."""

from __future__ import annotations

import argparse

from satind.net.messages_control import weight_problem

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(text: str) -> str:
    level = text.upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"unknown log level {text!r}; use one of {', '.join(LOG_LEVELS)}"
        )
    return level


def run_id(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "a run id cannot be empty: give the id `satind submit` printed (`satind runs` "
            "lists them)"
        )
    return text


def weight(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if why := weight_problem(value):
        raise argparse.ArgumentTypeError(why)
    return value
