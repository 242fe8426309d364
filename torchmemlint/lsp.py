"""Language server (``torchmemlint lsp``, stdio): diagnostics and fixes in the editor.

The engine does the work, as for the CLI: each document gets the settings the CLI would give
its file (the closest ``torchmemlint.toml`` or ``pyproject.toml`` with a ``[tool.torchmemlint]``
table above it, and the files its ``extend`` names), re-read when one of them changes: on the
client's file-watch events where it sends them, and otherwise because the server polls the config files' modification times. A
broken config is shown as an error message and the last good settings stay in force. The
server lints the buffer's text and turns findings into diagnostics and their fixes into code
actions (none for a rule ``fixable``/``unfixable`` keeps from fixing). It never imports or
runs the code it checks.

Requests are answered while a document is linted: lints run on a thread of their own, one at a
time, and a lint whose buffer has changed since it started is cancelled (an exception raised in
its thread) and its result dropped; the newer version is linted after the pause in typing.
Code actions read the last lint of the buffer, or lint on a second thread. A client's mistake
(a message that is not JSON, a request whose params do not fit its method, a request about a
document that is not open) is answered with a JSON-RPC error or ignored, and logged in one line.
"""

from __future__ import annotations

import asyncio
import ctypes
import io
import json
import logging
import os
import re
import threading
import tokenize
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Sequence, Tuple

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from torchmemlint import __version__
from torchmemlint.config import CONFIG_NAMES, ConfigError, Settings, find_config, load_settings
from torchmemlint.engine import SYNTAX_ERROR, is_excluded_file, lint_source, project_key
from torchmemlint.findings import Edit, Finding, Location
from torchmemlint.fixer import FixError, fix_text
from torchmemlint.incremental import Document
from torchmemlint.output import rule_url
from torchmemlint.output.report import without_unfixable
from torchmemlint.output.sarif import level_for
from torchmemlint.project import REGISTRY
from torchmemlint.sourcefile import line_starts, newline_of

SOURCE = "torchmemlint"
FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"
DEBOUNCE_SECONDS = 0.3
CONFIG_POLL_SECONDS = 1.0  # how often config files are stat'ed for clients that watch nothing
_NOQA_WITH_CODES = re.compile(r"#\s*noqa:\s*[A-Za-z]+[0-9]*(?:[\s,]+[A-Za-z]+[0-9]+)*", re.I)
_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "note": types.DiagnosticSeverity.Information,
}

log = logging.getLogger(__name__)
_INVALID_PARAMS, _PARSE_ERROR = -32602, -32700


class LintCancelled(BaseException):
    """Raised in the lint thread when the buffer it lints has changed (not an ``Exception``:
    the engine's per-rule error handling lets it through)."""


class _ClientMistake:
    """A message from the client that does not fit its method's schema."""

    jsonrpc = "2.0"

    def __init__(self, data: Dict[str, Any], error: BaseException) -> None:
        self.id = data.get("id")
        self.method = data.get("method")
        self.is_request = "id" in data and "method" in data
        cause = error.__cause__ or error
        self.reason = " ".join(str(cause).split())[:200] or type(cause).__name__


class _Protocol(LanguageServerProtocol):
    """pygls's protocol, answering a request with invalid params with a JSON-RPC error
    (pygls logs a traceback and answers nothing: the client would wait for ever)."""

    def structure_message(self, data: Dict[str, Any]) -> Any:
        if "jsonrpc" not in data:
            return data
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            return _ClientMistake(data, error)

    def handle_message(self, message: Any) -> None:
        if isinstance(message, _ClientMistake):
            log.warning("invalid %s from the client: %s", message.method or "message", message.reason)
            if message.is_request:
                self._send_response(
                    message.id,
                    None,
                    types.ResponseError(
                        code=_INVALID_PARAMS,
                        message=f"invalid params for {message.method}: {message.reason}",
                    ),
                )
            return
        super().handle_message(message)


