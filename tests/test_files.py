"""A run's files (satind/files.py, client/files.py): reads confined to the operator's input
directory, writes confined to a run's directory in its output directory, what a peer's
parse and judge may touch, and what a client sends and writes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from satind import Plugin, UsageError, files, input_file, output_file, spawnable
from satind.client.files import ClientFiles, NotAnArgument, save_into
from satind.config import DEFAULT, FilesConfig
from satind.net import messages as m

CFG = DEFAULT.files


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """inputs/ with a file, a nested file, a symlink to a file inside and to one outside, a
    symlinked directory, a FIFO, a directory; secret.txt beside inputs/."""
    inputs = tmp_path / "inputs"
    (inputs / "sub").mkdir(parents=True)
    (inputs / "a.txt").write_bytes(b"alpha")
    (inputs / "sub" / "b.txt").write_bytes(b"beta")
    (tmp_path / "secret.txt").write_bytes(b"TOPSECRET")
    (inputs / "inside-link").symlink_to(inputs / "a.txt")
    (inputs / "outside-link").symlink_to(tmp_path / "secret.txt")
    (inputs / "up").symlink_to(tmp_path)
    os.mkfifo(inputs / "fifo")
    return inputs


@pytest.mark.parametrize(
    ("name", "content"),
    [("a.txt", b"alpha"), ("./a.txt", b"alpha"), ("sub/b.txt", b"beta"), ("sub//b.txt", b"beta")],
)
def test_a_file_inside_the_directory_is_read(tree: Path, name: str, content: bytes) -> None:
    assert files.read_confined(str(tree), name, 100) == content
    assert files.read_confined(str(tree), str(tree / name), 100) == content  # absolute inside


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("../secret.txt", "'..'"),
        ("sub/../../secret.txt", "'..'"),
        ("inside-link", "is a symlink"),  # even one that stays inside
        ("outside-link", "is a symlink"),
        ("up/secret.txt", "up is a symlink"),
        ("fifo", "not a regular file"),  # at once: a FIFO is not waited on
        ("sub", "not a regular file"),
        ("a.txt/x", "Not a directory"),
        ("", "names no file"),
        (".", "names no file"),
    ],
)
def test_a_name_that_leads_out_or_to_no_regular_file_is_refused(
    tree: Path, name: str, why: str
) -> None:
    with pytest.raises(UsageError, match=why):
        files.read_confined(str(tree), name, 100)


def test_an_absolute_name_outside_the_directory_is_refused(tree: Path) -> None:
    for name in (str(tree.parent / "secret.txt"), "/dev/zero", "/etc/passwd", f"{tree}x/a.txt"):
        with pytest.raises(UsageError, match="not inside the input directory"):
            files.read_confined(str(tree), name, 100)


def test_a_missing_file_and_a_file_too_large(tree: Path) -> None:
    with pytest.raises(FileNotFoundError):
        files.read_confined(str(tree), "nothing.txt", 100)
    assert files.read_confined(str(tree), "a.txt", 5) == b"alpha"
    with pytest.raises(UsageError, match=r"files\.max_input_bytes"):
        files.read_confined(str(tree), "a.txt", 4)


def test_a_peers_parse_reads_what_the_client_sent_then_the_directory_else_asks(
    tree: Path,
) -> None:
    closed = files.Submission({}, CFG)
    with pytest.raises(files.InputNeeded) as needed:
        closed.read("a.txt")
    assert needed.value.name == "a.txt" and "[files] input_dir" in str(needed.value)
    sent = files.Submission({"a.txt": b"from the client"}, replace(CFG, input_dir=str(tree)))
    assert sent.read("a.txt") == b"from the client"
    assert sent.read("sub/b.txt") == b"beta"
    # What the directory cannot give is asked of the client, saying why; never read here.
    for name in ("nothing.txt", "outside-link", str(tree.parent / "secret.txt"), "fifo"):
        with pytest.raises(files.InputNeeded) as needed:
            sent.read(name)
        assert needed.value.name == name and "TOPSECRET" not in str(needed.value)
    with pytest.raises(UsageError, match=r"files\.max_input_bytes"):
        files.Submission({"x": b"12345"}, replace(CFG, max_input_bytes=4)).read("x")
    with pytest.raises(UsageError, match="make output files in report"):
        sent.write("out.png", b"")


@spawnable
def _echo(x: bytes) -> bytes:
    return x


def _careless_parse(argv: Sequence[str]) -> tuple[bytes]:
    try:
        return (input_file(argv[0]),)
    except Exception:  # a parser that swallows every error must not swallow satind's signal
        return (b"",)


def test_input_needed_passes_through_the_plugins_parse() -> None:
    plugin = Plugin("echo", _echo, "echo FILE", _careless_parse)
    with files.scope(files.Submission({}, CFG)), pytest.raises(files.InputNeeded):
        plugin.parse_args(["some.txt"])
    with files.scope(files.Submission({"some.txt": b"x"}, CFG)):
        assert plugin.parse_args(["some.txt"]) == (b"x",)


def test_outside_satind_the_users_own_files_are_read_and_written(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_bytes(b"mine")
    assert input_file(str(tmp_path / "in.txt")) == b"mine"
    output_file(str(tmp_path / "out.bin"), b"\x00\x01")
    assert (tmp_path / "out.bin").read_bytes() == b"\x00\x01"
    with pytest.raises(UsageError, match="cannot read"):
        input_file(str(tmp_path / "missing"))


def test_a_local_read_is_bounded_and_made_once(tmp_path: Path) -> None:
    local = files.Local(1000)
    with pytest.raises(UsageError, match=r"files\.max_input_bytes"):
        local.read("/dev/zero")  # 1001 bytes read, not all memory
    path = tmp_path / "f"
    path.write_bytes(b"first")
    assert local.read(str(path)) == b"first"
    path.write_bytes(b"second")
    assert local.read(str(path)) == b"first"  # /dev/stdin is read once, then sent as read


def test_outputs_travel_bounded(tmp_path: Path) -> None:
    outputs = files.Outputs(replace(CFG, max_output_bytes=10), "r1")
    with files.scope(outputs):
        output_file("a.png", b"12345")
        output_file("a.png", b"123456")  # written again: counted once
        with pytest.raises(UsageError, match=r"files\.max_output_bytes"):
            output_file("b.png", b"12345")
        with pytest.raises(UsageError, match="outside parse"):
            input_file("in.txt")
    assert outputs.files == {"a.png": b"123456"} and outputs.kept == {}
    assert list(tmp_path.iterdir()) == []


def test_outputs_kept_in_the_operators_directory_stay_in_the_runs_directory(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    outputs = files.Outputs(replace(CFG, output_dir=str(out)), "20261122-101500-ab12cd")
    with files.scope(outputs):
        output_file("../../etc/plate.png", b"png")  # its base name, in the run's directory
        with pytest.raises(UsageError, match="two outputs"):
            output_file("elsewhere/plate.png", b"other")
        with pytest.raises(UsageError, match="names no file"):
            output_file("..", b"x")
    run_dir = out / "20261122-101500-ab12cd"
    assert outputs.files == {}
    assert outputs.kept == {"../../etc/plate.png": str(run_dir / "plate.png")}
    assert (run_dir / "plate.png").read_bytes() == b"png"
    assert sorted(p.name for p in tmp_path.rglob("*")) == [
        "20261122-101500-ab12cd",
        "out",
        "plate.png",
    ]
    # A symlink planted at the target is not followed.
    (run_dir / "x.png").symlink_to(tmp_path / "victim")
    with pytest.raises(UsageError, match="cannot write output"):
        files.write_confined(str(out), "20261122-101500-ab12cd", "x.png", b"x")
    assert not (tmp_path / "victim").exists()
    with pytest.raises(UsageError, match="bad run id"):
        files.write_confined(str(out), "..", "x.png", b"x")


def test_a_client_sends_and_writes_only_files_its_arguments_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.cnf").write_text("p cnf 1 1\n1 0\n")
    client = ClientFiles(["in.cnf", "3", "--png=pic.png", "--", "--png", "b.png"], 1000)
    assert client.send(["in.cnf"]) == {"in.cnf": b"p cnf 1 1\n1 0\n"}
    with pytest.raises(NotAnArgument, match="/etc/passwd"):
        client.send(["/etc/passwd"])
    with pytest.raises(UsageError, match="cannot read"):
        client.send(["3"])
    result = m.RunResult(
        "r",
        b"",
        None,
        0.0,
        1,
        outputs={"pic.png": b"P", "b.png": b"B", "/tmp/evil": b"E", "../up.png": b"U"},
        kept={"c.png": "m1/0:/srv/out/r/c.png"},
    )
    done = client.save(result)
    assert (tmp_path / "pic.png").read_bytes() == b"P" and (tmp_path / "b.png").read_bytes() == b"B"
    assert done["/tmp/evil"].startswith("not written") and not Path("/tmp/evil").exists()
    assert done["../up.png"].startswith("not written")
    # An output never replaces an input file the client sent.
    overwrite = replace(result, outputs={"in.cnf": b"junk"}, kept={})
    assert client.save(overwrite) == {"in.cnf": "not written: it is an input file of the run"}
    assert (tmp_path / "in.cnf").read_text() == "p cnf 1 1\n1 0\n"
    assert not (tmp_path.parent / "up.png").exists()
    assert done["c.png"] == "kept by the run's master at m1/0:/srv/out/r/c.png"
    into = tmp_path / "into"
    into.mkdir()
    save_into(result, into)
    assert sorted(p.name for p in into.iterdir()) == ["b.png", "evil", "pic.png", "up.png"]


def test_the_defaults_open_nothing() -> None:
    assert FilesConfig().input_dir == "" and FilesConfig().output_dir == ""
