"""Output directories that never lose a user's data: check first, stage, commit, record.

Every folder ptxsim writes (`ptxsim run`, `report`, `compare`, `reports.write_report`,
`reports.compare.write_compare`) goes through `write_output_dir(path, write)`:

1. **Check** (`check_output_dir`, also called by the commands before they simulate, so a
   refused folder costs no simulation). `path` is accepted when it does not exist, is an
   empty directory, or is a directory every entry of which is listed in its ptxsim
   manifest (`.ptxsim-manifest.json`: the files an earlier ptxsim write put there). A
   directory holding anything else is refused unless `force`; with `force`, ptxsim writes
   its files beside the others, refusing when one of its file names is taken by a file
   the manifest does not list. A path that exists and is not a directory is refused.
2. **Stage**: `write(staging)` fills a fresh hidden folder marked as ptxsim's
   (`.ptxsim-staging.<name>.<pid>.<random>` holding a `.ptxsim-staging` file with the
   writer's pid), beside `path` when `path` is new or entirely ptxsim's, inside it
   otherwise. A failure removes the staging folder and leaves `path` as it was.
3. **Commit**: a new or empty `path` is the staging folder renamed (one atomic rename);
   a folder entirely ptxsim's is swapped with the staging folder (two renames) and the old
   files removed; with `force`, each file is moved in with `os.replace` (atomic per file),
   files the old manifest listed and the new write lacks are removed, and the manifest is
   written last. Nothing the manifest does not list is ever removed or replaced.
4. **Clean up**: staging folders that a killed run left (marked, and their pid no longer
   running) beside or inside `path` are removed at the next check. Unmarked folders are
   never touched.

Re-runs: a writer that passes `content` (a digest of everything its files are made from,
e.g. `reports.writer.report_digest`) has it recorded in the manifest with each file's
SHA-256. `output_unchanged(path, content)` is true when `path` holds a committed write of
the same `content` whose listed files are all present with the recorded hashes; the caller
then keeps the folder as it is instead of writing it again (nothing is staged or replaced).

Left out: fsync of files and folders (a kill loses nothing; a power cut may lose the
newest write), two writers racing for one folder (the second rename fails with an error).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path

from isa.errors import InputError

MANIFEST_NAME = ".ptxsim-manifest.json"
MANIFEST_FORMAT = "ptxsim-output/1"
STAGING_PREFIX = ".ptxsim-staging."
STAGING_MARK = ".ptxsim-staging"


def _manifest(folder: Path) -> dict | None:
    """`folder`'s manifest, or None when it has no valid one (its `files` a list of plain
    file names)."""
    try:
        doc = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list) or doc.get("format") != MANIFEST_FORMAT:
        return None
    if not all(isinstance(f, str) and f and "/" not in f and f not in (".", "..")
               for f in files):
        return None
    return doc


def _manifest_files(folder: Path) -> set[str] | None:
    """The file names `folder`'s manifest lists, or None when it has no valid manifest."""
    doc = _manifest(folder)
    return None if doc is None else set(doc["files"])


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_dead_staging(entry: Path) -> bool:
    """A marked staging folder whose writer is no longer running."""
    if not (entry.name.startswith(STAGING_PREFIX) and entry.is_dir()
            and not entry.is_symlink()):
        return False
    try:
        pid = int((entry / STAGING_MARK).read_text().strip())
    except (OSError, ValueError):
        return False
    return not _pid_running(pid)


def clean_stale_staging(folder: Path) -> list[Path]:
    """Remove the staging folders dead ptxsim runs left in `folder`; returns them."""
    removed = []
    if not folder.is_dir():
        return removed
    for entry in folder.iterdir():
        if _is_dead_staging(entry):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _user_entries(target: Path) -> list[str]:
    """Entries of an existing directory that no ptxsim manifest of it lists."""
    ours = _manifest_files(target) or set()
    return sorted(e.name for e in target.iterdir()
                  if e.name != MANIFEST_NAME and e.name not in ours
                  and not e.name.startswith(STAGING_PREFIX))


