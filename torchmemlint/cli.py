"""Command line: ``torchmemlint [OPTIONS] PATH...`` lints; sub-commands do the rest."""

from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import click

from torchmemlint import __version__
from torchmemlint.cache import Cache, cache_directory
from torchmemlint.config import (
    OUTPUT_FORMATS,
    ConfigError,
    Resolver,
    check_globs,
    Settings,
    parse_config_override,
    split_selectors,
)
from torchmemlint.docs import default_label, fix_summary, rule_page, rules_markdown
from torchmemlint.dynamic.cli import dynamic_report, profile
from torchmemlint.engine import (
    IO_ERROR,
    FileResult,
    discover,
    is_excluded_file,
    lint_paths,
    lint_source,
    run_parallel,
    worker_died_message,
)
from torchmemlint.findings import Finding, Location
from torchmemlint.fixer import FixError, fix_text
from torchmemlint.noqa import add_noqa
from torchmemlint.output import report as reporting
from torchmemlint.notebook import cell_diff, for_structured_reports, is_notebook, read_notebook
from torchmemlint.project import REGISTRY
from torchmemlint.rules import all_rules
from torchmemlint.sourcefile import (
    LINE_BREAK,
    SourceError,
    SourceFile,
    decode_source,
    read_source,
    write_atomic,
)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT


class _DefaultCommandGroup(click.Group):
    """``torchmemlint src/`` means ``torchmemlint check src/`` (Ruff's ergonomics), and a bare
    ``torchmemlint`` means ``torchmemlint check``, which lints ``.`` as ``--fix`` alone does."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        bare_help = bool(args) and args[0] in ("--help", "-h", "--version")
        if not bare_help and (not args or args[0] not in self.commands):
            args = ["check", *args]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> None:
        # Ctrl-C: stop at once, say so, exit 130 as a shell does (click alone says "Aborted!"
        # and exits 1); the worker processes are stopped by the pool (torchmemlint/pool.py).
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("torchmemlint: interrupted", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        # the same while the command line is still being parsed (a Ctrl-C right at the start)
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            click.echo("torchmemlint: interrupted", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None


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
    fixed_codes: List[str] = field(default_factory=list)  # for --show-fixes


def _fix_one(
    path: str, settings: Settings, unsafe_fixes: bool, ignore_noqa: bool, write: bool
) -> _FileOutcome:
    try:
        source = read_source(path)
        fix_buffer = _fix_notebook if is_notebook(path) else _fix_buffer
        outcome = fix_buffer(path, source.text, settings, unsafe_fixes, ignore_noqa)
    except SourceError as error:  # a notebook's NotebookError too
        return _FileOutcome(path, error=str(error))
    if write and outcome.fixed:
        try:
            write_atomic(source, outcome.fixed_text or source.text)
        except SourceError as error:  # read-only, or changed while fixing: left as it is
            return _FileOutcome(path, outcome.findings, error=str(error))
        except OSError as error:
            return _FileOutcome(path, outcome.findings, error=f"cannot write {path}: {error}")
    return outcome


def _fix_died(path: str, why: str) -> _FileOutcome:
    return _FileOutcome(path, error=worker_died_message(path, why))


def _fix_buffer(
    path: str, text: str, settings: Settings, unsafe_fixes: bool, ignore_noqa: bool
) -> _FileOutcome:
    codes = settings.codes_for_file(path)
    fixable = settings.fixable_codes()

    def lint(text: str) -> List[Finding]:
        findings = lint_source(text, path, settings, codes, ignore_noqa=ignore_noqa)
        return reporting.without_unfixable(findings, fixable)

    try:
        result = fix_text(text, lint, unsafe_fixes)
    except FixError as error:
        findings = lint(text)
        return _FileOutcome(path, findings, error=f"{path}: {error}; file left unchanged")
    return _FileOutcome(
        path, result.remaining, len(result.fixed), text, result.text,
        fixed_codes=[finding.code for finding in result.fixed],
    )


def _add_noqa_one(path: str, settings: Settings, ignore_noqa: bool) -> Tuple[int, Optional[str]]:
    """``--add-noqa`` for one file: (rows changed, error), written as --fix writes."""
    try:
        source = read_source(path)
    except SourceError as error:
        return 0, str(error)
    findings = lint_source(source.text, path, settings, ignore_noqa=ignore_noqa)
    new_text, count = add_noqa(source.text, findings, frozenset(all_rules()))
    if count:
        try:
            write_atomic(source, new_text)
        except SourceError as error:  # read-only, changed meanwhile: left unchanged
            return 0, str(error)
        except OSError as error:
            return 0, f"cannot write {path}: {error.strerror or error}"
    return count, None


def _read_stdin() -> Tuple[bytes, Optional[str]]:
    """Standard input's bytes (what could be read of them) and the error that stopped it."""
    try:
        return sys.stdin.buffer.read(), None
    except OSError as error:
        return b"", f"cannot read standard input: {error.strerror or error}"


