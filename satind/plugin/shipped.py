"""Shipped plugin code: a plugin directory sent with a submission (``satind submit --ship DIR``,
``cluster.submit(..., ship=DIR)``) instead of installed on every peer.

A **bundle** is the directory's ``*.py`` files (the files a plugin directory's code hash
covers, discovery.py), by relative path. It is content-addressed: its hash is the directory's
code hash, computed the same way, so a peer verifies what it was sent and a run names its
code by the hash satind already gossips and checks. A peer keeps each version in a directory
of its own under its cache (``Cache``) and imports it under a package of its own,
``satind_shipped_<hash>``: two versions of one plugin name never share a module, a spawnable
function's registry name or an absolute import; ``import helper`` in shipped code imports the
version's own helper (plugin/siblings.py), as ``from . import helper`` does.

Shipping runs code on every peer that takes part: peers accept it only when their operator
says so (``[plugins] accept_shipped``) and only from client certificates with the "ship" grant
(node/permissions.py). Before it is imported here, each plugin file of a bundle is vetted in a
process of its own (satind/vetting.py), as any plugin file is.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from satind.descriptor import Plugin
from satind.net.values import forget_version
from satind.plugin.discovery import directory_hash, plugin_files, sources_under
from satind.plugin.importing import (
    NoPlugin,
    describe_failure,
    load_path_module,
    plugins_in,
    shipped_package,
)
from satind.plugin.siblings import forget as forget_builtins
from satind.vetting import Unit, vet
from satind.work.spawnables import forget_module

# A bundle: file contents by relative POSIX path ("helpers/geometry.py").
Bundle = dict[str, bytes]


class BadBundle(ValueError):
    """A bundle that is not what it claims (the message says what is wrong)."""


def bundle_hash(bundle: Mapping[str, bytes]) -> str:
    """The code hash of a bundle: ``directory_hash`` of the directory it came from."""
    digest = hashlib.sha256()
    for name in sorted(bundle, key=lambda n: PurePosixPath(n).parts):
        digest.update(str(PurePosixPath(name)).encode() + b"\0")
        digest.update(bundle[name])
    return digest.hexdigest()


def pack(
    directory: Path | None,
    max_bytes: int,
    max_files: int,
    extra: Mapping[str, bytes] | None = None,
) -> Bundle:
    """The bundle of a plugin directory: every ``*.py`` under it, as discovery sees them, and
    the ``extra`` files (by relative path: satind.Executor's plugin file beside a script's
    directory, or alone for ``directory`` None).

    Raises:
        BadBundle: not a directory, no plugin file in it, or more than the bounds allow.
    """
    if directory is not None and not directory.is_dir():
        raise BadBundle(f"cannot ship {directory}: not a directory")
    extra = extra or {}
    files = sources_under(directory) if directory is not None else []
    if directory is not None and not extra and not plugin_files(directory)[0]:
        raise BadBundle(
            f"cannot ship {directory}: no plugin file in it (a *.py directly in it that "
            "assigns PLUGIN = satind.Plugin(...) at its top level; docs/plugins.md)"
        )
    if len(files) + len(extra) > max_files:
        raise BadBundle(
            f"cannot ship {directory}: {len(files)} Python files, more than "
            f"{max_files} (plugins.max_shipped_files)"
        )
    bundle: Bundle = dict(extra)
    size = sum(len(data) for data in extra.values())
    for file in files:
        assert directory is not None
        data = file.read_bytes()  # one at a time: a huge directory stops at the bound
        size += len(data)
        if size > max_bytes:
            raise BadBundle(
                f"cannot ship {directory}: more than {max_bytes:,} bytes of Python "
                "(plugins.max_shipped_bytes)"
            )
        bundle[file.relative_to(directory).as_posix()] = data
    bundle.update(extra)  # satind's own file, not one of the directory's of that name
    if directory is not None and not extra:
        assert bundle_hash(bundle) == directory_hash(directory)
    return bundle


def check(bundle: Mapping[str, bytes], code_hash: str, max_bytes: int, max_files: int) -> None:
    """That a bundle received is what it claims and is safe to write: its hash, its bounds,
    and names that stay inside its directory.

    Raises:
        BadBundle: what is wrong with it.
    """
    if len(bundle) > max_files:
        raise BadBundle(f"{len(bundle)} files, more than {max_files} (plugins.max_shipped_files)")
    size = sum(len(data) for data in bundle.values())
    if size > max_bytes:
        raise BadBundle(f"{size:,} bytes, more than {max_bytes:,} (plugins.max_shipped_bytes)")
    for name in bundle:
        parts = PurePosixPath(name).parts
        if (
            not name.endswith(".py")
            or name.startswith("/")
            or "\\" in name
            or not parts
            or any(p in ("", ".", "..") or p.startswith(".") or p == "__pycache__" for p in parts)
            or any(not p.removesuffix(".py").isidentifier() for p in parts)
        ):
            raise BadBundle(f"bad file name {name!r} (relative *.py names only)")
    actual = bundle_hash(bundle)
    if actual != code_hash:
        raise BadBundle(f"its content has hash {actual[:12]}, not the {code_hash[:12]} it claims")


class Cache:
    """This peer's shipped code: a directory per version under ``root`` (made private to the
    peer when ``root`` is empty, and removed with it), at most ``keep`` versions that no run
    uses; older unused ones are evicted.

    A private directory is removed by ``close``, which a SIGKILLed peer never calls: each
    holds a lock (``flock`` on its LOCK file) while its peer lives, which the kernel releases
    when the process dies however it dies, and a peer making its own removes those whose
    lock it can take (their peers are gone). Not by process id: a peer in another PID
    namespace sharing the temporary directory would look dead.
    """

    def __init__(self, root: str, keep: int) -> None:
        self.keep = keep
        self._own = not root
        self._lock: int | None = None
        if self._own:
            self.root = Path(tempfile.mkdtemp(prefix=PRIVATE_PREFIX))
            self._lock = _hold_lock(self.root)
            sweep_private(self.root.parent, keep=self.root)
        else:
            self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Versions in the order they were last used (oldest first).
        self._used: dict[str, None] = {}

    def path(self, code_hash: str) -> Path:
        """A version's directory. Only a code hash names one (64 hex digits): a member asking
        for ``../..`` gets nothing.

        Raises:
            BadBundle: not a code hash.
        """
        if len(code_hash) != 64 or any(c not in "0123456789abcdef" for c in code_hash):
            raise BadBundle(f"{code_hash[:80]!r} is not a code hash")
        return self.root / code_hash

    def has(self, code_hash: str) -> bool:
        try:
            return self.path(code_hash).is_dir()
        except BadBundle:
            return False

    def store(self, code_hash: str, bundle: Mapping[str, bytes]) -> Path:
        """Write a checked bundle (``check``) to its directory, atomically: a directory that
        exists is whole."""
        target = self.path(code_hash)
        if target.is_dir() and bundle_hash(self.bundle(code_hash)) != code_hash:
            # Not what this peer wrote (a cache directory kept across restarts, changed by
            # someone): written again, never imported as it is.
            shutil.rmtree(target, ignore_errors=True)
        if not target.is_dir():
            staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=self.root))
            for name, data in bundle.items():
                file = staging.joinpath(*PurePosixPath(name).parts)
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_bytes(data)
            try:
                os.rename(staging, target)
            except OSError:  # another store of the same version won
                shutil.rmtree(staging, ignore_errors=True)
        self.touch(code_hash)
        return target

    def bundle(self, code_hash: str) -> Bundle:
        """A stored version's bundle again (to send to a member that lacks it)."""
        root = self.path(code_hash)
        return {f.relative_to(root).as_posix(): f.read_bytes() for f in sources_under(root)}

    def touch(self, code_hash: str) -> None:
        self._used.pop(code_hash, None)
        self._used[code_hash] = None

    def evict(self, in_use: Iterable[str]) -> list[str]:
        """Forget the least recently used versions beyond ``keep`` that no run uses: their
        directories, and their modules in this process. Returns the hashes evicted."""
        busy = set(in_use)
        idle = [h for h in self._used if h not in busy]
        evicted = idle[: max(0, len(idle) - self.keep)]
        for code_hash in evicted:
            del self._used[code_hash]
            shutil.rmtree(self.path(code_hash), ignore_errors=True)
            unload(code_hash)
        return evicted

    def close(self) -> None:
        if self._own:
            shutil.rmtree(self.root, ignore_errors=True)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