class _OneLineForClientMistakes(logging.Filter):
    """pygls logs a traceback for a message it cannot read; the client's mistake is one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            if isinstance(error, (ValueError, JsonRpcException)):  # JSONDecodeError included
                record.msg = f"{record.getMessage()}: {type(error).__name__}: {error}"
                record.args = None
                record.exc_info = None
                record.exc_text = None
        return not record.getMessage().startswith("Unable to deserialize message")


class _Job:
    """One lint of one version of a buffer, on the lint thread."""

    def __init__(self, uri: str, version: Optional[int]) -> None:
        self.uri, self.version = uri, version
        self.thread: Optional[int] = None
        self.active = False
        self.cancelled = False


def _raise_in_thread(thread: int, error: Optional[type]) -> None:
    """Raise ``error`` in the thread (at its next Python instruction); None clears it."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread), ctypes.py_object(error) if error is not None else None
    )


class _Text:
    """A document's lines as the engine counts them, and position conversion for the client."""

    def __init__(self, source: str, units) -> None:
        self.source = source
        self.units = units  # pygls's counter for the negotiated encoding (UTF-16 by default)
        self.starts = line_starts(source)

    def line(self, row: int) -> str:
        """Row (1-based) without its line break."""
        start = self.starts[row - 1]
        end = self.starts[row] if row < len(self.starts) else len(self.source)
        return self.source[start:end].rstrip("\r\n")

    def position(self, location: Location) -> types.Position:
        row = min(max(location.row, 1), len(self.starts))
        prefix = self.line(row)[: max(location.column - 1, 0)]
        # An ASCII character is one code unit in every encoding a client may negotiate;
        # pygls counts character by character.
        units = len(prefix) if prefix.isascii() else self.units.num_units(prefix)
        return types.Position(line=row - 1, character=units)

    def range(self, start: Location, end: Location) -> types.Range:
        return types.Range(start=self.position(start), end=self.position(end))

    def location(self, position: types.Position) -> Location:
        """The engine's 1-based character location of a client position."""
        row = min(position.line + 1, len(self.starts))
        column = 0
        units = 0
        for char in self.line(row):
            if units >= position.character:
                break
            units += self.units.code_units_for_char(char)
            column += 1
        return Location(row, column + 1)

    def offset(self, location: Location) -> int:
        return self.starts[location.row - 1] + location.column - 1

    def location_of_offset(self, offset: int) -> Location:
        row = max(index for index, start in enumerate(self.starts) if start <= offset) + 1
        return Location(row, offset - self.starts[row - 1] + 1)


