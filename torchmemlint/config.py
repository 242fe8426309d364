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


# -- pyproject.toml ----------------------------------------------------------------------------
def find_config(start: str) -> Optional[str]:
    """The nearest pyproject.toml (from ``start`` upwards) that has a [tool.torchmemlint] table."""
    directory = Path(start).resolve()
    if directory.is_file():
        directory = directory.parent
    for candidate_dir in (directory, *directory.parents):
        candidate = candidate_dir / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                continue  # a broken unrelated pyproject is not ours to report unless named
            if "torchmemlint" in data.get("tool", {}):
                return str(candidate)
    return None


def load_settings(config_path: Optional[str]) -> Settings:
    """Settings from a pyproject.toml (or a torchmemlint.toml with top-level keys)."""
    if config_path is None:
        return Settings(root=os.getcwd())
    try:
        text = Path(config_path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read config {config_path}: {error}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{config_path}: invalid TOML: {error}") from None
    if Path(config_path).name == "pyproject.toml":
        table = data.get("tool", {}).get("torchmemlint", {})
    else:
        table = data.get("tool", {}).get("torchmemlint", data)
    root = str(Path(config_path).resolve().parent)
    return settings_from_table(table, root, config_path)


_LIST_KEYS = {
    "select": "select",
    "extend-select": "extend_select",
    "ignore": "ignore",
    "exclude": "exclude",
    "extend-exclude": "extend_exclude",
}
_TABLE_KEYS = {"per-file-ignores", "options", "profile"}


def settings_from_table(table: Mapping[str, Any], root: str, config_path: str) -> Settings:
    values: Dict[str, Any] = {"root": root, "config_path": config_path}
    for key, value in table.items():
        if key in _LIST_KEYS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{config_path}: '{key}' must be a list of strings")
            values[_LIST_KEYS[key]] = tuple(value)
        elif key == "per-file-ignores":
            values["per_file_ignores"] = _per_file_ignores(value, config_path)
        elif key == "options":
            values["options"] = tuple(sorted(_rule_options(value, config_path).items()))
        elif key in _TABLE_KEYS:
            continue  # read by the surface that owns it (the dynamic mode's [profile])
        else:
            raise ConfigError(f"{config_path}: unknown key '{key}' in [tool.torchmemlint]")
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
            raise ConfigError(f"{config_path}: {error}") from None
    return settings


def _per_file_ignores(value: Any, config_path: str) -> Tuple[Tuple[str, Tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"{config_path}: 'per-file-ignores' must be a table of glob = [codes]")
    pairs = []
    for pattern, selectors in value.items():
        if not isinstance(selectors, list) or not all(isinstance(s, str) for s in selectors):
            raise ConfigError(
                f"{config_path}: per-file-ignores '{pattern}' must be a list of rule selectors"
            )
        try:
            expand_selectors(selectors, f"per-file-ignores '{pattern}'")
        except ConfigError as error:
            raise ConfigError(f"{config_path}: {error}") from None
        pairs.append((pattern, tuple(selectors)))
    return tuple(pairs)


def _rule_options(value: Any, config_path: str) -> Dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{config_path}: 'options' must be a table")
    known = {o.name: o for rule in all_rules().values() for o in rule.options}
    parsed: Dict[str, Any] = {}
    for name, raw in value.items():
        if name not in known:
            raise ConfigError(f"{config_path}: unknown option 'options.{name}'")
        parsed[name] = coerce_option(known[name], raw, f"{config_path}: options.{name}")
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
    """Pick the config (explicit, nearest, or none with --isolated) and apply CLI overrides."""
    if isolated:
        settings = Settings(root=os.getcwd())
    else:
        settings = load_settings(config if config is not None else find_config(start))
    settings = settings.with_overrides(**overrides)
    settings.enabled_codes()  # raises ConfigError for a bad CLI selector
    return settings

