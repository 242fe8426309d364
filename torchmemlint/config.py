"""Settings: ``[tool.torchmemlint]`` in pyproject.toml, overridden by command-line options."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on older Pythons only
    import tomli as tomllib

import pathspec

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
    extend_ignore: Tuple[str, ...] = ()
    fixable: Optional[Tuple[str, ...]] = None  # None: every rule's fix may be applied
    unfixable: Tuple[str, ...] = ()
    respect_gitignore: bool = True
    output_format: Optional[str] = None  # None: the command line decides
    extended: Tuple[str, ...] = ()  # the files `extend` brought in, closest first
    extend_per_file_ignores: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()

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
        enabled -= set(expand_selectors(self.extend_ignore, "extend-ignore"))
        return frozenset(enabled)

    def fixable_codes(self) -> FrozenSet[str]:
        """The rules whose fixes --fix may apply (``fixable`` minus ``unfixable``)."""
        registry = all_rules()
        chosen = set(registry) if self.fixable is None else set(
            expand_selectors(self.fixable, "fixable")
        )
        return frozenset(chosen - set(expand_selectors(self.unfixable, "unfixable")))

    def codes_for_file(self, path: str) -> FrozenSet[str]:
        codes = self.enabled_codes()
        relative = self.relative(path)
        for pattern, selectors in (*self.per_file_ignores, *self.extend_per_file_ignores):
            negated = pattern.startswith("!")  # "!src/**": every file outside src/
            if matches(pattern[1:] if negated else pattern, relative) != negated:
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

    def is_excluded(self, path: str, is_dir: Optional[bool] = None) -> bool:
        """Whether ``exclude``/``extend-exclude`` (gitignore-style globs, read as one list:
        a later ``!pattern`` takes a path back) name ``path``."""
        relative = self.relative(path)
        if is_dir is None:
            is_dir = os.path.isdir(path)
        return _excluded(tuple((*self.exclude, *self.extend_exclude)), relative, is_dir)

    def option_values(self) -> Dict[str, Any]:
        values = {o.name: o.default for rule in all_rules().values() for o in rule.options}
        values.update(dict(self.options))
        return values


# -- globs: gitignore's syntax and meaning (pathspec) ----------------------------------------
# `*` and `?` stay within one path component, `**` crosses them; a pattern without a "/" (but a
# trailing one) matches a file or directory of that name at any depth; a pattern with one is
# anchored at the root (the configuration file's directory); a trailing "/" matches
# directories only, and what is inside a matched directory matches too.
@lru_cache(maxsize=1024)
def _spec(patterns: Tuple[str, ...]) -> "pathspec.GitIgnoreSpec":
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def _is_unanchored(pattern: str) -> bool:
    return "/" not in pattern.lstrip("!").rstrip("/")


def _excluded(patterns: Tuple[str, ...], relative_path: str, is_dir: bool = False) -> bool:
    if relative_path == ".." or relative_path.startswith("../"):
        # Outside the project root only the patterns without a "/" apply, to the last component.
        patterns = tuple(p for p in patterns if _is_unanchored(p))
        relative_path = relative_path.rsplit("/", 1)[-1]
        if relative_path in ("", ".."):
            return False
    if not patterns or relative_path == ".":
        return False
    return _spec(patterns).match_file(relative_path + ("/" if is_dir else ""))


def check_globs(patterns: Iterable[str], key: str) -> None:
    """ConfigError naming ``key`` for a pattern that is not a valid gitignore-style glob."""
    for pattern in patterns:
        try:
            _spec((pattern.lstrip("!") if key == "per-file-ignores" else pattern,))
        except Exception as error:  # pathspec's GitIgnorePatternError, re.error
            raise ConfigError(f"{key}: invalid glob '{pattern}': {error}") from None


def matches(pattern: str, relative_path: str, is_dir: bool = False) -> bool:
    """Whether one gitignore-style glob matches a path relative to the root (see above)."""
    return _excluded((pattern,), relative_path, is_dir)


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
    """Settings from a pyproject.toml (or a torchmemlint.toml with top-level keys), with the
    files its ``extend`` key names merged underneath."""
    if config_path is None:
        return Settings(root=os.getcwd())
    table, extended = _merged_table(config_path, ())
    root = str(Path(config_path).resolve().parent)
    try:
        settings = settings_from_table(table, root, config_path)
    except _ValueError as error:  # each layer was checked alone: a clash of layers
        raise ConfigError(f"{config_path}: {error.message}") from None
    return replace(settings, extended=extended)


def _table_of(config_path: str) -> Tuple[str, Dict[str, Any]]:
    """The file's text and its torchmemlint table."""
    text, data = _parse_toml(config_path)
    if Path(config_path).name == "pyproject.toml":
        table = data.get("tool", {}).get("torchmemlint", {})
    else:
        table = data.get("tool", {}).get("torchmemlint", data)
    if not isinstance(table, dict):
        raise ConfigError(f"{config_path}: [tool.torchmemlint] must be a table")
    return text, dict(table)


