"""A run's files: the input files its arguments name and the output files its report makes.

A run's arguments come from a client, and its parse, check and report run on peers — its
master, or whichever peer an election makes master. So a plugin never opens a path an
argument names; it asks satind (re-exported by ``satind``):

    def parse(argv):
        text = input_file(argv[0]).decode()        # the bytes of the file argv[0] names
        ...

    def report(argv, result):
        output_file(argv[2], png(result))          # written where the submitter is

What these do depends on where the plugin's code runs (a *scope*, set by satind around the
call; ``scope``):

- **a peer parses a submission** (``Submission``): ``input_file`` gives what the client sent
  for that argument, else the file in the operator's ``files.input_dir`` (``read_confined``:
  no "..", no symlink, a regular file, size-capped), else it stops the parse with
  ``InputNeeded``: the peer asks the client for the file, and the client sends its own copy
  with the submission again (``client/files.py``);
- **a peer judges a finished run** (``Outputs``): ``output_file`` keeps the bytes, which go
  to the submitter with the result (the CLI writes them where it runs), or writes them under
  ``files.output_dir/RUN_ID/`` when the operator set one (``write_confined``);
- **anywhere else** — a test, a notebook, ``satind run`` parsing once on the user's machine
  before it starts its peers (``Local``): the user's own files, read and written directly,
  reads bounded by ``files.max_input_bytes``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Protocol

from satind.config import DEFAULT, FilesConfig
from satind.descriptor import UsageError


class InputNeeded(BaseException):
    """A peer's parse needs a file the client has not sent (and the operator's input
    directory does not hold): the submission is answered with the file's name, and a client
    that has it submits again with its content.

    A BaseException, like ``GeneratorExit``: it is satind's signal through the plugin's
    code, which an ``except Exception`` in a parser must not swallow."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(
            f"the file {name!r} is read from the client, which sends it with the submission "
            f"(the satind command line does); {why}"
        )
        self.name = name


class FileScope(Protocol):
    """Where ``input_file`` and ``output_file`` go while plugin code runs."""

    def read(self, name: str) -> bytes: ...

    def write(self, name: str, data: bytes) -> None: ...


_SCOPE: ContextVar[FileScope | None] = ContextVar("satind_file_scope", default=None)


@contextlib.contextmanager
def scope(files: FileScope) -> Iterator[FileScope]:
    """Run the body with ``files`` answering ``input_file``/``output_file`` (in this thread
    or task only: a context variable)."""
    token = _SCOPE.set(files)
    try:
        yield files
    finally:
        _SCOPE.reset(token)


def input_file(name: str) -> bytes:
    """The content of the input file the run argument ``name`` names: sent by the client, or
    read from the operator's input directory on a peer; the local file outside satind.

    Call it in ``parse`` only, and put what the run needs into parse's result: the file is
    read once, where the submission is parsed.

    Raises:
        UsageError: the file cannot be read, is larger than ``files.max_input_bytes``, or is
            not allowed here; the message says which.
    """
    return _current().read(name)


def output_file(name: str, data: bytes) -> None:
    """Make the output file the run argument ``name`` names, with content ``data``: sent to
    the submitter with the result and written there by the client (relative to where it
    runs), or kept in the operator's output directory; written directly outside satind.

    Call it in ``report``.

    Raises:
        UsageError: the run's outputs would exceed ``files.max_output_bytes``, or the name
            is not a file name.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"output_file({name!r}, ...) takes bytes, got {type(data).__name__}")
    _current().write(name, bytes(data))


def _current() -> FileScope:
    return _SCOPE.get() or Local(DEFAULT.files.max_input_bytes)


# -- the scopes ---------------------------------------------------------------------------


class Local:
    """The user's own files, on the user's machine: read (bounded, and once: a second read of
    ``/dev/stdin`` gives what the first did) and written directly."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.read_files: dict[str, bytes] = {}

    def read(self, name: str) -> bytes:
        if name not in self.read_files:
            self.read_files[name] = read_bounded(name, self.max_bytes)
        return self.read_files[name]

    def write(self, name: str, data: bytes) -> None:
        try:
            Path(name).write_bytes(data)
        except OSError as exc:
            raise UsageError(f"cannot write {name}: {exc.strerror or exc}") from None


class Submission:
    """A peer parses a submission: what the client sent, else the operator's input
    directory, else ask the client (``InputNeeded``). Parse writes no file."""

    def __init__(self, sent: dict[str, bytes], cfg: FilesConfig) -> None:
        self.sent = sent
        self.cfg = cfg

    def read(self, name: str) -> bytes:
        data = self.sent.get(name)
        if data is not None:
            if len(data) > self.cfg.max_input_bytes:
                raise UsageError(_too_large(name, len(data), self.cfg.max_input_bytes))
            return data
        if not self.cfg.input_dir:
            raise InputNeeded(name, "the peers read no file a client names ([files] input_dir)")
        # What the operator's directory cannot give (no such file, or not one it allows:
        # outside it, a symlink, a FIFO, too large) is asked of the client, saying why.
        try:
            return read_confined(self.cfg.input_dir, name, self.cfg.max_input_bytes)
        except FileNotFoundError:
            why = "the peers' input directory ([files] input_dir) does not hold it"
        except UsageError as exc:
            why = f"the peers' input directory does not give it: {exc}"
        raise InputNeeded(name, why)

    def write(self, name: str, data: bytes) -> None:
        raise UsageError(f"output_file({name!r}) in parse: make output files in report")