class TorchMemLintServer(LanguageServer):
    def __init__(self) -> None:
        # Whole-text sync: pygls splits lines on more characters than the LSP does.
        super().__init__(
            SOURCE,
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Full,
            protocol_cls=_Protocol,
        )
        # Lints run one at a time on their own thread (the Documents below are the lint
        # thread's); code actions that need a lint get a second thread.
        self.lint_thread = ThreadPoolExecutor(1, thread_name_prefix="torchmemlint-lint")
        self.request_thread = ThreadPoolExecutor(1, thread_name_prefix="torchmemlint-request")
        self.jobs: Dict[str, _Job] = {}  # per URI, the lint in flight
        self.job_lock = threading.Lock()
        self.pending: Dict[str, asyncio.TimerHandle] = {}
        self.settings_cache: Dict[Tuple, Tuple[Settings, Tuple]] = {}  # config signature: settings, extended files signature
        self.reported_config_errors: Dict[str, str] = {}  # per directory: the error shown
        self.last_good: Dict[str, Settings] = {}  # per directory, while its config is broken
        self.config_signatures: Dict[str, Tuple] = {}  # per URI, at its last lint
        # Per path, the last text linted, its settings and findings: a save, a re-open or a
        # config poll of unchanged text under unchanged settings reuses them (lint_source is
        # a function of the three).
        self.last_lint: Dict[str, Tuple[str, Settings, List[Finding]]] = {}
        # Per path, the parse of the buffer's last version: a re-lint parses only the
        # top-level statements an edit touched (incremental.Document).
        self.documents: Dict[str, Document] = {}
        # Per path, the project facts its last lint depended on (``engine.project_key``; "" when
        # no enabled rule reads other files): an edit in another buffer that changes them
        # re-lints it (``relint_dependants``).
        self.project_keys: Dict[str, str] = {}
        self.polling: Optional[asyncio.Task] = None

    # -- settings ---------------------------------------------------------------------------
    def settings_for(self, path: str) -> Settings:
        """The CLI's settings for ``path`` (the closest config above it), re-read when it changes.

        A config that is not valid TOML or has a bad value is shown once as an error message;
        meanwhile the directory keeps the last settings that loaded (the defaults if none did).
        """
        directory = os.path.dirname(path) or "."
        try:
            config = find_config(directory)
            if config is None:
                settings = Settings(root=self.workspace.root_path or os.getcwd())
            else:
                key = file_signature((config,))
                cached = self.settings_cache.get(key)
                # the files its `extend` brought in count too: editing one changes the settings
                if cached is None or cached[1] != file_signature(cached[0].extended):
                    loaded = load_settings(config)
                    cached = self.settings_cache[key] = (loaded, file_signature(loaded.extended))
                settings = cached[0]
        except (ConfigError, OSError) as error:
            message = str(error)
            if self.reported_config_errors.get(directory) != message:
                self.reported_config_errors[directory] = message
                kept = "the last good settings" if directory in self.last_good else "the defaults"
                self.window_show_message(
                    types.ShowMessageParams(
                        types.MessageType.Error,
                        f"torchmemlint: {message} (linting with {kept} until it is fixed)",
                    )
                )
            return self.last_good.get(
                directory, Settings(root=self.workspace.root_path or os.getcwd())
            )
        self.reported_config_errors.pop(directory, None)  # a later breakage is news again
        self.last_good[directory] = settings
        return settings

    async def poll_configs(self) -> None:
        """Relint a document when a config file on its path appears, changes or goes away.

        For clients that send no file-watch events (Neovim on Linux, among others): without
        this, a config edited outside the editor would count only from the next buffer edit.
        """
        while True:
            await asyncio.sleep(CONFIG_POLL_SECONDS)
            for uri in list(self.workspace.text_documents):
                document = self.workspace.get_text_document(uri)
                if uri in self.pending or not is_python(document):
                    continue
                known = self.config_signatures.get(uri)
                extended = known[1] if known else ()
                if known is None or config_signature(document.path, extended) != known[0]:
                    self.publish(uri)

    # -- linting ----------------------------------------------------------------------------
    def findings(self, document: TextDocument) -> Tuple[List[Finding], Settings, str]:
        path = document.path
        settings = self.settings_for(path)
        return self.lint(path, document.source, settings), settings, path

    def lint(self, path: str, source: str, settings: Settings) -> List[Finding]:
        """The buffer's findings, reusing its last lint and parse (the lint thread's)."""
        if is_excluded_file(path, settings):
            return []
        key = project_key(path, settings.codes_for_file(path), source)
        last = self.last_lint.get(path)
        if last is not None and last[0] == source and last[1] == settings and self.project_keys.get(path) == key:
            return list(last[2])
        document = self.documents.setdefault(path, Document())
        findings = settings_findings(lint_source(source, path, settings, document=document), settings)
        self.last_lint[path] = (source, settings, findings)
        self.project_keys[path] = key
        return list(findings)

    def request_findings(self, path: str, source: str, settings: Settings) -> List[Finding]:
        """For a code action, on the request thread: the last lint when it is of this text,
        else a lint of its own (without the buffer's parse, which the lint thread owns)."""
        if is_excluded_file(path, settings):
            return []
        last = self.last_lint.get(path)
        key = project_key(path, settings.codes_for_file(path), source)
        if last is not None and last[0] == source and last[1] == settings and self.project_keys.get(path) == key:
            return list(last[2])
        return lint_source(source, path, settings)

    def publish(self, uri: str) -> None:
        """Lint the buffer's current version on the lint thread, then publish its diagnostics
        (unless a newer version has superseded it meanwhile)."""
        self.pending.pop(uri, None)
        if uri not in self.workspace.text_documents:
            return  # closed meanwhile
        document = self.workspace.get_text_document(uri)
        if not is_python(document):
            return
        path, source, version = document.path, document.source, document.version
        REGISTRY.set_text(path, source)  # the other buffers' projects read this text
        settings = self.settings_for(path)  # here: it may message the client
        self.config_signatures[uri] = (config_signature(path, settings.extended), settings.extended)
        self.supersede(uri)
        job = self.jobs[uri] = _Job(uri, version)
        future = asyncio.get_running_loop().run_in_executor(
            self.lint_thread, self._run, job, path, source, settings
        )
        future.add_done_callback(lambda done: self._finished(job, done, source, version))

    def _run(self, job: _Job, path: str, source: str, settings: Settings) -> Optional[List[Finding]]:
        with self.job_lock:
            if job.cancelled:
                return None
            job.thread, job.active = threading.get_ident(), True
        try:
            try:
                return self.lint(path, source, settings)
            finally:
                self._stand_down(job, path)
        except LintCancelled:
            self._stand_down(job, path)
            return None

    def _stand_down(self, job: _Job, path: str) -> None:
        """Leave the lint: no cancellation can reach this thread after it."""
        while True:
            try:
                with self.job_lock:
                    job.active = False
                    _raise_in_thread(threading.get_ident(), None)  # one pending is dropped
                if job.cancelled:  # what it leaves may be half done: start afresh next time
                    self.documents.pop(path, None)
                    self.last_lint.pop(path, None)
                return
            except LintCancelled:
                continue

    def _finished(
        self, job: _Job, done: "asyncio.Future[Optional[List[Finding]]]", source: str,
        version: Optional[int],
    ) -> None:
        if self.jobs.get(job.uri) is job:
            del self.jobs[job.uri]
        if job.cancelled or done.cancelled():
            return
        error = done.exception()
        if error is not None:  # a bug must not take the editor's linting down with it
            log.error("linting %s failed: %s: %s", job.uri, type(error).__name__, error)
            self.window_log_message(
                types.LogMessageParams(types.MessageType.Error, f"torchmemlint failed on {job.uri}")
            )
            findings: List[Finding] = []
        else:
            findings = done.result() or []
        if job.uri not in self.workspace.text_documents:
            return
        text = _Text(source, self.workspace.position_codec.impl)
        diagnostics = [diagnostic(finding, text) for finding in findings]
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=job.uri, diagnostics=diagnostics, version=version)
        )
        self.relint_dependants(job.uri)

    def relint_dependants(self, changed: str) -> None:
        """Re-lint the other open buffers whose findings depend on project facts that the
        buffer ``changed`` has just changed (its class deleted an attribute another buffer's
        fix removes, say); buffers whose rules read no other file are left alone."""
        for uri in list(self.workspace.text_documents):
            if uri == changed or uri in self.pending or uri in self.jobs:
                continue
            document = self.workspace.get_text_document(uri)
            path = document.path
            if not is_python(document) or path not in self.project_keys or not self.project_keys[path]:
                continue
            try:
                key = project_key(path, self.settings_for(path).codes_for_file(path), document.source)
            except Exception as error:  # noqa: BLE001 - a buffer's project must not stop the others
                log.error("project of %s: %s: %s", uri, type(error).__name__, error)
                continue
            if key != self.project_keys[path]:
                self.publish(uri)

    def supersede(self, uri: str) -> None:
        """Cancel the lint in flight for ``uri``: its text is no longer the buffer's."""
        job = self.jobs.pop(uri, None)
        if job is None:
            return
        with self.job_lock:
            job.cancelled = True
            if job.active and job.thread is not None:
                _raise_in_thread(job.thread, LintCancelled)

    def schedule(self, uri: str) -> None:
        """Lint after the user pauses typing, not on every keystroke."""
        self.cancel(uri)
        self.supersede(uri)
        self.pending[uri] = asyncio.get_running_loop().call_later(
            DEBOUNCE_SECONDS, self.publish, uri
        )

    def cancel(self, uri: str) -> None:
        handle = self.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()

    def report_server_error(self, error: Exception, source: Any) -> None:
        """pygls's report of an error; a message that is not JSON gets JSON-RPC's parse error."""
        if isinstance(error, json.JSONDecodeError):
            self.protocol._send_response(  # type: ignore[attr-defined]
                None, None, types.ResponseError(code=_PARSE_ERROR, message=f"parse error: {error}")
            )
        log.error("%s: %s", type(error).__name__, error)

    def flush(self, timeout: float = 30.0) -> None:
        """Before answering ``shutdown``: publish the diagnostics of the buffers whose lint was
        still waiting or running, so that an edit made just before the editor closes (or a
        client that opens a document and shuts down at once) is not lost with the process."""
        waiting = set(self.pending) | set(self.jobs)
        for uri in list(self.pending):
            self.cancel(uri)
        try:
            self.lint_thread.submit(lambda: None).result(timeout)  # the lint in flight ends
        except Exception:  # noqa: BLE001 - one that does not end in time is cancelled below
            pass
        for job in list(self.jobs.values()):
            self.supersede(job.uri)  # its own callback publishes nothing now
        for uri in waiting:
            if uri not in self.workspace.text_documents:
                continue
            document = self.workspace.get_text_document(uri)
            if not is_python(document):
                continue
            findings, _, _ = self.findings(document)  # the lint just made: kept, not redone
            text = _Text(document.source, self.workspace.position_codec.impl)
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, diagnostics=[diagnostic(finding, text) for finding in findings],
                version=document.version,
            ))

    def relint_all(self) -> None:
        for uri in list(self.workspace.text_documents):
            self.cancel(uri)
            self.publish(uri)


