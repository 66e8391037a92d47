"""Writing perfkit's outputs (run records, traces, reports, sweep manifests) without destroying anything.

``write_text(path, text)`` writes *to* a path, never *over* what the path is:

* a regular file (or a new one) is written atomically — a temporary file beside it, then a rename —
  so a reader never sees half a record, and the file keeps its permissions;
* a symlink is followed: the file it points to is replaced atomically, beside itself, and the link
  stays a link;
* anything else that exists (``/dev/null``, ``/dev/full``, a FIFO, a terminal) is opened and
  written directly, as a shell's ``>`` would: it is never unlinked or replaced by a regular file.

``check_writable(path)`` proves, before a long run starts, that ``write_text`` can write there: the
missing folders are created, a probe file is written beside the target, and both are removed again
(permission bits say nothing to root, and nothing about ``/proc``); ``input_at(path, inputs)`` names the input
file an output would replace (an output never replaces what the command reads); ``resolve(path)``, called when a command starts, anchors a relative output path to the directory
the command was started in, so a profiled program that changes directory does not move its record.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

class OutputError(OSError):
    """An output path cannot be written; ``strerror`` says why (:func:`describe_error` adds the path)."""


def resolve(path: str | os.PathLike, start: str | None = None) -> Path:
    """``path`` made absolute against ``start`` (default: the working directory now — call it before
    the profiled program can change it)."""
    p = Path(os.path.expanduser(os.fspath(path)))
    return p if p.is_absolute() else Path(start or os.getcwd()) / p


def _target(path: Path) -> Path:
    """Where writing ``path`` lands: the end of its symlink chain (which may not exist yet)."""
    return Path(os.path.realpath(path))


def check_writable(path: str | os.PathLike) -> Path:
    """The resolved target of ``path`` if a file could be written there now; OutputError saying
    why not otherwise (a directory, no permission, a parent that is a file, a read-only place).

    Several processes may check the same new folder at once (every rank of a torchrun job checks
    ``-o rec/``): a folder another process creates in the meantime is used, not an error, and a
    probe whose folder another process's clean-up removed under it is tried again."""
    for _ in range(_RACE_RETRIES):
        try:
            return _check_writable(Path(path))
        except _FolderVanished:
            pass
    raise OutputError(errno.ENOENT, f"the folder of {path} keeps disappearing (another process removes it)")


_RACE_RETRIES = 5


class _FolderVanished(Exception):
    """The probe's folder existed a moment ago and is gone now: another process removed it."""


def _check_writable(p: Path) -> Path:
    target = _target(p)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputError(e.errno, e.strerror or str(e)) from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(errno.EISDIR, "it is a directory")
        if not os.access(target, os.W_OK):
            raise OutputError(errno.EACCES, "permission denied")
        if not stat.S_ISREG(st.st_mode):
            return target  # a device, a FIFO: written into (opening a FIFO here would wait for a reader)
        # a regular file: the atomic replace writes a temporary file beside it
        _probe(target.parent)
        return target
    # a new file: the nearest existing ancestor must be a directory; the rest is created
    parent = target.parent
    while not parent.exists():
        if parent.is_symlink():  # a dangling link in the middle of the path
            raise OutputError(errno.ENOENT, f"{parent} is a broken symbolic link")
        parent = parent.parent
    if not parent.is_dir():
        if not parent.exists():
            raise _FolderVanished  # made and removed again by another process since the look above
        raise OutputError(errno.ENOTDIR, f"{parent} is not a directory")
    missing = []  # the folders to make for the probe
    folder = target.parent
    while folder != parent:
        missing.append(folder)
        folder = folder.parent
    created = []  # those made here, removed after the probe: a refused command leaves nothing behind
    try:
        for folder in reversed(missing):
            try:
                folder.mkdir()
            except FileExistsError:
                try:
                    is_dir = stat.S_ISDIR(os.stat(folder).st_mode)
                except FileNotFoundError:
                    raise _FolderVanished from None  # made and removed again by another process
                if not is_dir:
                    raise OutputError(errno.ENOTDIR, f"{folder} is not a directory") from None
                continue  # another process made it a moment ago: it is not ours to remove
            except FileNotFoundError:
                raise _FolderVanished from None  # its parent, made by another process, was removed again
            except OSError as e:
                raise OutputError(e.errno, f"cannot create the directory {folder}: {e.strerror or e}") from None
            created.append(folder)
        _probe(target.parent)
    finally:
        for folder in reversed(created):
            try:
                folder.rmdir()
            except OSError:
                pass  # no longer empty: another process is using it
    return target


def _probe(folder: Path) -> None:
    """Write a probe file in ``folder`` and remove it; OutputError saying why it could not."""
    probe = folder / f".perfkit-probe.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"perfkit")
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise _FolderVanished from None
    except OSError as e:
        raise OutputError(e.errno, f"cannot write a file in {folder}: {e.strerror or e}") from None
    try:
        os.unlink(probe)
    except OSError:
        pass


def input_at(path: str | os.PathLike, inputs) -> str | None:
    """The first of ``inputs`` (paths, as the user gave them) that writing ``path`` would replace —
    the same file once links are followed — else None. Inputs that do not exist are skipped."""
    target = _target(Path(path))
    for given in inputs:
        if given is None:
            continue
        p = Path(os.path.expanduser(os.fspath(given)))
        try:
            if not p.is_file():
                continue
        except OSError:
            continue
        if _target(p) == target:
            return os.fspath(given)
        try:
            if target.exists() and os.path.samefile(p, target):  # a hard link
                return os.fspath(given)
        except OSError:
            pass
    return None


def write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` (see the module doc for what that means for links and devices).
    Returns ``path`` as given. Raises OSError (with the path in its message) when it cannot."""
    p = Path(path)
    target = _target(p)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(p))
    data = text.encode(encoding)
    if st is not None and not stat.S_ISREG(st.st_mode):
        # a device, a FIFO, a terminal: write into it, never replace it
        with open(target, "wb") as f:
            f.write(data)
        return p
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # 0o666 less the umask for a new file, as open() would; an existing file keeps its mode
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if st is None else stat.S_IMODE(st.st_mode))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if st is not None:
            os.chmod(tmp, stat.S_IMODE(st.st_mode))  # the umask must not narrow an existing file's mode
        os.replace(tmp, target)  # a reader never sees half a file
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return p


def describe_error(path: str | os.PathLike, e: OSError) -> str:
    """``cannot write PATH: REASON`` for an OSError from :func:`write_text` or :func:`check_writable`."""
    return f"cannot write {path}: {e.strerror or e}"