# A peer's private cache directory (under the temporary directory), and the file whose lock
# says its peer lives.
PRIVATE_PREFIX = "satind-shipped-"
LOCK = ".lock"


def _own_directory(path: Path, uid: int) -> bool:
    """A directory (not a link to one) of this user's."""
    info = path.lstat()
    return stat.S_ISDIR(info.st_mode) and info.st_uid == uid


def _hold_lock(directory: Path) -> int:
    """Lock ``directory``'s LOCK file for as long as this process lives; the descriptor.
    Locked under another name, then renamed: a sweep never finds the LOCK file unlocked
    while its peer lives."""
    staging = directory / ".lock-staging"
    fd = os.open(staging, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: no one else holds it
    os.rename(staging, directory / LOCK)
    return fd


def sweep_private(parent: Path, keep: Path) -> list[Path]:
    """Remove the private cache directories under ``parent`` whose peers are gone (their
    LOCK file can be locked), but ``keep``. Directories without a LOCK file are left alone
    (one being made, or not this kind). Returns those removed."""
    removed = []
    me = os.getuid()
    for directory in parent.glob(PRIVATE_PREFIX + "*"):
        try:
            if directory == keep or not _own_directory(directory, me):
                continue
            # Never blocking (a FIFO named LOCK would hold the open), never followed.
            flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
            fd = os.open(directory / LOCK, flags)
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # its peer lives
        try:
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
        finally:
            os.close(fd)
    return removed


def load(
    directory: Path,
    code_hash: str,
    import_timeout_s: float,
    start_timeout_s: float,
    memory_mb: int = 0,
) -> list[Plugin]:
    """The plugins of a stored version: each plugin file vetted in a process of its own, then
    imported here under ``satind_shipped_<hash>`` and stamped with the version's hash.

    Raises:
        BadBundle: no plugin came through (the message says why, file by file).
    """
    files, problems = plugin_files(directory)
    units = {file: Unit("shipped", str(file.resolve())) for file in files}
    verdicts = vet(list(units.values()), import_timeout_s, start_timeout_s, memory_mb)
    found: list[Plugin] = []
    for file, unit in units.items():
        error = verdicts.get(unit, "")
        if not error:
            try:
                module = load_path_module(file.resolve(), shipped_package(code_hash))
                plugins = plugins_in(module, f"shipped {code_hash[:12]}", code_hash)
                if not plugins:
                    raise NoPlugin("it defines no Plugin of its own")
                found.extend(plugins)
                continue
            except (Exception, SystemExit) as exc:
                error = describe_failure(exc) if not isinstance(exc, NoPlugin) else str(exc)
        problems.append(f"{file.name}: not loaded: {error}")
    if not found:
        raise BadBundle("no plugin in it could be loaded: " + "; ".join(problems or ["none"]))
    return found


def unload(code_hash: str) -> None:
    """Forget a version's modules in this process (jobs that hold its functions keep them)."""
    package = shipped_package(code_hash)
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]
        forget_module(name)
    forget_builtins(package)
    forget_version(package)  # its registered types