def file_signature(paths: Sequence[str]) -> Tuple:
    """Size and modification time of each of ``paths`` that exists."""
    signature = []
    for candidate in paths:
        try:
            stat = os.stat(candidate)
        except OSError:
            continue
        signature.append((candidate, stat.st_mtime_ns, stat.st_size))
    return tuple(signature)


def config_signature(path: str, extended: Sequence[str] = ()) -> Tuple:
    """Size and modification time of every config file that could govern ``path``, and of the
    files its config's ``extend`` brings in (which may lie anywhere)."""
    candidates = []
    directory = os.path.dirname(os.path.abspath(path))
    while True:
        candidates.extend(os.path.join(directory, name) for name in CONFIG_NAMES)
        parent = os.path.dirname(directory)
        if parent == directory:
            return file_signature(candidates) + file_signature(extended)
        directory = parent


def settings_findings(findings: List[Finding], settings: Settings) -> List[Finding]:
    """The findings as the CLI reports them under ``settings``: a rule that ``fixable`` leaves out
    or ``unfixable`` names keeps its diagnostic but offers no fix."""
    return without_unfixable(findings, settings.fixable_codes())


def is_python(document: TextDocument) -> bool:
    return document.language_id == "python" or document.path.endswith((".py", ".pyi"))


def diagnostic(finding: Finding, text: _Text) -> types.Diagnostic:
    is_rule = finding.code != SYNTAX_ERROR
    return types.Diagnostic(
        range=text.range(finding.location, finding.end_location),
        message=finding.message,
        severity=_SEVERITY[level_for(finding.code)],
        code=finding.code,
        code_description=types.CodeDescription(href=rule_url(finding.code)) if is_rule else None,
        source=SOURCE,
    )


