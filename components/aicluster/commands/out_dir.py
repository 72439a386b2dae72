"""`aicluster plan --out DIR`: write the plan's files into DIR safely.

- Nothing outside DIR is written or removed: every file and folder below DIR is opened relative to
  its parent's descriptor with O_NOFOLLOW, so a symlink already in DIR (planted, or left from
  anything) is replaced, never followed. DIR itself may be a symlink the user named.
- Each file is written to a temporary name beside it and renamed over the old one: a reader sees
  the old file or the new one, never half of one, and a hard link to an old file keeps its text.
- DIR holds one plan: files an earlier plan wrote that this one does not are removed. aicluster
  knows them from the manifest it keeps in DIR (.aicluster-out.json; plan.json's `files` for DIRs
  written before the manifest existed), and removes only those.
- A DIR that is neither empty nor an earlier plan's (it holds a file aicluster did not write) is
  refused before anything is written: aicluster never deletes a user's files. So is a DIR that is
  a file.
"""
from __future__ import annotations

import errno
import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from aicluster import limits
from aicluster.errors import Problem, SpecError

MANIFEST = ".aicluster-out.json"
_TMP_PREFIX = ".aicluster-tmp-"
_MAX_ENTRIES = 100_000    # a DIR holding more than this is not an earlier plan: refused without a full walk
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _refuse(out: Path, allowed: str) -> SpecError:
    return SpecError([Problem("--out", str(out), allowed)], subject="argument")


@dataclass(frozen=True)
class OutDir:
    """A folder `aicluster` writes its outputs to."""
    path: Path
    previous: frozenset[str]      # files an earlier plan wrote here (relative, '/'-separated)
    leftovers: frozenset[str]     # temporary files an interrupted earlier run left


def prepare(out: Path) -> OutDir:
    """Check DIR before anything is planned or written: a directory (or nothing yet) that is empty
    or an earlier plan's. Raises SpecError on --out otherwise."""
    out = Path(out)
    try:
        info = os.stat(out)    # follows a symlink the user named as DIR itself
    except FileNotFoundError:
        return OutDir(out, frozenset(), frozenset())
    except OSError as exc:
        raise _refuse(out, f"a directory aicluster can use ({exc.strerror})") from None
    if not stat.S_ISDIR(info.st_mode):
        raise _refuse(out, "a directory for the plan's files (this is a file; name a directory)")
    try:
        entries = _inventory(out)
        previous = _previous_files(out)
    except OSError as exc:
        raise _refuse(out, f"a directory aicluster can read ({exc.strerror})") from None
    if entries is None:
        raise _refuse(out, f"an empty directory or one an earlier `aicluster plan --out` wrote (this one holds "
                           f"more than {_MAX_ENTRIES:,} entries)")
    leftovers = {e for e, is_dir in entries.items() if not is_dir and e.rsplit("/", 1)[-1].startswith(_TMP_PREFIX)}
    ours = set(previous or ()) | {MANIFEST} | leftovers
    ours_dirs = {"/".join(p.split("/")[:k]) for p in ours for k in range(1, p.count("/") + 1)}
    unknown = sorted(e for e, is_dir in entries.items() if e not in ours and e not in ours_dirs)
    if unknown:
        what = "an earlier plan's" if previous is not None else "no plan's"
        raise _refuse(out, f"an empty directory or one an earlier `aicluster plan --out` wrote: it holds "
                           f"{unknown[0]}{f' and {len(unknown) - 1} more' if len(unknown) > 1 else ''}, not among "
                           f"{what} files; aicluster never deletes what it did not write (move them, or choose "
                           "another --out)")
    return OutDir(out, frozenset(previous or ()), frozenset(leftovers))


def _inventory(out: Path) -> dict[str, bool] | None:
    """Every entry below DIR (relative path -> is a real directory), symlinks never followed;
    None past _MAX_ENTRIES."""
    found: dict[str, bool] = {}
    folders = [("", out)]
    while folders:
        prefix, folder = folders.pop()
        with os.scandir(folder) as it:
            for entry in it:
                rel = f"{prefix}{entry.name}"
                is_dir = entry.is_dir(follow_symlinks=False)
                found[rel] = is_dir
                if len(found) > _MAX_ENTRIES:
                    return None
                if is_dir:
                    folders.append((rel + "/", Path(entry.path)))
    return found


def _read_small(dir_path: Path, name: str) -> str | None:
    """A regular file directly in DIR, never through a symlink; None when it is not one."""
    try:
        fd = os.open(dir_path / name, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, limits.FILE_BYTES.value * 16)   # plan.json of a large cluster is a few MiB
        return data.decode("utf-8", errors="replace")
    finally:
        os.close(fd)