def _fix_notebook(
    path: str, text: str, settings: Settings, unsafe_fixes: bool, ignore_noqa: bool
) -> _FileOutcome:
    """A notebook's code cells fixed as one source, then written back into its JSON text."""
    notebook = read_notebook(path, text)  # a NotebookError is a SourceError for the caller
    outcome = _fix_buffer(path, notebook.source, settings, unsafe_fixes, ignore_noqa)
    outcome.findings = notebook.translate(outcome.findings)
    try:
        rendered = notebook.render(outcome.fixed_text or notebook.source)
    except SourceError as error:
        return _FileOutcome(path, outcome.findings, error=f"{error}; file left unchanged")
    outcome.original, outcome.fixed_text = text, rendered
    return outcome


def _check_stdin(
    path: str, data: bytes, settings: Settings, fix: bool, unsafe_fixes: bool, ignore_noqa: bool
) -> Tuple[SourceFile, _FileOutcome]:
    """Lint (and fix) the buffer on standard input as if it were the file ``path``."""
    source = decode_source(path, data)
    if is_excluded_file(path, settings):
        return source, _FileOutcome(path, original=source.text, fixed_text=source.text)
    if is_notebook(path):  # standard input standing for a notebook is one too
        if fix:
            outcome = _fix_notebook(path, source.text, settings, unsafe_fixes, ignore_noqa)
        else:
            notebook = read_notebook(path, source.text)
            findings = lint_source(notebook.source, path, settings, ignore_noqa=ignore_noqa)
            outcome = _FileOutcome(path, notebook.translate(findings), original=source.text)
        return source, outcome
    if fix:
        return source, _fix_buffer(path, source.text, settings, unsafe_fixes, ignore_noqa)
    findings = lint_source(source.text, path, settings, ignore_noqa=ignore_noqa)
    findings = reporting.without_unfixable(findings, settings.fixable_codes())
    return source, _FileOutcome(path, findings, original=source.text)


def _error_finding(path: str, message: str) -> Finding:
    start = Location(1, 1)
    return Finding(IO_ERROR, message, path, start, start)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(readable=False))  # unreadable: E902