# -- code actions ---------------------------------------------------------------------------
def _text_edits(edits: Sequence[Edit], text: _Text) -> List[types.TextEdit]:
    newline = newline_of(text.source)
    return [
        types.TextEdit(
            range=text.range(edit.location, edit.end_location),
            new_text=edit.content.replace("\n", newline) if newline != "\n" else edit.content,
        )
        for edit in edits
    ]


def _rows_ending_in_code(source: str) -> Optional[set]:
    """Rows whose end is outside any string (a comment can go there); None if untokenizable."""
    rows = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL):
                rows.add(token.start[0])
    except (tokenize.TokenError, SyntaxError):
        return None
    return rows


def noqa_edit(finding: Finding, text: _Text) -> types.TextEdit:
    """Add the code to the `# noqa` of the finding's reported row, or a new one at its end.

    That row is where every surface reads it: the CLI and this server accept any row of the
    statement, flake8 only the reported one. When that row ends inside a string (a comment
    cannot go there), the last row of the statement that can take one is used instead, which
    flake8 does not see (docs/surfaces.md says so).
    """
    candidates = finding.noqa_rows or (finding.location.row,)
    safe_rows = _rows_ending_in_code(text.source)
    usable = [row for row in candidates if safe_rows is None or row in safe_rows]
    if safe_rows is None or finding.location.row in safe_rows:
        row = finding.location.row
    else:
        row = usable[-1] if usable else candidates[-1]
    line = text.line(row)
    existing = _NOQA_WITH_CODES.search(line)
    if existing:
        insert_at, addition = existing.end() + 1, f", {finding.code}"
    else:
        insert_at, addition = len(line) + 1, f"  # noqa: {finding.code}"
    where = Location(row, insert_at)
    return types.TextEdit(range=text.range(where, where), new_text=addition)