def _previous_files(out: Path) -> list[str] | None:
    """The files an earlier plan wrote in DIR, from its manifest (or plan.json's list, from before
    the manifest), or None when DIR holds no earlier plan."""
    for name, key in ((MANIFEST, "files"), ("plan.json", "files")):
        text = _read_small(out, name)
        if text is None:
            continue
        try:
            doc = json.loads(text)
        except ValueError:
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
            continue
        if name == MANIFEST and doc.get("written_by") != "aicluster plan --out":
            continue
        if name == "plan.json" and not {"stack", "plan"} <= set(doc):
            continue
        files = [f for f in doc[key] if isinstance(f, str) and _safe_parts(f)]
        return files + ([] if name == MANIFEST else ["plan.json"])
    return None


def _safe_parts(relative: str) -> list[str] | None:
    """'slurm/slurm.conf' -> ['slurm', 'slurm.conf']; None for anything that could leave DIR."""
    parts = relative.split("/")
    if not relative or any(p in ("", ".", "..") or "\0" in p or os.sep in p or (os.altsep and os.altsep in p)
                           for p in parts):
        return None
    return parts


class _Tree:
    """Folders below DIR opened one level at a time, relative to their parent, never through a
    symlink; closed together."""

    def __init__(self, root_fd: int):
        self.fds: dict[tuple[str, ...], int] = {(): root_fd}

    def folder(self, parts: tuple[str, ...], create: bool) -> int | None:
        if parts in self.fds:
            return self.fds[parts]
        parent = self.folder(parts[:-1], create)
        if parent is None:
            return None
        name = parts[-1]
        if create:
            try:
                os.mkdir(name, 0o777, dir_fd=parent)
            except FileExistsError:
                pass
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            if not create:
                return None
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                raise
            # A symlink or a file where a folder goes (an earlier plan's: prepare() checked):
            # remove that entry itself, never what it points to, and make the folder.
            os.unlink(name, dir_fd=parent)
            os.mkdir(name, 0o777, dir_fd=parent)
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        self.fds[parts] = fd
        return fd

    def close(self) -> None:
        for parts, fd in self.fds.items():
            if parts:
                os.close(fd)


def _write_file(folder: int, name: str, data: bytes) -> None:
    tmp = f"{_TMP_PREFIX}{secrets.token_hex(8)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o666,
                 dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)   # replaces a symlink, never follows it
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=folder)
        except OSError:
            pass
        raise


def write_tree(target: OutDir | Path, files: dict[str, str]) -> list[Path]:
    """Write `files` (relative '/'-separated path -> text) into DIR as described above; returns the
    paths written. SpecError on --out for a DIR it may not use."""
    out = target if isinstance(target, OutDir) else prepare(Path(target))
    paths = {}
    for relative in files:
        parts = _safe_parts(relative)
        if parts is None or relative == MANIFEST:
            raise _refuse(out.path, f"a folder for files with relative paths ({relative!r} is not one)")
        paths[relative] = parts
    try:
        out.path.mkdir(parents=True, exist_ok=True)
        root = os.open(out.path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _refuse(out.path, f"a directory aicluster can create and write ({exc.strerror})") from None
    tree = _Tree(root)
    try:
        # The manifest first lists every file this run may leave behind, then exactly this plan's.
        _write_manifest(root, sorted(set(files) | out.previous))
        for relative, parts in paths.items():
            _write_file(tree.folder(tuple(parts[:-1]), create=True), parts[-1], files[relative].encode("utf-8"))
        _remove(tree, (out.previous - set(files)) | out.leftovers, keep=set(files))
        _write_manifest(root, sorted(files))
    except OSError as exc:
        raise _refuse(out.path, f"a directory aicluster can write ({exc.strerror}: {exc.filename or ''})") from None
    finally:
        tree.close()
        os.close(root)
    return [out.path / relative for relative in files]


def _write_manifest(root: int, files: list[str]) -> None:
    doc = {"written_by": "aicluster plan --out", "files": files,
           "note": "aicluster removes these files when it writes another plan here; it never touches others"}
    _write_file(root, MANIFEST, (json.dumps(doc, indent=2) + "\n").encode("utf-8"))


def _remove(tree: _Tree, stale: set[str], keep: set[str]) -> None:
    """Remove files of an earlier plan (unlink: a symlink goes, its target stays), then the folders
    that held only them."""
    kept_dirs = {tuple(p.split("/")[:k]) for p in keep for k in range(1, p.count("/") + 1)}
    folders: set[tuple[str, ...]] = set()
    for relative in sorted(stale):
        parts = _safe_parts(relative)
        if parts is None:
            continue
        folder = tree.folder(tuple(parts[:-1]), create=False)
        if folder is None:
            continue
        try:
            os.unlink(parts[-1], dir_fd=folder)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            continue
        except OSError as exc:
            if exc.errno not in (errno.EISDIR, errno.EPERM):
                raise
            continue
        folders.update(tuple(parts[:k]) for k in range(1, len(parts)))
    for parts in sorted(folders - kept_dirs, key=len, reverse=True):
        parent = tree.folder(parts[:-1], create=False)
        if parent is None:
            continue
        try:
            os.rmdir(parts[-1], dir_fd=parent)
        except OSError:   # not empty (or gone): leave it
            pass
