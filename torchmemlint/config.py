"""Settings: ``[tool.torchmemlint]`` in pyproject.toml, overridden by command-line options."""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on older Pythons only
    import tomli as tomllib

from torchmemlint.rules import all_rules

DEFAULT_EXCLUDES = (
    ".*",  # hidden: .git, .venv, .tox, .mypy_cache ...
    "__pycache__",
    "venv",
    "env",
    "build",
    "dist",
    "site-packages",
    "node_modules",
    "*.egg-info",
)

_SELECTOR = re.compile(r"^(ALL|TML\d{0,3})$")


class ConfigError(Exception):
    """A bad setting; the message names the key. Exit code 2."""


@dataclass(frozen=True)
class Settings:
    select: Optional[Tuple[str, ...]] = None  # None: the rules that are on by default
    extend_select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()
    exclude: Tuple[str, ...] = DEFAULT_EXCLUDES
    extend_exclude: Tuple[str, ...] = ()
    per_file_ignores: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    options: Tuple[Tuple[str, Any], ...] = ()
    root: str = "."  # directory the globs are relative to (the config file's directory)
    config_path: Optional[str] = None

    def for_path(self, path: str) -> "Settings":
        """One Settings for every path (see Resolver, which finds each path's own)."""
        return self

    def with_overrides(self, **overrides: Any) -> "Settings":
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    # -- rule selection ---------------------------------------------------------------------
    def enabled_codes(self) -> FrozenSet[str]:
        registry = all_rules()
        if self.select is None:
            enabled = {code for code, rule in registry.items() if rule.default_enabled}
        else:
            enabled = set(expand_selectors(self.select, "select"))
        enabled |= set(expand_selectors(self.extend_select, "extend-select"))
        enabled -= set(expand_selectors(self.ignore, "ignore"))
        return frozenset(enabled)

    def codes_for_file(self, path: str) -> FrozenSet[str]:
        codes = self.enabled_codes()
        relative = self.relative(path)
        for pattern, selectors in self.per_file_ignores:
            if matches(pattern, relative):
                codes -= set(expand_selectors(selectors, "per-file-ignores"))
        return codes

    # -- paths ----------------------------------------------------------------------------
    def relative(self, path: str) -> str:
        absolute = os.path.abspath(path)
        root = os.path.abspath(self.root)
        try:
            return Path(os.path.relpath(absolute, root)).as_posix()
        except ValueError:  # another drive on Windows
            return Path(absolute).as_posix()

    def is_excluded(self, path: str) -> bool:
        relative = self.relative(path)
        return any(matches(p, relative) for p in (*self.exclude, *self.extend_exclude))

    def option_values(self) -> Dict[str, Any]:
        values = {o.name: o.default for rule in all_rules().values() for o in rule.options}
        values.update(dict(self.options))
        return values


def matches(pattern: str, relative_path: str) -> bool:
    """Glob match against the last path component, or the whole path for patterns with "/".

    Paths outside the project root (starting with "..") only match by their last component.
    """
    name = relative_path.rsplit("/", 1)[-1]
    if fnmatch.fnmatchcase(name, pattern):
        return True
    if "/" in pattern and not relative_path.startswith("../"):
        return fnmatch.fnmatchcase(relative_path, pattern.rstrip("/"))
    return False


def expand_selectors(selectors: Iterable[str], key: str) -> List[str]:
    registry = all_rules()
    codes: List[str] = []
    for selector in selectors:
        selector = selector.strip().upper()
        if not selector:
            continue
        if not _SELECTOR.match(selector):
            raise ConfigError(f"{key}: unknown rule selector '{selector}'")
        prefix = "" if selector == "ALL" else selector
        chosen = [code for code in registry if code.startswith(prefix)]
        if not chosen:
            raise ConfigError(f"{key}: unknown rule selector '{selector}'")
        codes.extend(chosen)
    return codes


def split_selectors(values: Sequence[str]) -> Tuple[str, ...]:
    """CLI values may repeat and hold comma-separated lists."""
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


# -- configuration files ---------------------------------------------------------------------
CONFIG_NAMES = ("torchmemlint.toml", "pyproject.toml")  # in this order within one directory
_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)$")