@click.option("--fix", is_flag=True, help="Apply safe fixes.")
@click.option("--unsafe-fixes", is_flag=True, help="Also show and apply unsafe fixes.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing.")
@_selector_option("--select", "Rules to enable (codes or prefixes: TML, TML4, TML401, ALL).")
@_selector_option("--extend-select", "Rules to enable on top of the selection.")
@_selector_option("--ignore", "Rules to disable.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Replace the excluded globs.")
@click.option("--extend-exclude", multiple=True, metavar="GLOB", help="Exclude more globs.")
@click.option(
    "--config",
    "config_options",
    multiple=True,
    metavar="PATH | 'KEY = VALUE'",
    help="Read settings from this file, or set one (a TOML `key = value`, over every file).",
)
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@click.option(
    "--output-format",
    type=click.Choice(OUTPUT_FORMATS),
    envvar="TORCHMEMLINT_OUTPUT_FORMAT",
    help="[default: full on a terminal, else text; or the `output-format` setting]",
)
@click.option(
    "-o", "--output-file", type=click.Path(dir_okay=False), help="Write the report to this file."
)
@click.option(
    "--color",
    "color",
    type=click.Choice(reporting.COLOR_CHOICES),
    default="auto",
    show_default=True,
    help="Colour the report (auto: on a terminal, unless NO_COLOR is set).",
)
@click.option("-q", "--quiet", is_flag=True, help="Print the findings, but no summary.")
@click.option("--show-fixes", is_flag=True, help="List the fixes --fix applied, per file.")
@click.option(
    "--fix-only", is_flag=True, help="Apply fixes; report the fixes, not the remaining findings."
)
@click.option(
    "--exit-non-zero-on-fix",
    is_flag=True,
    help="Exit 1 when --fix changed a file, even if no finding remains.",
)
@click.option(
    "--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every row that reports; lint nothing."
)
@click.option("--show-files", is_flag=True, help="List the files that would be linted; lint nothing.")
@click.option(
    "--show-settings", is_flag=True, help="Print the settings of the first file; lint nothing."
)
@click.option(
    "--no-respect-gitignore",
    is_flag=True,
    help="Lint files that .gitignore (and git's other exclude files) ignore.",
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
    config_options: Tuple[str, ...],
    isolated: bool,
    output_format: Optional[str],
    output_file: Optional[str],
    color: str,
    quiet: bool,
    show_fixes: bool,
    fix_only: bool,
    exit_non_zero_on_fix: bool,
    add_noqa: bool,
    show_files: bool,
    show_settings: bool,
    no_respect_gitignore: bool,
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
        "respect_gitignore": False if no_respect_gitignore else None,
    }
    fix = fix or fix_only
    config_path, config_overrides = _split_config_options(config_options)
    reading_stdin = paths == ("-",) or (stdin_filename is not None and not paths)
    _check_switches(
        add_noqa=add_noqa, fix=fix, diff=diff, reading_stdin=reading_stdin,
        dynamic=dynamic, show_files=show_files, show_settings=show_settings,
    )
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
    human = output_format in (None, *reporting.HUMAN_FORMATS)
    if statistics and (not human or diff):
        other = "--diff" if diff else f"--output-format {output_format}"
        raise _fail(f"--statistics only changes the text report; it does nothing with {other}")
    if diff and (output_format not in (None, "text") or output_file is not None):
        raise _fail("--diff prints a diff to standard output; --output-format and "
                    "--output-file do nothing with it")
    # ---------------------------------------------------------------------------------------
    paths = paths or (".",)
    if config_path is not None and not os.path.isfile(config_path):
        raise _fail(f"--config: no such file: {config_path}")
    # Each file gets the settings of the closest configuration above it (Ruff's hierarchy),
    # wherever the command runs; standard input those of the file it stands for.
    resolver = Resolver(config_path, isolated, overrides, config_overrides=config_overrides)
    try:
        Settings().with_overrides(**overrides).enabled_codes()  # a bad selector on the CLI
        check_globs(exclude, "--exclude")
        check_globs(extend_exclude, "--extend-exclude")
        # Standard input's settings, and the [profile] table --dynamic reads.
        settings = resolver.for_path(
            stdin_filename if stdin_filename else (paths[0] if len(paths) == 1 else ".")
        ) if reading_stdin or dynamic else Settings()
    except ConfigError as error:
        raise _fail(str(error))
    configured_format = output_format or _configured_format(resolver)
    jobs = jobs or os.cpu_count() or 1

    stdin_source: Optional[SourceFile] = None
    stdin_data = b""
    groups: Dict[Settings, List[str]] = {}
    if reading_stdin:
        stdin_data, read_error = _read_stdin()
        try:
            if read_error is not None:
                raise SourceError(read_error)
            stdin_source, stdin_outcome = _check_stdin(
                stdin_filename or "-", stdin_data, settings, fix or diff, unsafe_fixes,
                ignore_noqa,
            )
        except SourceError as error:
            stdin_outcome = _FileOutcome(stdin_filename or "-", error=str(error))
        outcomes: List[_FileOutcome] = [stdin_outcome]
    else:
        try:
            files, missing = discover(paths, resolver, force_exclude)
            REGISTRY.set_run(files)  # the run's files (and their packages) are the project
            for file in files:
                groups.setdefault(resolver.for_path(file), []).append(file)
        except ConfigError as error:
            raise _fail(str(error))
        outcomes = [_FileOutcome(m.path, error=m.error) for m in missing]
        if show_files or show_settings or add_noqa:
            _inspect_or_add_noqa(
                files, missing, resolver, show_files, show_settings, add_noqa, ignore_noqa, quiet
            )
    for group_settings, group_files in groups.items():
        if fix or diff:
            outcomes += run_parallel(
                _fix_one,
                group_files,
                (group_settings, unsafe_fixes, ignore_noqa, not diff),
                jobs,
                _fix_died,
            )
        else:
            # --fix, --diff and standard input never use the cache: it is keyed by file
            # content, so a file --fix rewrites is simply a miss next time.
            cache = (
                None
                if no_cache
                else Cache.open(cache_directory(group_settings.root, cache_dir))
            )
            fixable = group_settings.fixable_codes()
            outcomes += [
                _FileOutcome(
                    r.path, reporting.without_unfixable(r.findings, fixable), error=r.error
                )
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
        if not quiet:
            click.echo(summary, err=True)
        raise click.exceptions.Exit(EXIT_FINDINGS if patch and not exit_zero else EXIT_CLEAN)

    report_to_stderr = False
    if reading_stdin and fix:
        # A buffer the editor can keep goes to standard output: the fixed source, or the input
        # unchanged when it cannot be decoded or fixed (the report goes to standard error).
        stdout = sys.stdout.buffer
        stdout.write(_stdin_result(stdin_source, outcomes[0], stdin_data))
        stdout.flush()
        report_to_stderr = True

    stream = sys.stderr if report_to_stderr else sys.stdout
    output_format = reporting.default_format(configured_format, stream, output_file)
    colour = reporting.use_colour(color, stream, output_file)
    if output_format in ("sarif", "github", "junit"):
        findings = for_structured_reports(findings)  # a notebook's findings at 1:1, as Ruff's
    fixed_by_file = [(o.path, o.fixed_codes) for o in outcomes]
    if fix_only:
        # Ruff's --fix-only: the fixes are the report; the findings left are not listed.
        hidden = sum(1 for f in findings if f.fix is not None and not f.fix_applies(unsafe_fixes))
        machine = output_format not in reporting.HUMAN_FORMATS  # nothing to say (as Ruff)
        report = "" if quiet or machine else (
            (reporting.fix_summary(fixed_by_file) + "\n" if show_fixes and fixed else "")
            + reporting.fix_only_summary(fixed, hidden)
        )
        errors = [f for f in findings if f.code not in all_rules()]
        if errors:  # a file that could not be read or parsed is still said
            report = reporting.format_report(
                output_format, errors, unsafe_fixes=unsafe_fixes, fixed=0, statistics=False,
                quiet=True, colour=colour, sources=_sources(errors, outcomes),
            ) + report
        _emit_report(report, output_file, report_to_stderr, colour)
        failed = bool(errors) or (exit_non_zero_on_fix and fixed > 0)
        raise click.exceptions.Exit(EXIT_FINDINGS if failed and not exit_zero else EXIT_CLEAN)
    listing = reporting.fix_summary(fixed_by_file) if show_fixes else ""
    report = reporting.format_report(
        output_format, findings, unsafe_fixes=unsafe_fixes, fixed=fixed, statistics=statistics,
        quiet=quiet, colour=colour, fix_listing=listing,
        sources=_sources(findings, outcomes) if output_format == "full" else {},
    )
    if dynamic:
        human = output_format in reporting.HUMAN_FORMATS  # the measurements follow as text
        report = dynamic_report(settings, findings, "text" if human else output_format, report)
    _emit_report(report, output_file, report_to_stderr, colour)
    if getattr(report, "failed", None):  # --dynamic: a configured target could not be profiled
        raise click.exceptions.Exit(EXIT_ERROR)
    failed = bool(findings) or (exit_non_zero_on_fix and fixed > 0)
    raise click.exceptions.Exit(EXIT_FINDINGS if failed and not exit_zero else EXIT_CLEAN)


def _stdin_result(source: Optional[SourceFile], outcome: _FileOutcome, data: bytes) -> bytes:
    if source is None or outcome.fixed_text is None:
        return data
    try:
        return source.encode(outcome.fixed_text)
    except UnicodeEncodeError:  # a fix the file's encoding cannot hold: keep the input
        return data


def _configured_format(resolver: Resolver) -> Optional[str]:
    """The `output-format` of the configuration that governs the working directory (where Ruff
    reads it); a broken file there is reported by the files it governs, not here."""
    try:
        return resolver.for_path(".").output_format
    except ConfigError:
        return None


def _split_config_options(values: Tuple[str, ...]) -> Tuple[Optional[str], Dict[str, object]]:
    """``--config``: a file's path (at most one), or ``key = value`` settings (Ruff's form)."""
    path: Optional[str] = None
    overrides: Dict[str, object] = {}
    for value in values:
        if os.path.isfile(value) or "=" not in value:
            if path is not None:
                raise _fail(f"--config: one configuration file at most (got {path} and {value})")
            path = value
            continue
        try:
            overrides.update(parse_config_override(value))
        except ConfigError as error:
            raise _fail(str(error))
    return path, overrides


def _check_switches(**given: bool) -> None:
    """Switches that would do nothing, or contradict each other, together."""
    inspecting = [name for name in ("add_noqa", "show_files", "show_settings") if given[name]]
    for name in inspecting:
        option = "--" + name.replace("_", "-")
        for other in ("fix", "diff", "reading_stdin", "dynamic"):
            if given[other]:
                what = "standard input" if other == "reading_stdin" else "--" + other
                raise _fail(f"{option} cannot be combined with {what}")


def _inspect_or_add_noqa(
    files: List[str],
    missing: List[FileResult],
    resolver: Resolver,
    show_files: bool,
    show_settings: bool,
    add: bool,
    ignore_noqa: bool,
    quiet: bool,
) -> None:
    """--show-files, --show-settings and --add-noqa: each ends the run (exit 0, or 2 on an
    error) without a lint report."""
    failed = False
    for entry in missing:
        click.echo(f"torchmemlint: error: {entry.error}", err=True)
        failed = True
    try:
        if show_files:
            for path in sorted(os.path.abspath(file) for file in files):
                click.echo(path)
        if show_settings:
            if not files:
                raise _fail("--show-settings: no file to show the settings of")
            click.echo(reporting.show_settings(files[0], resolver.for_path(files[0])), nl=False)
        if add:
            added = 0
            for file in files:
                count, error = _add_noqa_one(file, resolver.for_path(file), False)
                added += count
                if error:
                    click.echo(f"torchmemlint: error: {error}", err=True)
                    failed = True
            if not quiet:
                plural = "" if added == 1 else "s"
                click.echo(f"Added {added} noqa directive{plural}.", err=True)
    except ConfigError as error:
        raise _fail(str(error))
    raise click.exceptions.Exit(EXIT_ERROR if failed else EXIT_CLEAN)


def _sources(findings: List[Finding], outcomes: List[_FileOutcome]) -> Dict[str, Optional[List[str]]]:
    """Each reported file's lines, for the ``full`` format's source excerpts."""
    texts = {o.path: o.fixed_text or o.original for o in outcomes if o.original is not None}
    sources: Dict[str, Optional[List[str]]] = {}
    for filename in dict.fromkeys(finding.filename for finding in findings):
        if is_notebook(filename):  # rows are a cell's: no excerpt from the notebook's JSON
            sources[filename] = None
            continue
        text = texts.get(filename)
        if text is None:
            try:
                text = read_source(filename).text
            except (SourceError, OSError):
                sources[filename] = None
                continue
        sources[filename] = LINE_BREAK.split(text)
    return sources


def _emit_report(
    report: str, output_file: Optional[str], to_stderr: bool, colour: bool = False
) -> None:
    if output_file is None:
        click.echo(report, nl=False, err=to_stderr, color=colour)
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
    if is_notebook(outcome.path):
        return cell_diff(outcome.path, outcome.original, outcome.fixed_text or "")
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
    """Run the language server (needs the `lsp` extra: pip install pygls, or './torchmemlint[lsp]' from the clone's directory)."""
    try:
        from torchmemlint.lsp import serve
    except ImportError as error:
        if (error.name or "").split(".")[0] not in ("pygls", "lsprotocol"):
            raise
        raise _fail("the language server needs pygls: pip install pygls lsprotocol (or './torchmemlint[lsp]' from the clone's directory)")
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