class Outputs:
    """A peer judges a finished run: its report's output files, kept to travel with the
    result, or written into the operator's output directory (``kept``: name -> path)."""

    def __init__(self, cfg: FilesConfig, run_id: str) -> None:
        self.cfg = cfg
        self.run_id = run_id
        self.files: dict[str, bytes] = {}
        self.kept: dict[str, str] = {}
        self._total = 0

    def read(self, name: str) -> bytes:
        raise UsageError(
            f"input_file({name!r}) outside parse: an input file is read when the submission "
            "is parsed; put what the run needs into parse's result"
        )

    def write(self, name: str, data: bytes) -> None:
        previous = len(self.files.get(name, b""))
        total = self._total - previous + len(data)
        if total > self.cfg.max_output_bytes:
            raise UsageError(
                f"output {name}: the run's output files would be {total:,} bytes, more than "
                f"files.max_output_bytes ({self.cfg.max_output_bytes:,})"
            )
        self._total = total
        if self.cfg.output_dir:
            base = output_name(name)
            if any(output_name(other) == base for other in self.kept if other != name):
                raise UsageError(f"two outputs of the run are named {base}")
            self.kept[name] = write_confined(self.cfg.output_dir, self.run_id, name, data)
        else:
            self.files[name] = data


# -- bounded and confined file access --------------------------------------------------------


def _too_large(name: str, size: int, limit: int) -> str:
    return f"input file {name} is larger than files.max_input_bytes ({limit:,} bytes" + (
        f"; it has {size:,})" if size > limit else ")"
    )


def read_bounded(path: str, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of a local file (pipes and devices too: read until end of file,
    or refused once past the bound — ``/dev/zero`` costs ``max_bytes``, not all memory).

    Raises:
        UsageError: it cannot be read, or it has more than ``max_bytes``.
    """
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise UsageError(_too_large(path, len(data), max_bytes))
    return data


def read_confined(directory: str, name: str, max_bytes: int) -> bytes:
    """The file ``name`` names inside ``directory``: relative to it, or absolute inside it.

    Walked one component at a time from the directory, each opened relative to the one
    before without following symlinks (``openat`` with ``O_NOFOLLOW``), so that nothing —
    "..", a symlink, a rename racing the check — leads out of it; the file is opened
    non-blocking (a FIFO does not wait for a writer) and must be a regular file of at most
    ``max_bytes``.

    Raises:
        FileNotFoundError: the directory holds no such file.
        UsageError: the name leads out of the directory, through a symlink, or to something
            that is not a regular file, or the file is too large.
    """
    parts = _inside(directory, name)
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                next_fd = os.open(
                    part, flags | (os.O_NONBLOCK if last else os.O_DIRECTORY), dir_fd=fd
                )
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    raise FileNotFoundError(name) from None
                # O_NOFOLLOW on a symlink: ELOOP (EMLINK on BSDs), or ENOTDIR with O_DIRECTORY.
                if exc.errno in (errno.ELOOP, errno.EMLINK) or _is_symlink(part, fd):
                    raise UsageError(
                        f"input file {name}: {'/'.join(parts[: i + 1])} is a symlink; the "
                        "peers follow none in their input directory ([files] input_dir)"
                    ) from None
                raise UsageError(f"cannot read input file {name}: {exc.strerror}") from None
            os.close(fd)
            fd = next_fd
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"input file {name} is not a regular file")
        if info.st_size > max_bytes:
            raise UsageError(_too_large(name, info.st_size, max_bytes))
        os.set_blocking(fd, True)
        chunks = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:  # it grew since the fstat
            raise UsageError(_too_large(name, len(data), max_bytes))
        return data
    finally:
        os.close(fd)


def _is_symlink(part: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(part, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _inside(directory: str, name: str) -> list[str]:
    """The components of ``name`` below ``directory``, refusing any way out (the walk in
    ``read_confined`` refuses symlinks).

    Raises:
        UsageError: an absolute name outside the directory, a ".." component, or no file
            name at all.
    """
    relative = name
    if os.path.isabs(name):
        root = os.path.abspath(directory).rstrip("/") + "/"
        if not name.startswith(root):
            raise UsageError(f"input file {name} is not inside the input directory {directory}")
        relative = name[len(root) :]
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UsageError(f"input file {name}: '..' may not name it ([files] input_dir)")
    if not parts or "\0" in name:
        raise UsageError(f"input file {name!r} names no file")
    return parts


def output_name(name: str) -> str:
    """The base name an output is written under in an output directory.

    Raises:
        UsageError: the name has no usable base name.
    """
    base = name.rstrip("/").rsplit("/", 1)[-1]
    if base in ("", ".", "..") or "\0" in base:
        raise UsageError(f"output {name!r} names no file")
    return base


def write_confined(directory: str, run_id: str, name: str, data: bytes) -> str:
    """Write an output as ``directory/run_id/<base name>``; the path written. Made with
    ``openat`` without following symlinks, so nothing leads out of the directory; a file of
    the same run is replaced (a new master judges the run again after an election).

    Raises:
        UsageError: the name has no usable base name, or writing failed.
    """
    base = output_name(name)
    if "/" in run_id or run_id in ("", ".", ".."):
        raise UsageError(f"bad run id {run_id!r}")
    flags = os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        top = os.open(directory, os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY)
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(run_id, 0o755, dir_fd=top)
            run_dir = os.open(run_id, os.O_RDONLY | os.O_DIRECTORY | flags, dir_fd=top)
        finally:
            os.close(top)
        try:
            fd = os.open(base, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | flags, 0o644, dir_fd=run_dir)
        finally:
            os.close(run_dir)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise UsageError(
            f"cannot write output {name} into {directory}/{run_id} ([files] output_dir): "
            f"{exc.strerror or exc}"
        ) from None
    return os.path.join(directory, run_id, base)
