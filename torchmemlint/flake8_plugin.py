"""flake8 plugin (codes ``TML``): the engine's findings, with flake8 deciding what to show.

Each file gets the settings the CLI gives it (the closest torchmemlint.toml, or pyproject.toml
with a ``[tool.torchmemlint]`` table, above it; none with flake8's ``--isolated``): the rules
that config enables for the file run, plus those flake8's ``select``/``extend-select`` names
(or a prefix of them), so an unrelated ``--ignore`` (which makes flake8 drop its default
ignore list) cannot turn on a rule that is off by default. flake8's ``--select``/``--ignore``,
``per-file-ignores`` and ``# noqa`` (on the reported row) then apply as to any plugin; the
file-level ``# torchmemlint: noqa[: CODES]`` is applied here, unless ``--disable-noqa``.
Rule options are flake8 options, ``--tml-<option>`` or ``tml-<option> =`` in the flake8
config, over the config's ``[tool.torchmemlint.options]``. A broken config stops flake8 with
a one-line message naming the file and line.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import replace
from typing import Any, Callable, ClassVar, Dict, FrozenSet, Iterator, List, Sequence, Tuple

from flake8.exceptions import ExecutionError

from torchmemlint import __version__
from torchmemlint.config import ConfigError, Resolver, Settings, coerce_option
from torchmemlint.engine import lint_source
from torchmemlint.noqa import parse_directives
from torchmemlint.rules import all_rules
from torchmemlint.rules.base import RuleOption

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _flake8_name(option: RuleOption) -> str:
    return f"tml-{option.name}"


def _option_parser(option: RuleOption) -> Callable[[str], Any]:
    """An argparse ``type``: flake8 hands config values to it as strings too."""

    def parse(raw: str) -> Any:
        if option.type is bool and isinstance(raw, str):
            word = raw.strip().lower()
            if word not in _TRUE | _FALSE:
                raise argparse.ArgumentTypeError(f"expected true or false, got '{raw}'")
            return word in _TRUE
        try:
            return coerce_option(option, raw, "invalid value")
        except ConfigError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parse.__name__ = option.type.__name__  # argparse names the type in its messages
    return parse


def _rule_options() -> Dict[str, Tuple[RuleOption, List[str]]]:
    """Each option once, with the codes of the rules that read it."""
    found: Dict[str, Tuple[RuleOption, List[str]]] = {}
    for code, rule in all_rules().items():
        for option in rule.options:
            found.setdefault(option.name, (option, []))[1].append(code)
    return found


class TorchMemLintChecker:
    name = "torchmemlint"
    version = __version__

    named_codes: ClassVar[FrozenSet[str]] = frozenset()  # named by flake8's (extend-)select
    # flake8's own `--tml-*` options; they override the torchmemlint config's [options].
    flake8_options: ClassVar[Dict[str, Any]] = {}
    resolver: ClassVar[Resolver] = Resolver()
    honour_file_noqa: ClassVar[bool] = True

    def __init__(self, tree: ast.AST, lines: Sequence[str], filename: str) -> None:
        # flake8 needs ``tree`` to run us after its own parse; the engine parses with libcst.
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, manager: Any) -> None:
        for option, codes in _rule_options().values():
            manager.add_option(
                f"--{_flake8_name(option)}",
                type=_option_parser(option),
                default=None,
                metavar=option.type.__name__.upper(),
                parse_from_config=True,
                help=f"{option.help} ({', '.join(codes)}; default: {option.default!r})",
            )

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        values = {}
        for name, (option, _) in _rule_options().items():
            value = getattr(options, _flake8_name(option).replace("-", "_"), None)
            if value is not None:
                values[name] = value
        cls.flake8_options = values
        # flake8 consumes --isolated before plugins see the options: read it where it was given.
        isolated = getattr(options, "isolated", False) or "--isolated" in sys.argv[1:]
        cls.resolver = Resolver(isolated=bool(isolated))
        # A broken config governing the paths flake8 was given stops flake8 here, in its main
        # process. Raised from a worker instead (``run``), it can leave `flake8 -j N` hanging in
        # the shutdown of multiprocessing's pool (seen under load: tests/test_config.py).
        for path in getattr(options, "filenames", None) or ["."]:
            try:
                cls.resolver.for_path(path if path not in ("-", "stdin") else ".")
            except ConfigError as error:
                raise ExecutionError(f"torchmemlint: error: {error}") from None
        cls.honour_file_noqa = not getattr(options, "disable_noqa", False)
        selected = [*(options.select or ()), *(options.extend_select or ())]
        prefixes = tuple(selector.strip().upper() for selector in selected if selector.strip())
        cls.named_codes = frozenset(c for c in all_rules() if prefixes and c.startswith(prefixes))

    @classmethod
    def settings_for(cls, filename: str) -> Settings:
        """The settings of the torchmemlint config that governs the file (the CLI's resolution:
        the closest torchmemlint.toml or pyproject.toml with the table; none with flake8's
        ``--isolated``), with flake8's ``--tml-*`` options over its rule options. A broken
        config raises ConfigError."""
        settings = cls.resolver.for_path(filename if filename not in ("-", "stdin") else ".")
        options = {**dict(settings.options), **cls.flake8_options}
        return replace(settings, options=tuple(sorted(options.items())))

    @classmethod
    def codes_for(cls, filename: str, settings: Settings) -> FrozenSet[str]:
        """The rules the CLI would run on the file (its config's select, ignore and
        per-file-ignores), plus those flake8's select/extend-select names that the config does
        not ignore for it; flake8's own select/ignore/per-file-ignores then filter the output."""
        codes = settings.codes_for_file(filename)
        if cls.named_codes - codes:
            not_ignored = settings.with_overrides(select=("ALL",)).codes_for_file(filename)
            codes |= cls.named_codes & not_ignored
        return codes

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        source = "".join(self.lines)
        try:
            settings = self.settings_for(self.filename)
        except ConfigError as error:
            # flake8 stops and prints this under "There was a critical error ...", exit 1.
            raise ExecutionError(f"torchmemlint: error: {error}") from None
        # The engine's own noqa handling is off: flake8 applies `# noqa` (and --disable-noqa)
        # on the reported row; the file-level `# torchmemlint: noqa[: CODES]` is ours to apply.
        codes = self.codes_for(self.filename, settings)
        findings = lint_source(source, self.filename, settings, codes, ignore_noqa=True)
        whole_file = None
        if findings and self.honour_file_noqa and "noqa" in source.lower():
            whole_file = parse_directives(source).whole_file
        for finding in findings:
            if whole_file is not None and (
                not whole_file or finding.code.startswith(tuple(whole_file))
            ):
                continue
            if finding.code.startswith("TML"):  # flake8 reports syntax errors itself (E999)
                # flake8 columns are 0-based and it adds 1 when printing; ours are 1-based.
                row, column = finding.location.row, finding.location.column - 1
                yield row, column, f"{finding.code} {finding.message}", type(self)
