"""The master's verdict on a run's value: the plugin's check and report, made where the run
ran (core/master.judge), so that what a user sees does not depend on where they asked."""

from __future__ import annotations

from typing import Any

from satind import NotChecked, Plugin, spawnable
from satind.core.master import judge
from satind.net import codec
from satind.net import messages as m


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