def _parse_toml(path: str) -> Tuple[str, Dict[str, Any]]:
    """The file's text and data; ConfigError "PATH:LINE: invalid TOML: ..." when it is broken."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read: {error}") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        position = _TOML_POSITION.search(message)
        if position:
            line = int(position.group(1))
            message = message[: position.start()].rstrip()
        else:  # "(at end of document)"
            line = max(1, len(text.splitlines()))
            message = message.replace(" (at end of document)", " at the end of the file")
        raise ConfigError(f"{path}:{line}: invalid TOML: {message}") from None


def _config_in(directory: Path) -> Optional[str]:
    """This directory's configuration file, if it has one.

    A ``torchmemlint.toml`` always counts; a ``pyproject.toml`` counts when it has a
    ``[tool.torchmemlint]`` table. A pyproject.toml that is not valid TOML is an error: it may
    hold the settings, and dropping them silently would lint with the wrong ones.
    """
    for name in CONFIG_NAMES:
        candidate = directory / name
        if not candidate.is_file():
            continue
        if name != "pyproject.toml":
            return str(candidate)
        _, data = _parse_toml(str(candidate))
        tool = data.get("tool", {})
        if isinstance(tool, dict) and "torchmemlint" in tool:
            return str(candidate)
    return None


def find_config(start: str) -> Optional[str]:
    """The closest configuration file at or above ``start`` (a file or a directory)."""
    directory = Path(start).resolve()
    if directory.is_file():
        directory = directory.parent
    for candidate_dir in (directory, *directory.parents):
        found = _config_in(candidate_dir)
        if found is not None:
            return found
    return None


def load_settings(config_path: Optional[str]) -> Settings:
    """Settings from a pyproject.toml (or a torchmemlint.toml with top-level keys)."""
    if config_path is None:
        return Settings(root=os.getcwd())
    text, data = _parse_toml(config_path)
    if Path(config_path).name == "pyproject.toml":
        table = data.get("tool", {}).get("torchmemlint", {})
    else:
        table = data.get("tool", {}).get("torchmemlint", data)
    root = str(Path(config_path).resolve().parent)
    if not isinstance(table, dict):
        raise ConfigError(f"{config_path}: [tool.torchmemlint] must be a table")
    try:
        return settings_from_table(table, root, config_path)
    except _ValueError as error:
        line = _line_of_key(text, error.key)
        where = f"{config_path}:{line}" if line else config_path
        raise ConfigError(f"{where}: {error.message}") from None


class _ValueError(Exception):
    """A bad value under ``key``; load_settings adds the file and line."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


def _line_of_key(text: str, key: str) -> Optional[int]:
    """The first row that assigns ``key`` (bare or quoted) or opens a table named by it."""
    quoted = re.escape(key)
    pattern = re.compile(
        rf"^\s*(?:[\w.\"'-]*\.)?[\"']?{quoted}[\"']?\s*=|^\s*\[[^\]]*\b{quoted}\b[^\]]*\]\s*$"
    )
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.search(line):
            return number
    return None


_LIST_KEYS = {
    "select": "select",
    "extend-select": "extend_select",
    "ignore": "ignore",
    "exclude": "exclude",
    "extend-exclude": "extend_exclude",
}
_TABLE_KEYS = {"per-file-ignores", "options", "profile"}


def settings_from_table(table: Mapping[str, Any], root: str, config_path: str) -> Settings:
    """Settings from a ``[tool.torchmemlint]`` table; raises _ValueError naming the key."""
    values: Dict[str, Any] = {"root": root, "config_path": config_path}
    for key, value in table.items():
        if key in _LIST_KEYS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise _ValueError(key, f"'{key}' must be a list of strings")
            values[_LIST_KEYS[key]] = tuple(value)
        elif key == "per-file-ignores":
            values["per_file_ignores"] = _per_file_ignores(value)
        elif key == "options":
            values["options"] = tuple(sorted(_rule_options(value).items()))
        elif key in _TABLE_KEYS:
            continue  # read by the surface that owns it (the dynamic mode's [profile])
        else:
            raise _ValueError(key, f"unknown key '{key}' in [tool.torchmemlint]")
    settings = Settings(**values)
    # Validate selectors now, so a typo fails with the key's name even if no file is linted.
    for key, selectors in (
        ("select", settings.select or ()),
        ("extend-select", settings.extend_select),
        ("ignore", settings.ignore),
    ):
        try:
            expand_selectors(selectors, key)
        except ConfigError as error:
            raise _ValueError(key, str(error)) from None
    return settings