def _key_error(text: str, config_path: str, key: str, message: str) -> ConfigError:
    # A key with a backslash is written escaped in a basic string ("a\\b").
    line = _line_of_key(text, key) or _line_of_key(text, key.replace("\\", "\\\\"))
    where = f"{config_path}:{line}" if line else config_path
    return ConfigError(f"{where}: {message}")


# -- `extend`: a configuration inherits a shared one ------------------------------------------
# As Ruff's: the path is relative to the file that says it (~ and $VARS expanded); the extended
# file is read first and this one's keys override it, except that the lists that add to a
# selection (`extend-select`, `ignore`, `extend-ignore`, `unfixable`, `extend-exclude`) add up
# until a layer sets `select` (a new selection starts there), and `options` and
# `extend-per-file-ignores` merge per key.
# Globs keep their meaning: an anchored one from the extended file is rebased onto this file's
# directory. A cycle is an error.
_CHAINED_KEYS = ("extend-select", "ignore", "extend-ignore", "unfixable", "extend-exclude")
_RESET_BY_SELECT = ("extend-select", "ignore", "extend-ignore")


def _merged_table(config_path: str, chain: Tuple[str, ...]) -> Tuple[Dict[str, Any], Tuple[str, ...]]:
    resolved = str(Path(config_path).resolve())
    if resolved in chain:
        cycle = " -> ".join((*chain[chain.index(resolved):], resolved))
        raise ConfigError(f"{config_path}: `extend` makes a cycle: {cycle}")
    text, table = _table_of(config_path)
    extend = table.pop("extend", None)
    try:
        settings_from_table(table, str(Path(resolved).parent), config_path)
    except _ValueError as error:
        raise _key_error(text, config_path, error.key, error.message) from None
    if extend is None:
        return table, ()
    if not isinstance(extend, str) or not extend.strip():
        raise _key_error(text, config_path, "extend", "'extend' must be the path of a file")
    here = os.path.dirname(resolved)
    base_path = os.path.normpath(
        os.path.join(here, os.path.expandvars(os.path.expanduser(extend)))
    )
    if not os.path.isfile(base_path):
        raise _key_error(text, config_path, "extend", f"extend: no such file: {extend}")
    base, base_extended = _merged_table(base_path, (*chain, resolved))
    base = _rebase_table(base, str(Path(base_path).resolve().parent), here)
    return _merge_tables(base, table), (base_path, *base_extended)


def _merge_tables(base: Dict[str, Any], child: Dict[str, Any]) -> Dict[str, Any]:
    merged = dict(base)
    if "select" in child:
        for key in _RESET_BY_SELECT:
            merged.pop(key, None)
    for key, value in child.items():
        if key in _CHAINED_KEYS and key in merged:
            merged[key] = [*merged[key], *value]
        elif key in ("options", "extend-per-file-ignores") and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def _rebase(pattern: str, base_dir: str, directory: str) -> Optional[str]:
    """A glob of a file in ``base_dir``, as a file in ``directory`` would write it (None: it
    can name nothing under ``directory``)."""
    negated, body = pattern.startswith("!"), pattern.lstrip("!")
    if _is_unanchored(body) or body.startswith("**/"):
        return pattern
    relative = Path(os.path.relpath(base_dir, directory)).as_posix()
    if relative == ".":
        return pattern
    body = body.lstrip("/")
    if not relative.startswith(".."):
        rebased = f"{relative}/{body}"
    else:
        down = Path(os.path.relpath(directory, base_dir)).as_posix() + "/"
        rebased: Optional[str] = body[len(down):] if body.startswith(down) else None
        if rebased is not None and "/" not in rebased.rstrip("/"):
            rebased = "/" + rebased  # still anchored at the root
    if rebased is None:
        return None
    return ("!" if negated else "") + rebased


def _rebase_table(table: Dict[str, Any], base_dir: str, directory: str) -> Dict[str, Any]:
    table = dict(table)
    for key in ("exclude", "extend-exclude"):
        if key in table:
            rebased = (_rebase(p, base_dir, directory) for p in table[key])
            table[key] = [p for p in rebased if p is not None]
    for key in ("per-file-ignores", "extend-per-file-ignores"):
        if key in table:
            pairs = ((_rebase(p, base_dir, directory), v) for p, v in table[key].items())
            table[key] = {p: v for p, v in pairs if p is not None}
    return table


