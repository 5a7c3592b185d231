"""The client's side of a run's files (satind/files.py): it sends the input files the master
asks for and writes the output files the result carries — only files the run's own
arguments name, so a peer can make a client read or write nothing else.

``satind run`` and ``satind submit`` do the same: the user's files are read and written on
the user's machine, relative to where the command runs, whichever peer parses the arguments
and makes the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import satind.files as files
from satind.net import messages as m
from satind.plugin import UsageError


class NotAnArgument(Exception):
    """A peer asked for a file no argument of the run names: nothing is sent."""


def named_by(argv: Sequence[str]) -> set[str]:
    """The file names the arguments may stand for: each argument, and the value of an
    ``--option=VALUE`` one."""
    names = set(argv)
    names.update(a.split("=", 1)[1] for a in argv if a.startswith("-") and "=" in a)
    return names


class ClientFiles:
    """The files of one submission, on the submitter's machine. ``local`` is the scope of a
    parse made here (``satind run`` parses once before starting its peers): a file read then
    is sent as it was read, so ``/dev/stdin`` is read once."""

    def __init__(self, argv: Sequence[str], max_input_bytes: int) -> None:
        self.allowed = named_by(argv)
        self.local = files.Local(max_input_bytes)

    def send(self, names: Sequence[str]) -> dict[str, bytes]:
        """The content of the input files a master asked for.

        Raises:
            NotAnArgument: a name that no argument gives.
            UsageError: a file that cannot be read, or is too large (files.max_input_bytes).
        """
        out = {}
        for name in names:
            if name not in self.allowed:
                raise NotAnArgument(
                    f"the peer asked for the file {name!r}, which no argument of the run "
                    "names; nothing was sent"
                )
            out[name] = self.local.read(name)
        return out

    def save(self, result: m.RunResult) -> dict[str, str]:
        """Write the output files a run's result carries, relative to the working directory;
        what became of each (for the report): where it was written, where the master kept
        it, or why it was not written."""
        done: dict[str, str] = {}
        for name, data in result.outputs.items():
            if name not in self.allowed:
                done[name] = "not written: no argument of the run names it"
                continue
            if name in self.local.read_files:
                done[name] = "not written: it is an input file of the run"
                continue
            try:
                Path(name).write_bytes(data)
            except OSError as exc:
                done[name] = f"not written: {exc.strerror or exc}"
                continue
            done[name] = f"written ({len(data):,} bytes)"
        return done | kept(result)


def save_into(result: m.RunResult, directory: Path) -> dict[str, str]:
    """Write the output files a result carries into ``directory``, each under its base name
    (``satind result --outputs DIR``: the arguments were not typed here), made if need be."""
    done: dict[str, str] = {}
    for name, data in result.outputs.items():
        try:
            target = directory / files.output_name(name)
            directory.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except UsageError as exc:
            done[name] = f"not written: {exc}"
            continue
        except OSError as exc:
            done[name] = f"not written: {exc.strerror or exc}"
            continue
        done[name] = f"written to {target} ({len(data):,} bytes)"
    return done | kept(result)


def kept(result: m.RunResult) -> dict[str, str]:
    """Outputs the master kept in its operator's output directory, and where."""
    return {name: f"kept by the run's master at {where}" for name, where in result.kept.items()}


def unsaved(result: m.RunResult) -> dict[str, str]:
    """What to say of the outputs a result carries when none is written here."""
    done = {
        name: f"not written ({len(data):,} bytes): `satind result RUN_ID --outputs DIR` writes it"
        for name, data in result.outputs.items()
    }
    return done | kept(result)
