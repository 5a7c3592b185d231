"""The master's verdict on a run's value: the plugin's check and report, made where the run
ran (plugin/hooks.judge), so that what a user sees does not depend on where they asked."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from satind import NotChecked, Plugin, output_file, spawnable
from satind.config import DEFAULT
from satind.net import codec
from satind.net import messages as m
from satind.plugin.hooks import judge


@spawnable
def judged(x: int) -> int:
    return x


def _check(args: tuple[Any, ...], result: Any) -> None:
    if result != args[0]:
        raise AssertionError(f"{result} != {args[0]}")


def _info(argv: list[str], check: bool = True) -> m.RunInfo:
    args = codec.encode_value((int(argv[0]),))
    return m.RunInfo("r", "judged", "", argv, args, "p", check=check)


def _plugin(report: Any = None) -> Plugin:
    return Plugin("judged", judged, "judged X", lambda a: (int(a[0]),), check=_check, report=report)


def test_check_ok_and_failed_and_skipped() -> None:
    value = codec.encode_value(4)
    assert judge(_plugin(), _info(["4"]), value, 50, 1 << 20).check == "ok"
    failed = judge(_plugin(), _info(["5"]), value, 50, 1 << 20)
    assert failed.check == "failed: AssertionError: 4 != 5"
    assert judge(_plugin(), _info(["5"], check=False), value, 50, 1 << 20).check == "skipped"


def test_a_result_the_check_cannot_verify_is_not_checked_never_ok() -> None:
    def too_big(args: tuple[Any, ...], result: Any) -> None:
        raise NotChecked(f"{args[0]} is more than the check verifies")

    plugin = Plugin("judged", judged, "judged X", lambda a: (int(a[0]),), check=too_big)
    value = codec.encode_value(4)
    verdict = judge(plugin, _info(["4"]), value, 50, 1 << 20)
    assert verdict.check == "not checked: 4 is more than the check verifies"
    bare = Plugin("judged", judged, "judged X", lambda a: (int(a[0]),))
    assert judge(bare, _info(["4"]), value, 50, 1 << 20).check == (
        "not checked: plugin judged has no check"
    )


def test_report_is_encoded_and_a_raising_report_fails_the_check() -> None:
    value = codec.encode_value(4)
    made = judge(_plugin(lambda argv, r: {"x": r * 10}), _info(["4"]), value, 50, 1 << 20)
    assert made.report is not None and codec.decode_value(made.report, 50) == {"x": 40}
    assert made.check == "ok"
    plain = judge(_plugin(), _info(["4"]), value, 50, 1 << 20)
    assert plain.report is None  # no report hook: the client shows the value

    def broken(argv: list[str], result: Any) -> Any:
        raise OSError("cannot write out.png")

    bad = judge(_plugin(broken), _info(["4"]), value, 50, 1 << 20)
    assert bad.report is None
    assert bad.check == "failed: its report raised OSError: cannot write out.png"


def test_output_files_of_the_report_travel_with_the_verdict_or_stay_in_the_output_dir(
    tmp_path: Path,
) -> None:
    def picture(argv: list[str], result: Any) -> str:
        output_file(argv[1], b"\x89PNG" + bytes([result]))
        return "drawn"

    value = codec.encode_value(4)
    made = judge(_plugin(picture), _info(["4", "pic.png"]), value, 50, 1 << 20)
    assert made.outputs == {"pic.png": b"\x89PNG\x04"} and made.kept == {}
    assert not (tmp_path / "pic.png").exists()
    kept_in = replace(DEFAULT.files, output_dir=str(tmp_path))
    made = judge(_plugin(picture), _info(["4", "pic.png"]), value, 50, 1 << 20, kept_in, "m1/0")
    assert made.outputs == {} and made.kept == {"pic.png": f"m1/0:{tmp_path}/r/pic.png"}
    assert (tmp_path / "r" / "pic.png").read_bytes() == b"\x89PNG\x04"
    too_big = replace(DEFAULT.files, max_output_bytes=3)
    failed = judge(_plugin(picture), _info(["4", "pic.png"]), value, 50, 1 << 20, too_big)
    assert "files.max_output_bytes" in failed.check and failed.outputs == {}