# -- `--config "key = value"`: settings given on the command line ----------------------------
def parse_config_override(fragment: str) -> Dict[str, Any]:
    """The field values of a ``--config "key = value"`` TOML fragment (Ruff's form), checked
    as a configuration file's keys are; they apply on top of every configuration file."""
    try:
        table = tomllib.loads(fragment)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(
            f"--config: {fragment!r} is neither a file nor a `key = value` TOML setting "
            f"({error})"
        ) from None
    tool = table.get("tool")
    if set(table) == {"tool"} and isinstance(tool, dict) and isinstance(tool.get("torchmemlint"), dict):
        table = tool["torchmemlint"]  # "tool.torchmemlint.select = [...]"
    if "extend" in table:
        raise ConfigError("--config: `extend` names a file; give it in a configuration file")
    try:
        return _table_values(table, ".", None)
    except _ValueError as error:
        raise ConfigError(f"--config {fragment!r}: {error.message}") from None


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
    "extend-ignore": "extend_ignore",
    "fixable": "fixable",
    "unfixable": "unfixable",
    "exclude": "exclude",
    "extend-exclude": "extend_exclude",
}
_SELECTOR_KEYS = ("select", "extend-select", "ignore", "extend-ignore", "fixable", "unfixable")
_TABLE_KEYS = {"per-file-ignores", "extend-per-file-ignores", "options", "profile"}
OUTPUT_FORMATS = ("full", "concise", "text", "json", "sarif", "github", "junit")


def settings_from_table(table: Mapping[str, Any], root: str, config_path: str) -> Settings:
    """Settings from a ``[tool.torchmemlint]`` table; raises _ValueError naming the key."""
    return Settings(**_table_values(table, root, config_path))


def _table_values(
    table: Mapping[str, Any], root: str, config_path: Optional[str]
) -> Dict[str, Any]:
    """The Settings fields a table sets, checked; raises _ValueError naming the key."""
    values: Dict[str, Any] = {"root": root, "config_path": config_path}
    if config_path is None:  # a --config override: it sets only the keys it names
        values = {}
    for key, value in table.items():
        if key in _LIST_KEYS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise _ValueError(key, f"'{key}' must be a list of strings")
            values[_LIST_KEYS[key]] = tuple(value)
            if key in ("exclude", "extend-exclude"):
                try:
                    check_globs(value, key)
                except ConfigError as error:
                    raise _ValueError(key, str(error)) from None
        elif key == "respect-gitignore":
            if not isinstance(value, bool):
                raise _ValueError(key, "'respect-gitignore' must be true or false")
            values["respect_gitignore"] = value
        elif key == "output-format":
            if value not in OUTPUT_FORMATS:
                raise _ValueError(
                    key, f"'output-format' must be one of {', '.join(OUTPUT_FORMATS)}"
                )
            values["output_format"] = value
        elif key == "per-file-ignores":
            values["per_file_ignores"] = _per_file_ignores(value)
        elif key == "extend-per-file-ignores":  # adds to per-file-ignores (and to an extended one)
            values["extend_per_file_ignores"] = _per_file_ignores(value)
        elif key == "options":
            values["options"] = tuple(sorted(_rule_options(value).items()))
        elif key in _TABLE_KEYS:
            continue  # read by the surface that owns it (the dynamic mode's [profile])
        else:
            raise _ValueError(key, f"unknown key '{key}' in [tool.torchmemlint]")
    # Validate selectors now, so a typo fails with the key's name even if no file is linted.
    for key in _SELECTOR_KEYS:
        try:
            expand_selectors(values.get(_LIST_KEYS[key]) or (), key)
        except ConfigError as error:
            raise _ValueError(key, str(error)) from None
    return values


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
        try:
            check_globs((pattern,), "per-file-ignores")
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
        config_overrides: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.config = config
        self.isolated = isolated
        self.overrides = dict(overrides or {})
        # Field values of `--config "key = value"` (parse_config_override), over every file.
        self.config_overrides = dict(config_overrides or {})
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
            base = replace(base, **self.config_overrides)
            settings = base.with_overrides(**self.overrides)
            settings.enabled_codes()  # raises ConfigError for a bad CLI selector
            self._by_config[config] = settings
        return self._by_config[config]

    def configs(self) -> List[str]:
        """The configuration files read so far."""
        return [config for config in self._by_config if config is not None]