def _overlaps(finding: Finding, start: Location, end: Location) -> bool:
    return finding.location <= end and start <= finding.end_location


def _minimal_edit(old: str, new: str, text: _Text) -> types.TextEdit:
    """One edit covering only the changed middle, so the editor keeps cursor and folds."""
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    # Never split a "\r\n": a position inside it does not exist for the editor.
    if prefix and old[prefix - 1] == "\r" and old[prefix : prefix + 1] == "\n":
        prefix -= 1
    end = len(old) - suffix
    if suffix and old[end : end + 1] == "\n" and old[end - 1 : end] == "\r":
        suffix -= 1
    start = text.location_of_offset(prefix)
    end = text.location_of_offset(len(old) - suffix)
    return types.TextEdit(range=text.range(start, end), new_text=new[prefix : len(new) - suffix])


def _wants(only: Optional[Sequence[str]], kind: str) -> bool:
    return only is None or any(kind == wanted or kind.startswith(f"{wanted}.") for wanted in only)


def code_actions(
    server: TorchMemLintServer,
    params: types.CodeActionParams,
    settings: Optional[Settings] = None,
    source: Optional[str] = None,
) -> List[types.CodeAction]:
    uri = params.text_document.uri
    if uri not in server.workspace.text_documents:
        return []  # a document the client never opened: nothing to act on
    document = server.workspace.get_text_document(uri)
    if not is_python(document):
        return []
    path = document.path
    source = document.source if source is None else source
    settings = settings if settings is not None else server.settings_for(path)
    findings = server.request_findings(path, source, settings)
    text = _Text(source, server.workspace.position_codec.impl)
    only = params.context.only
    actions: List[types.CodeAction] = []

    if _wants(only, types.CodeActionKind.QuickFix.value):
        start, end = text.location(params.range.start), text.location(params.range.end)
        for finding in findings:
            if finding.code == SYNTAX_ERROR or not _overlaps(finding, start, end):
                continue
            shown = [diagnostic(finding, text)]
            if finding.fix is not None:
                unsafe = "" if finding.fix.is_safe else " (unsafe)"
                actions.append(
                    types.CodeAction(
                        title=f"Fix {finding.code}: {finding.fix.title}{unsafe}",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=shown,
                        is_preferred=finding.fix.is_safe,
                        edit=types.WorkspaceEdit(
                            changes={uri: _text_edits(finding.fix.edits, text)}
                        ),
                    )
                )
            actions.append(
                types.CodeAction(
                    title=f"Ignore {finding.code} with `# noqa: {finding.code}`",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=shown,
                    edit=types.WorkspaceEdit(changes={uri: [noqa_edit(finding, text)]}),
                )
            )

    if _wants(only, FIX_ALL_KIND) and any(f.fix_applies(False) for f in findings):

        def lint(source: str) -> List[Finding]:
            return settings_findings(lint_source(source, path, settings), settings)

        try:
            fixed = fix_text(source, lint, unsafe_fixes=False).text
        except FixError:  # a fix that would break the code: offer none rather than that
            fixed = source
        if fixed != source:
            actions.append(
                types.CodeAction(
                    title="Fix all safely fixable torchmemlint findings",
                    kind=FIX_ALL_KIND,
                    edit=types.WorkspaceEdit(
                        changes={uri: [_minimal_edit(source, fixed, text)]}
                    ),
                )
            )
    return actions