def check_output_dir(path: str | Path, *, force: bool = False, flag: str = "--out") -> Path:
    """`path` as a Path if a ptxsim output may be written there (module docstring, step
    1), else an InputError naming `flag`, the path and what is accepted. Removes staging
    folders dead runs left beside or inside it."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise InputError(f"{flag} {path}: exists and is not a directory; give a new folder "
                         "path (ptxsim never replaces a file it did not write)")
    if target.is_symlink():
        raise InputError(f"{flag} {path}: is a symbolic link; give the folder itself")
    parent = target.resolve().parent
    existing = next(p for p in (target.resolve(), *target.resolve().parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path}: cannot write there ({existing} is not a folder "
                         "this user may write to); give a folder you can write")
    clean_stale_staging(parent)
    if target.is_dir():
        clean_stale_staging(target)
        user = _user_entries(target)
        if user and not force:
            shown = ", ".join(user[:5]) + (", ..." if len(user) > 5 else "")
            raise InputError(f"{flag} {path}: the folder holds files ptxsim did not write "
                             f"({shown}); give a new or empty folder, or add --force to "
                             "write ptxsim's files beside them (nothing else is touched)")
    return target


def _check_names(target: Path, names: set[str], flag: str, path) -> None:
    """With force: refuse when a file to write has the name of one ptxsim did not write."""
    ours = _manifest_files(target) or set()
    taken = sorted(n for n in names if (target / n).exists() and n not in ours)
    if taken:
        raise InputError(f"{flag} {path}: would replace {', '.join(taken)}, which ptxsim "
                         "did not write; move them away or give another folder")


def _new_staging(where: Path, name: str) -> Path:
    staging = where / f"{STAGING_PREFIX}{name or 'out'}.{os.getpid()}.{secrets.token_hex(4)}"
    staging.mkdir(mode=0o755)
    (staging / STAGING_MARK).write_text(str(os.getpid()))
    return staging


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_manifest(folder: Path, names: list[str], content: str | None = None,
                    hashes: dict[str, str] | None = None) -> None:
    doc = {"format": MANIFEST_FORMAT, "files": names}
    if content is not None:
        doc.update(content=content, sha256=hashes)
    tmp = folder / (MANIFEST_NAME + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    os.replace(tmp, folder / MANIFEST_NAME)


def output_unchanged(path: str | Path, content: str) -> bool:
    """Whether `path` holds a committed ptxsim write of `content` with every file it listed
    present and unmodified (the module docstring, "Re-runs")."""
    target = Path(path)
    doc = _manifest(target)
    if doc is None or doc.get("content") != content or not isinstance(doc.get("sha256"), dict):
        return False
    hashes = doc["sha256"]
    if set(hashes) != set(doc["files"]):
        return False
    for name, expected in hashes.items():
        file = target / name
        if file.is_symlink() or not file.is_file() or _sha256(file) != expected:
            return False
    return True


def _written(staging: Path) -> list[str]:
    names = sorted(e.name for e in staging.iterdir()
                   if e.name not in (STAGING_MARK, MANIFEST_NAME))
    for name in names:
        if not (staging / name).is_file():
            raise RuntimeError(f"output writer made {name!r}, not a plain file")
    return names


def _swappable(target: Path) -> bool:
    """Whether `target` is committed by renaming a whole folder: it is new, or entirely
    ptxsim's, not the working directory, and its parent takes new entries."""
    if target.exists() and (_user_entries(target) or target.resolve() == Path.cwd().resolve()):
        return False
    parent = target.resolve().parent
    return not parent.exists() or os.access(parent, os.W_OK | os.X_OK)


def _restore(retired: Path, target: Path) -> None:
    """Put the earlier run's files back after a failed swap."""
    target.mkdir(exist_ok=True)
    for entry in retired.iterdir():
        if entry.name != STAGING_MARK and not (target / entry.name).exists():
            os.replace(entry, target / entry.name)


def write_output_dir(path: str | Path, write: Callable[[Path], None], *, force: bool = False,
                     flag: str = "--out", content: str | None = None) -> Path:
    """Stage `write(folder)` and commit it to `path` (module docstring); returns `path`.
    `write` must put plain files (no subfolders) into the folder it is given; `content`,
    when given, is recorded in the manifest with the files' hashes (`output_unchanged`)."""
    target = check_output_dir(path, force=force, flag=flag)
    swap = _swappable(target)
    where = target.resolve().parent if swap else target
    where.mkdir(parents=True, exist_ok=True)
    staging = _new_staging(where, target.resolve().name)
    retired, committed = None, False
    try:
        write(staging)
        names = _written(staging)
        (staging / STAGING_MARK).unlink()
        hashes = ({name: _sha256(staging / name) for name in names}
                  if content is not None else None)
        if swap:
            _write_manifest(staging, names, content, hashes)
            if target.is_dir():
                retired = _new_staging(where, target.resolve().name + ".old")
                for name in [*(_manifest_files(target) or ()), MANIFEST_NAME]:
                    if (target / name).is_file():
                        os.replace(target / name, retired / name)
                target.rmdir()   # empty now: every entry was ptxsim's
            staging.rename(target)
        else:
            _check_names(target, set(names), flag, path)
            old = _manifest_files(target) or set()
            for name in names:
                os.replace(staging / name, target / name)
            for name in sorted(old - set(names)):
                (target / name).unlink(missing_ok=True)
            _write_manifest(target, names, content, hashes)
            staging.rmdir()
        committed = True
    finally:
        if not committed:
            shutil.rmtree(staging, ignore_errors=True)
            if retired is not None:
                _restore(retired, target)
        if retired is not None:
            shutil.rmtree(retired, ignore_errors=True)
    return target
