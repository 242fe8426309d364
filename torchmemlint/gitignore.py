"""Which paths git ignores, as Ruff's discovery reads them (``respect-gitignore``).

Inside a git repository (a directory above holds ``.git``), a path is ignored when the last
pattern that matches it says so, reading in git's order of precedence: the global excludes
file (``core.excludesFile`` in the user's git configuration, else
``$XDG_CONFIG_HOME/git/ignore``), ``.git/info/exclude``, then each ``.gitignore`` from the
repository root down to the path's directory (a deeper file overrides a shallower one). The
walk does not enter an ignored directory, so what is inside one stays out, as git cannot take
it back; a directory named on the command line is walked all the same. Outside a repository
nothing is ignored (as Ruff: ``.gitignore`` files count only in a git repository). The
patterns are matched by ``pathspec``'s ``GitIgnoreSpec``, which replicates git's own rules.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pathspec

_Layer = Tuple[str, "pathspec.GitIgnoreSpec"]  # (directory the patterns are relative to, spec)


def _read_spec(path: str) -> Optional["pathspec.GitIgnoreSpec"]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
    except Exception:  # git skips a pattern it cannot read; so do we
        return pathspec.GitIgnoreSpec.from_lines(line for line in lines if _valid(line))


def _valid(line: str) -> bool:
    try:
        pathspec.GitIgnoreSpec.from_lines([line])
    except Exception:
        return False
    return True


def _git_config_excludes_file() -> Optional[str]:
    """``core.excludesFile`` from the user's git configuration, or git's default place."""
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    configured: Optional[str] = None
    for config in (os.path.join(xdg, "git", "config"), os.path.join(home, ".gitconfig")):
        try:
            with open(config, encoding="utf-8", errors="replace") as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        section = ""
        for line in lines:
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]").strip().lower()
            elif section == "core" and "=" in line and not line.startswith(("#", ";")):
                key, _, value = line.partition("=")
                value = value.split(" #")[0].split(" ;")[0].strip().strip('"')
                if key.strip().lower() == "excludesfile" and value:
                    configured = value  # ~/.gitconfig, read last, wins
    if configured is not None:
        return os.path.expanduser(configured)
    return os.path.join(xdg, "git", "ignore")


def _git_directory(dot_git: str) -> Optional[str]:
    """The directory that holds ``info/exclude``: ``.git`` itself, or for a linked worktree
    (a ``.git`` file, ``gitdir: PATH``) the repository's common directory."""
    if os.path.isdir(dot_git):
        return dot_git
    try:
        with open(dot_git, encoding="utf-8") as handle:
            line = handle.readline().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = os.path.join(os.path.dirname(dot_git), line[len("gitdir:"):].strip())
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as handle:
            return os.path.normpath(os.path.join(gitdir, handle.readline().strip()))
    except (OSError, UnicodeDecodeError):
        return gitdir


class GitIgnore:
    """Answers ``ignored(path, is_dir)``; reads each ignore file once per run."""

    def __init__(self) -> None:
        self._repo_of: Dict[str, Optional[str]] = {}
        self._layers_of: Dict[str, List[_Layer]] = {}
        self._global: Optional[List[_Layer]] = None

    def _repository(self, directory: str) -> Optional[str]:
        if directory not in self._repo_of:
            if os.path.exists(os.path.join(directory, ".git")):
                found: Optional[str] = directory
            else:
                parent = os.path.dirname(directory)
                found = None if parent == directory else self._repository(parent)
            self._repo_of[directory] = found
        return self._repo_of[directory]

    def _base_layers(self, repository: str) -> List[_Layer]:
        if self._global is None:
            excludes = _git_config_excludes_file()
            spec = _read_spec(excludes) if excludes else None
            self._global = [("", spec)] if spec is not None else []
        layers = [(repository, spec) for _, spec in self._global]
        git = _git_directory(os.path.join(repository, ".git"))
        if git is not None:
            spec = _read_spec(os.path.join(git, "info", "exclude"))
            if spec is not None:
                layers.append((repository, spec))
        return layers

    def _layers(self, directory: str, repository: str) -> List[_Layer]:
        """Every layer that applies to the entries of ``directory``, lowest precedence first."""
        if directory not in self._layers_of:
            if directory == repository:
                layers = self._base_layers(repository)
            else:
                layers = list(self._layers(os.path.dirname(directory), repository))
            spec = _read_spec(os.path.join(directory, ".gitignore"))
            if spec is not None:
                layers.append((directory, spec))
            self._layers_of[directory] = layers
        return self._layers_of[directory]

    def _matches(self, path: str, is_dir: bool, repository: str) -> bool:
        verdict: Optional[bool] = None
        parent = os.path.dirname(path)
        for base, spec in self._layers(parent, repository):
            relative = Path(os.path.relpath(path, base)).as_posix() + ("/" if is_dir else "")
            result = spec.check_file(relative)
            if result.include is None:
                continue
            if parent != base and os.path.dirname(relative.rstrip("/")):
                # A pattern that names the directory this entry is in (`build/` for
                # build/x.py) matched it as a descendant: that directory was not pruned, so it
                # is the walk's root or above it, which the user named; the entry stays.
                above = Path(os.path.relpath(parent, base)).as_posix() + "/"
                if spec.check_file(above).index == result.index:
                    continue
            verdict = result.include
        return bool(verdict)

    def ignored(self, path: str, is_dir: Optional[bool] = None) -> bool:
        """Whether git ignores ``path``, an entry met walking a directory: by its own name or
        path, not for lying in an ignored directory (the walk does not enter one, and a
        directory named on the command line is walked even if git ignores it, as Ruff does)."""
        absolute = os.path.abspath(path)
        if is_dir is None:
            is_dir = os.path.isdir(absolute)
        if os.path.basename(absolute) == ".git":
            return True
        repository = self._repository(os.path.dirname(absolute))
        if repository is None:
            return False
        return self._matches(absolute, is_dir, repository)