# -- wiring ---------------------------------------------------------------------------------
def create_server() -> TorchMemLintServer:
    server = TorchMemLintServer()

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: TorchMemLintServer, params: Any) -> None:
        ls.flush()

    @server.feature(types.INITIALIZED)
    async def initialized(ls: TorchMemLintServer, params: types.InitializedParams) -> None:
        # Polling costs a few stat calls a second and covers what watching misses (a client
        # that registers but never reports, a config created outside the workspace).
        if ls.polling is None:
            ls.polling = asyncio.ensure_future(ls.poll_configs())
        watching = ls.client_capabilities.workspace
        dynamic = watching and watching.did_change_watched_files
        if dynamic and dynamic.dynamic_registration:
            watchers = [types.FileSystemWatcher(glob_pattern=f"**/{name}") for name in CONFIG_NAMES]
            registration = types.Registration(
                id="torchmemlint-config",
                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers),
            )
            await ls.client_register_capability_async(types.RegistrationParams([registration]))

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TorchMemLintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TorchMemLintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: TorchMemLintServer, params: types.DidSaveTextDocumentParams) -> None:
        if params.text_document.uri.endswith(tuple(f"/{name}" for name in CONFIG_NAMES)):
            ls.relint_all()  # a config edited in the editor itself
        else:
            ls.cancel(params.text_document.uri)
            ls.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TorchMemLintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.cancel(params.text_document.uri)
        ls.supersede(params.text_document.uri)
        ls.last_lint.pop(to_fs_path(params.text_document.uri) or "", None)
        REGISTRY.set_text(to_fs_path(params.text_document.uri) or "", None)  # the disk's again
        ls.project_keys.pop(to_fs_path(params.text_document.uri) or "", None)
        ls.documents.pop(to_fs_path(params.text_document.uri) or "", None)
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched_files(ls: TorchMemLintServer, params: types.DidChangeWatchedFilesParams) -> None:
        names = tuple(f"/{name}" for name in CONFIG_NAMES)
        if any(change.uri.endswith(names) for change in params.changes):
            ls.relint_all()

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[
                types.CodeActionKind.QuickFix,
                types.CodeActionKind.SourceFixAll,
                FIX_ALL_KIND,
            ]
        ),
    )
    async def code_action(
        ls: TorchMemLintServer, params: types.CodeActionParams
    ) -> List[types.CodeAction]:
        uri = params.text_document.uri
        if uri not in ls.workspace.text_documents:
            return []
        document = ls.workspace.get_text_document(uri)
        if not is_python(document):
            return []
        settings = ls.settings_for(document.path)  # here: it may message the client
        return await asyncio.get_running_loop().run_in_executor(
            ls.request_thread, code_actions, ls, params, settings, document.source
        )

    return server


def serve() -> None:
    quiet = _OneLineForClientMistakes()
    for name in ("pygls.server", "pygls.protocol.json_rpc", "pygls.protocol.language_server"):
        logging.getLogger(name).addFilter(quiet)
    create_server().start_io()
