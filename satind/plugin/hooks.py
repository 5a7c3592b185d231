"""The plugin's own code that runs for the core, run by the node in a worker thread (never on
its network side): parse a submission's arguments, or decode a client's values for one of the
plugin's functions; judge a run's value (its check and its report). The outcome reaches the core
as data (``satind.descriptor.Parsed``, ``Verdict``), or as the exception the plugin raised.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import satind.files as files
from satind.config import DEFAULT, FilesConfig
from satind.descriptor import NotChecked, Parsed, Plugin, UsageError, Verdict
from satind.net import codec
from satind.net import messages as m


def parse_submission(
    plugin: Plugin,
    argv: Sequence[str],
    max_frame: int,
    inputs: dict[str, bytes] | None = None,
    files_cfg: FilesConfig = DEFAULT.files,
) -> Parsed:
    """Run the plugin's parse and branching code and encode the root's arguments. Plugin
    code: the node runs this in a worker thread, not on its network side. Its input files
    are what the client sent (``inputs``) or what the operator's input directory holds.

    Raises:
        UsageError, PluginFailed, EncodeError; InputNeeded (the client has to send a file).
    """
    with files.scope(files.Submission(inputs or {}, files_cfg)):
        args = plugin.parse_args(argv)
    encoded = codec.encode_value(args, max_frame)
    return Parsed(plugin, args, encoded, plugin.branching(args))


def parse_function_submission(
    plugin: Plugin, qualname: str, values: bytes, max_depth: int
) -> Parsed:
    """A run of one spawnable function of the plugin's module with the client's values: no
    parse runs; decoding the values may run plugin code (a registered type's constructor),
    so this runs in a worker thread too. The branching factor is the plugin's when the
    function is its entry, else 2 (progress is then estimated as for a binary tree).

    Raises:
        UsageError: no such function, or values that are not an argument tuple.
        PluginFailed: the plugin's max_branching raised.
    """
    fn = plugin.function(qualname)
    try:
        args = codec.decode_value(values, max_depth, codec.version_of(plugin.home))
    except codec.DecodeError as exc:
        raise UsageError(f"{plugin.name}: the arguments cannot be decoded: {exc}") from None
    if not isinstance(args, (list, tuple)):
        raise UsageError(f"{plugin.name}: the arguments must be a tuple of values")
    args = tuple(args)
    own = fn is plugin.entry
    branching = plugin.branching(args) if own else 2
    return Parsed(plugin, args, values, branching, "" if own else fn.name)


def judge(
    plugin: Plugin,
    info: m.RunInfo,
    value: bytes,
    max_depth: int,
    max_frame: int,
    files_cfg: FilesConfig = DEFAULT.files,
    where: str = "",
) -> Verdict:
    """Run the plugin's check (unless the submitter said not to) and its report on a run's
    value. Plugin code: the node runs this in a worker thread. A check or report that raises
    fails the check, saying which hook raised: the user asked for what the plugin makes of the
    value, and it could not be made. Output files the report makes travel with the verdict,
    or are written into the operator's output directory (``where``: this peer's name, for
    the user to find them)."""
    outputs = files.Outputs(files_cfg, info.run_id)
    with files.scope(outputs):
        verdict = _judged(plugin, info, value, max_depth, max_frame)
    kept = {name: f"{where}:{path}" for name, path in outputs.kept.items()}
    return dataclasses.replace(verdict, outputs=outputs.files, kept=kept)


def _judged(
    plugin: Plugin, info: m.RunInfo, value: bytes, max_depth: int, max_frame: int
) -> Verdict:
    check = "skipped"  # the submitter said not to
    if info.entry:
        # Another function of the plugin's module: its check and report are the entry's.
        return Verdict(None, check if not info.check else "not checked: not the plugin's entry")
    if info.check and plugin.check is None:
        check = f"not checked: plugin {plugin.name} has no check"
    if (not info.check or plugin.check is None) and plugin.report is None:
        return Verdict(None, check)  # nothing reads the value here: not decoded (a copy)
    # A shipped version's registered types are that version's (net/values.py).
    version = codec.version_of(plugin.home)
    result = codec.decode_value(value, max_depth, version)
    if info.check and plugin.check is not None:
        try:
            plugin.check(tuple(codec.decode_value(info.args, max_depth, version)), result)
            check = "ok"
        except NotChecked as exc:
            check = f"not checked: {exc}"
        except Exception as exc:
            check = f"failed: {type(exc).__name__}: {exc}"
    if plugin.report is None:
        return Verdict(None, check)
    try:
        return Verdict(codec.encode_value(plugin.make_report(info.argv, result), max_frame), check)
    except Exception as exc:
        failed = f"failed: its report raised {type(exc).__name__}: {exc}"
        return Verdict(None, failed if not check.startswith("failed") else check)
