"""Command line: ``torchmemlint [OPTIONS] PATH...`` lints; sub-commands do the rest."""

from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import click

from torchmemlint import __version__
from torchmemlint.cache import Cache, cache_directory
from torchmemlint.config import ConfigError, Resolver, Settings, split_selectors
from torchmemlint.docs import default_label, fix_summary, rule_page, rules_markdown
from torchmemlint.dynamic.cli import dynamic_report, profile
from torchmemlint.engine import (
    IO_ERROR,
    discover,
    is_excluded_file,
    lint_paths,
    lint_source,
    run_parallel,
)
from torchmemlint.findings import Finding, Location
from torchmemlint.fixer import FixError, fix_text
from torchmemlint.output.github import format_github
from torchmemlint.output.json import format_json
from torchmemlint.output.junit import format_junit
from torchmemlint.output.sarif import format_sarif
from torchmemlint.output.text import format_statistics, format_text
from torchmemlint.rules import all_rules
from torchmemlint.sourcefile import SourceError, SourceFile, decode_source, read_source, write_atomic

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class _DefaultCommandGroup(click.Group):
    """``torchmemlint src/`` means ``torchmemlint check src/`` (Ruff's ergonomics), and a bare
    ``torchmemlint`` means ``torchmemlint check``, which lints ``.`` as ``--fix`` alone does."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        bare_help = bool(args) and args[0] in ("--help", "-h", "--version")
        if not bare_help and (not args or args[0] not in self.commands):
            args = ["check", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultCommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="torchmemlint")
def main() -> None:
    """Find and fix GPU-memory anti-patterns in PyTorch code.

    Run `torchmemlint [OPTIONS] PATH...` (same as `torchmemlint check`) to lint, or
    `torchmemlint --fix PATH...` to apply safe fixes.
    """


def _fail(message: str) -> "click.exceptions.Exit":
    click.echo(f"torchmemlint: error: {message}", err=True)
    return click.exceptions.Exit(EXIT_ERROR)


def _selector_option(name: str, help_text: str):
    return click.option(name, multiple=True, metavar="CODES", help=help_text)


@dataclass
class _FileOutcome:
    path: str
    findings: List[Finding] = field(default_factory=list)
    fixed: int = 0
    original: Optional[str] = None
    fixed_text: Optional[str] = None
    error: Optional[str] = None


def _fix_one(
    path: str, settings: Settings, unsafe_fixes: bool, ignore_noqa: bool, write: bool
) -> _FileOutcome:
    try:
        source = read_source(path)
    except SourceError as error:
        return _FileOutcome(path, error=str(error))
    outcome = _fix_buffer(path, source.text, settings, unsafe_fixes, ignore_noqa)
    if write and outcome.fixed:
        try:
            write_atomic(source, outcome.fixed_text or source.text)
        except OSError as error:
            return _FileOutcome(path, outcome.findings, error=f"cannot write {path}: {error}")
    return outcome


def _fix_buffer(
    path: str, text: str, settings: Settings, unsafe_fixes: bool, ignore_noqa: bool
) -> _FileOutcome:
    codes = settings.codes_for_file(path)

    def lint(text: str) -> List[Finding]:
        return lint_source(text, path, settings, codes, ignore_noqa=ignore_noqa)

    try:
        result = fix_text(text, lint, unsafe_fixes)
    except FixError as error:
        findings = lint(text)
        return _FileOutcome(path, findings, error=f"{path}: {error}; file left unchanged")
    return _FileOutcome(path, result.remaining, len(result.fixed), text, result.text)


def _check_stdin(
    path: str, settings: Settings, fix: bool, unsafe_fixes: bool, ignore_noqa: bool
) -> Tuple[SourceFile, _FileOutcome]:
    """Lint (and fix) the buffer on standard input as if it were the file ``path``."""
    source = decode_source(path, sys.stdin.buffer.read())
    if is_excluded_file(path, settings):
        return source, _FileOutcome(path, original=source.text, fixed_text=source.text)
    if fix:
        return source, _fix_buffer(path, source.text, settings, unsafe_fixes, ignore_noqa)
    findings = lint_source(source.text, path, settings, ignore_noqa=ignore_noqa)
    return source, _FileOutcome(path, findings, original=source.text)


def _error_finding(path: str, message: str) -> Finding:
    start = Location(1, 1)
    return Finding(IO_ERROR, message, path, start, start)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fix", is_flag=True, help="Apply safe fixes.")
@click.option("--unsafe-fixes", is_flag=True, help="Also show and apply unsafe fixes.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing.")
@_selector_option("--select", "Rules to enable (codes or prefixes: TML, TML4, TML401, ALL).")
@_selector_option("--extend-select", "Rules to enable on top of the selection.")
@_selector_option("--ignore", "Rules to disable.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Replace the excluded globs.")
@click.option("--extend-exclude", multiple=True, metavar="GLOB", help="Exclude more globs.")
@click.option("--config", "config_path", type=click.Path(), help="Read settings from this file.")
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@click.option(
    "--output-format",
    type=click.Choice(["text", "json", "sarif", "github", "junit"]),
    default="text",
    show_default=True,
)
@click.option(
    "--output-file", type=click.Path(dir_okay=False), help="Write the report to this file."
)
@click.option(
    "--stdin-filename",
    metavar="PATH",
    help="Lint standard input (path `-`) as if it were PATH; with --fix print the fixed source.",
)
@click.option("--statistics", is_flag=True, help="Count findings per rule instead of listing.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--ignore-noqa", is_flag=True, help="Report findings that `# noqa` suppresses.")
@click.option(
    "--force-exclude", is_flag=True, help="Apply excludes to files named explicitly too (hooks)."
)
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Parallel processes [all cores].")
# -- result cache (torchmemlint/cache.py): one block of options, passed to the engine --------
@click.option(
    "--no-cache",
    is_flag=True,
    envvar="TORCHMEMLINT_NO_CACHE",
    help="Lint every file again; read and write no cache.",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    envvar="TORCHMEMLINT_CACHE_DIR",
    help="Cache directory [.torchmemlint_cache next to the config file, else here].",
)
@click.option(
    "--dynamic",
    is_flag=True,
    help="Also profile the [tool.torchmemlint.profile] targets that carry findings "
    "(imports and runs them; needs the `dynamic` extra).",
)
def check(
    paths: Tuple[str, ...],
    fix: bool,
    unsafe_fixes: bool,
    diff: bool,
    select: Tuple[str, ...],
    extend_select: Tuple[str, ...],
    ignore: Tuple[str, ...],
    exclude: Tuple[str, ...],
    extend_exclude: Tuple[str, ...],
    config_path: Optional[str],
    isolated: bool,
    output_format: str,
    output_file: Optional[str],
    stdin_filename: Optional[str],
    statistics: bool,
    exit_zero: bool,
    ignore_noqa: bool,
    force_exclude: bool,
    jobs: Optional[int],
    no_cache: bool,
    cache_dir: Optional[str],
    dynamic: bool,
) -> None:
    """Lint PATHS (files or directories; default: the current directory; `-`: standard input)."""
    overrides = {
        "select": split_selectors(select) if select else None,
        "extend_select": split_selectors(extend_select) if extend_select else None,
        "ignore": split_selectors(ignore) if ignore else None,
        "exclude": exclude or None,
        "extend_exclude": extend_exclude or None,
    }
    reading_stdin = paths == ("-",) or (stdin_filename is not None and not paths)
    if dynamic and (fix or diff or reading_stdin):
        raise _fail("--dynamic cannot be combined with --fix, --diff or standard input")
    if "-" in paths and not reading_stdin:
        raise _fail("`-` (standard input) cannot be combined with other paths")
    # -- options that would do nothing together -------------------------------------------
    if stdin_filename is not None and not reading_stdin:
        raise _fail(
            "--stdin-filename names the file standard input stands for; pass `-` as the only "
            "path (or drop --stdin-filename to lint the paths)"
        )
    if statistics and (output_format != "text" or diff):
        other = "--diff" if diff else f"--output-format {output_format}"
        raise _fail(f"--statistics only changes the text report; it does nothing with {other}")
    if diff and (output_format != "text" or output_file is not None):
        raise _fail("--diff prints a diff to standard output; --output-format and "
                    "--output-file do nothing with it")
    # ---------------------------------------------------------------------------------------
    paths = paths or (".",)
    if config_path is not None and not os.path.isfile(config_path):
        raise _fail(f"--config: no such file: {config_path}")
    # Each file gets the settings of the closest configuration above it (Ruff's hierarchy),
    # wherever the command runs; standard input those of the file it stands for.
    resolver = Resolver(config_path, isolated, overrides)
    try:
        Settings().with_overrides(**overrides).enabled_codes()  # a bad selector on the CLI
        # Standard input's settings, and the [profile] table --dynamic reads.
        settings = resolver.for_path(
            stdin_filename if stdin_filename else (paths[0] if len(paths) == 1 else ".")
        ) if reading_stdin or dynamic else Settings()
    except ConfigError as error:
        raise _fail(str(error))
    jobs = jobs or os.cpu_count() or 1

    stdin_source: Optional[SourceFile] = None
    groups: Dict[Settings, List[str]] = {}
    if reading_stdin:
        try:
            stdin_source, stdin_outcome = _check_stdin(
                stdin_filename or "-", settings, fix or diff, unsafe_fixes, ignore_noqa
            )
        except SourceError as error:
            stdin_outcome = _FileOutcome(stdin_filename or "-", error=str(error))
        outcomes: List[_FileOutcome] = [stdin_outcome]
    else:
        try:
            files, missing = discover(paths, resolver, force_exclude)
            for file in files:
                groups.setdefault(resolver.for_path(file), []).append(file)
        except ConfigError as error:
            raise _fail(str(error))
        outcomes = [_FileOutcome(m.path, error=m.error) for m in missing]
    for group_settings, group_files in groups.items():
        if fix or diff:
            outcomes += run_parallel(
                _fix_one,
                group_files,
                (group_settings, unsafe_fixes, ignore_noqa, not diff),
                jobs,
            )
        else:
            # --fix, --diff and standard input never use the cache: it is keyed by file
            # content, so a file --fix rewrites is simply a miss next time.
            cache = (
                None
                if no_cache
                else Cache.open(cache_directory(group_settings.root, cache_dir))
            )
            outcomes += [
                _FileOutcome(r.path, r.findings, error=r.error)
                for r in lint_paths(group_files, group_settings, jobs, ignore_noqa, cache)
            ]

    findings: List[Finding] = []
    fixed = 0
    for outcome in outcomes:
        findings.extend(outcome.findings)
        fixed += outcome.fixed
        if outcome.error:
            findings.append(_error_finding(outcome.path, outcome.error))
    findings.sort(key=lambda finding: finding.sort_key)

    if diff:
        patch = "".join(_unified_diff(o) for o in sorted(outcomes, key=lambda o: o.path))
        click.echo(patch, nl=False)
        summary = f"Would fix {fixed} finding{'s' if fixed != 1 else ''}."
        click.echo(summary, err=True)
        raise click.exceptions.Exit(EXIT_FINDINGS if patch and not exit_zero else EXIT_CLEAN)

    report_to_stderr = False
    if stdin_source is not None and fix:
        # The fixed buffer goes to standard output, for the editor to put in place.
        fixed_text = outcomes[0].fixed_text
        stdout = sys.stdout.buffer
        stdout.write(stdin_source.encode(stdin_source.text if fixed_text is None else fixed_text))
        stdout.flush()
        report_to_stderr = True

    if output_format == "json":
        report = format_json(findings)
    elif output_format == "sarif":
        report = format_sarif(findings)
    elif output_format == "github":
        report = format_github(findings)
    elif output_format == "junit":
        report = format_junit(findings)
    elif statistics:
        report = format_statistics(findings, unsafe_fixes)
    else:
        report = format_text(findings, unsafe_fixes, fixed)
    if dynamic:
        report = dynamic_report(settings, findings, output_format, report)
    _emit_report(report, output_file, report_to_stderr)
    if getattr(report, "failed", None):  # --dynamic: a configured target could not be profiled
        raise click.exceptions.Exit(2)
    raise click.exceptions.Exit(EXIT_FINDINGS if findings and not exit_zero else EXIT_CLEAN)


def _emit_report(report: str, output_file: Optional[str], to_stderr: bool) -> None:
    if output_file is None:
        click.echo(report, nl=False, err=to_stderr)
        return
    try:
        directory = os.path.dirname(os.path.abspath(output_file))
        os.makedirs(directory, exist_ok=True)
        with open(output_file, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(report)
    except OSError as error:
        raise _fail(f"--output-file: cannot write {output_file}: {error.strerror or error}")


def _unified_diff(outcome: _FileOutcome) -> str:
    if outcome.original is None or outcome.fixed_text in (None, outcome.original):
        return ""
    return "".join(
        difflib.unified_diff(
            outcome.original.splitlines(keepends=True),
            (outcome.fixed_text or "").splitlines(keepends=True),
            fromfile=f"a/{outcome.path}",
            tofile=f"b/{outcome.path}",
        )
    )


main.add_command(profile)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False))
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    envvar="TORCHMEMLINT_CACHE_DIR",
    help="Remove this cache directory too (as `check --cache-dir` names it).",
)
def clean(paths: Tuple[str, ...], cache_dir: Optional[str]) -> None:
    """Remove the result caches under PATHS (default: the working directory), of every version.

    Only directories torchmemlint made (their CACHEDIR.TAG says so) are removed.
    """
    import shutil

    from torchmemlint.cache import cache_directories, is_cache_directory

    targets: List[str] = []
    for path in paths or (".",):
        if not os.path.isdir(path):
            raise _fail(f"{path}: no such directory")
        targets.extend(cache_directories(path))
    if cache_dir is not None and os.path.isdir(cache_dir):
        if not is_cache_directory(cache_dir):
            raise _fail(f"{cache_dir}: not a torchmemlint cache (no CACHEDIR.TAG of ours); left as is")
        targets.append(cache_dir)
    removed = 0
    for target in dict.fromkeys(os.path.normpath(t) for t in targets):
        try:
            shutil.rmtree(target)
        except OSError as error:
            raise _fail(f"cannot remove {target}: {error.strerror or error}")
        click.echo(f"Removed {target}")
        removed += 1
    if not removed:
        click.echo("No torchmemlint cache found")


@main.command()
@click.option("--stdio", is_flag=True, help="Talk over stdin/stdout (the only transport).")
def lsp(stdio: bool) -> None:
    """Run the language server (needs the `lsp` extra: pip install 'torchmemlint[lsp]')."""
    try:
        from torchmemlint.lsp import serve
    except ImportError as error:
        if (error.name or "").split(".")[0] not in ("pygls", "lsprotocol"):
            raise
        raise _fail("the language server needs pygls: pip install 'torchmemlint[lsp]'")
    serve()


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
@click.option("--markdown", is_flag=True, help="Print every rule's documentation (docs/rules.md).")
def rule(code: Optional[str], show_all: bool, markdown: bool) -> None:
    """Explain one rule (`torchmemlint rule TML401`) or list them all (`--all`)."""
    registry = all_rules()
    if markdown:
        click.echo(rules_markdown(), nl=False)
        return
    if show_all or code is None:
        click.echo(f"{'code':<8}{'name':<42}{'default':<9}fix")
        for rule_code, rule_class in registry.items():
            click.echo(
                f"{rule_code:<8}{rule_class.name:<42}{default_label(rule_class):<9}"
                f"{fix_summary(rule_class)}"
            )
        return
    rule_class = registry.get(code.upper())
    if rule_class is None:
        raise _fail(f"unknown rule '{code}' (see `torchmemlint rule --all`)")
    click.echo(rule_page(rule_class), nl=False)
