"""The user's folder for the agent command (rl/serve/agent.py): read it into the sandbox's
copy, read the sandbox back, show the change as a unified diff, apply it (--apply) only when every
changed file still holds what was copied."""

from __future__ import annotations

import difflib
import os
import uuid

from model.errors import InputError

# Not part of the repository: version control, caches and build output (the sandbox's list_files
# and rl/envs/repos/spec.py skip the same), on the way in and in the diff.
SKIP_DIRS = {
    ".git",
    "__pycache__",
    ".pytest_cache",
    ".tox",
    ".mypy_cache",
    ".ruff_cache",
    ".venv",
    "venv",
    "node_modules",
    "build",
    "dist",
    ".eggs",
}


def check_folder(path: str) -> None:
    """InputError unless `path` is a folder: checked before anything else starts (the sandbox's
    own start-up check may print a warning, and a bad path must stay one line)."""
    if not os.path.isdir(path):
        what = "does not exist" if not os.path.exists(path) else "is not a folder"
        raise InputError(f"--repo={path} {what} (give the repository's folder)")


def read_repo(path: str, max_bytes: int) -> dict[str, str]:
    """path -> text of the repository's files (symlinks and non-UTF-8 files left out: the sandbox
    takes text), or InputError for a path that is not a folder or files over `max_bytes`."""
    check_folder(path)
    files, total = {}, 0
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            total += os.path.getsize(full)
            if total > max_bytes:
                raise InputError(
                    f"--repo={path} is too large for the sandbox: over {max_bytes} bytes of files "
                    f"(Limits.repo_bytes; config agent.max_repo_bytes)"
                )
            try:
                with open(full, encoding="utf-8") as f:
                    files[os.path.relpath(full, path)] = f.read()
            except UnicodeDecodeError:
                continue
    return files


def sandbox_files(sandbox) -> dict[str, str]:
    out = {}
    for rel in sandbox.list_files():
        if SKIP_DIRS & set(rel.split(os.sep)[:-1]) or rel.endswith(".pyc"):
            continue
        try:
            out[rel] = sandbox.read_text(rel)
        except (OSError, ValueError):  # a link, a special or binary file the agent made: not text
            continue
    return out


def _lines(text: str | None) -> list[str]:
    lines = (text or "").splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):  # as git shows it
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def unified_diff(before: dict[str, str], after: dict[str, str]) -> str:
    """git-style unified diff of every file that differs (added: from /dev/null; deleted: to)."""
    out = []
    for path in sorted(set(before) | set(after)):
        a, b = before.get(path), after.get(path)
        if a == b:
            continue
        out += difflib.unified_diff(
            _lines(a),
            _lines(b),
            fromfile=f"a/{path}" if a is not None else "/dev/null",
            tofile=f"b/{path}" if b is not None else "/dev/null",
        )
    return "".join(out)


def apply_change(repo: str, before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Writes the sandbox's changes into the user's folder: every changed file must still hold
    what was copied (else InputError and nothing is written); paths stay inside the folder.
    -> the paths written or deleted."""
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    root = os.path.realpath(repo)
    for path in changed:
        full = os.path.realpath(os.path.join(root, path))
        if os.path.commonpath([root, full]) != root:
            raise InputError(f"{path}: outside --repo={repo}; nothing applied")
        now = _read(full)
        if now != before.get(path):
            raise InputError(
                f"{os.path.join(repo, path)} changed while the agent ran; nothing applied"
            )
    for path in changed:
        full = os.path.join(root, path)
        if after.get(path) is None:
            os.remove(full)
            continue
        os.makedirs(os.path.dirname(full), exist_ok=True)
        tmp = f"{full}.agent-{uuid.uuid4().hex[:8]}"
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(after[path])
        if os.path.exists(full):
            os.chmod(tmp, os.stat(full).st_mode & 0o7777)
        os.replace(tmp, full)  # whole or not at all
    return changed


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return "\0unreadable"  # never equal to a copied text: refuses the apply