def _per_file_ignores(value: Any) -> Tuple[Tuple[str, Tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise _ValueError("per-file-ignores", "'per-file-ignores' must be a table of glob = [codes]")
    pairs = []
    for pattern, selectors in value.items():
        if not isinstance(selectors, list) or not all(isinstance(s, str) for s in selectors):
            raise _ValueError(
                pattern, f"per-file-ignores '{pattern}' must be a list of rule selectors"
            )
        try:
            expand_selectors(selectors, f"per-file-ignores '{pattern}'")
        except ConfigError as error:
            raise _ValueError(pattern, str(error)) from None
        pairs.append((pattern, tuple(selectors)))
    return tuple(pairs)


def _rule_options(value: Any) -> Dict[str, Any]:
    if not isinstance(value, dict):
        raise _ValueError("options", "'options' must be a table")
    known = {o.name: o for rule in all_rules().values() for o in rule.options}
    parsed: Dict[str, Any] = {}
    for name, raw in value.items():
        if name not in known:
            raise _ValueError(name, f"unknown option 'options.{name}'")
        try:
            parsed[name] = coerce_option(known[name], raw, f"options.{name}")
        except ConfigError as error:
            raise _ValueError(name, str(error)) from None
    return parsed


def coerce_option(option: Any, raw: Any, where: str) -> Any:
    """Check a raw option value (TOML or a flake8 string) against the option's type."""
    expected = option.type
    if expected is bool and isinstance(raw, str):
        words = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
        if raw.strip().lower() not in words:
            raise ConfigError(f"{where}: expected true or false, got '{raw}'")
        raw = words[raw.strip().lower()]
    if isinstance(raw, str) and expected is not str:
        try:
            raw = expected(raw)
        except ValueError:
            raise ConfigError(f"{where}: expected {expected.__name__}, got '{raw}'") from None
    if expected is int and (isinstance(raw, bool) or not isinstance(raw, int)):
        raise ConfigError(f"{where}: expected an integer, got {raw!r}")
    if not isinstance(raw, expected):
        raise ConfigError(f"{where}: expected {expected.__name__}, got {raw!r}")
    if expected is int and raw < 0:
        raise ConfigError(f"{where}: must not be negative, got {raw}")
    return raw


def resolve_settings(
    config: Optional[str], isolated: bool, start: str, overrides: Mapping[str, Any]
) -> Settings:
    """Pick the config (explicit, closest to ``start``, or none with --isolated); apply overrides."""
    return Resolver(config, isolated, overrides).for_path(start)


class Resolver:
    """Settings for each path, as Ruff finds them: the closest configuration file above it.

    ``--config`` (``config``) names one file for every path and ``--isolated`` ignores them
    all; command-line ``overrides`` apply on top of whichever file governs a path. Directories
    and loaded files are cached, so a tree of thousands of files reads each config once. A
    path governed by no file gets the defaults, relative to the working directory.

    ``Settings`` has the same ``for_path`` (returning itself), so code that walks files can
    take either one.
    """

    def __init__(
        self,
        config: Optional[str] = None,
        isolated: bool = False,
        overrides: Optional[Mapping[str, Any]] = None,
        cwd: Optional[str] = None,
    ) -> None:
        self.config = config
        self.isolated = isolated
        self.overrides = dict(overrides or {})
        self.cwd = cwd or os.getcwd()
        self._by_directory: Dict[str, Optional[str]] = {}
        self._by_config: Dict[Optional[str], Settings] = {}

    def config_for(self, path: str) -> Optional[str]:
        """The file that governs ``path`` (None: defaults). Raises ConfigError for a broken one."""
        if self.isolated:
            return None
        if self.config is not None:
            return self.config
        absolute = Path(os.path.abspath(os.path.join(self.cwd, path)))
        directory = absolute if absolute.is_dir() else absolute.parent
        return self._config_of_directory(directory)

    def _config_of_directory(self, directory: Path) -> Optional[str]:
        key = str(directory)
        if key not in self._by_directory:
            found = _config_in(directory)
            if found is None and directory.parent != directory:
                found = self._config_of_directory(directory.parent)
            self._by_directory[key] = found
        return self._by_directory[key]

    def for_path(self, path: str) -> Settings:
        config = self.config_for(path)
        if config not in self._by_config:
            base = Settings(root=self.cwd) if config is None else load_settings(config)
            settings = base.with_overrides(**self.overrides)
            settings.enabled_codes()  # raises ConfigError for a bad CLI selector
            self._by_config[config] = settings
        return self._by_config[config]

    def configs(self) -> List[str]:
        """The configuration files read so far."""
        return [config for config in self._by_config if config is not None]
