"""flake8 plugin (codes ``TML``): the engine's findings, with flake8 deciding what to show.

flake8's ``--select``/``--extend-select``/``--ignore`` and ``# noqa`` apply as to any plugin:
the plugin reports every finding of the rules it runs and flake8 filters them. Rules that are
off by default run only when ``select``/``extend-select`` names them (or a prefix of them), so
an unrelated ``--ignore`` (which makes flake8 drop its default ignore list) cannot turn them on.
Rule options are flake8 options: ``--tml-<option>`` or ``tml-<option> =`` in the flake8 config.
"""

from __future__ import annotations

import argparse
import ast
from typing import Any, Callable, ClassVar, Dict, FrozenSet, Iterator, List, Sequence, Tuple

from torchmemlint import __version__
from torchmemlint.config import ConfigError, Settings, coerce_option
from torchmemlint.engine import lint_source
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


def _enabled_codes(explicitly_selected: Sequence[str]) -> FrozenSet[str]:
    prefixes = tuple(selector.strip().upper() for selector in explicitly_selected if selector)
    return frozenset(
        code
        for code, rule in all_rules().items()
        if rule.default_enabled or (prefixes and code.startswith(prefixes))
    )


class TorchMemLintChecker:
    name = "torchmemlint"
    version = __version__

    codes: ClassVar[FrozenSet[str]] = _enabled_codes(())
    settings: ClassVar[Settings] = Settings()

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
        cls.settings = Settings(options=tuple(sorted(values.items())))
        selected = [*(options.select or ()), *(options.extend_select or ())]
        cls.codes = _enabled_codes(selected)

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        source = "".join(self.lines)
        # The engine's own noqa handling is off: flake8 applies `# noqa` (and --disable-noqa).
        findings = lint_source(source, self.filename, self.settings, self.codes, ignore_noqa=True)
        for finding in findings:
            if finding.code.startswith("TML"):  # flake8 reports syntax errors itself (E999)
                # flake8 columns are 0-based and it adds 1 when printing; ours are 1-based.
                row, column = finding.location.row, finding.location.column - 1
                yield row, column, f"{finding.code} {finding.message}", type(self)
