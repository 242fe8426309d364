"""The language server end to end: a real LSP client talks to `torchmemlint lsp` over stdio.

The server runs with the test-only rules of tests/data/surface_rules registered: TML990 (on by
default, safe fix) and TML991 (off by default, unsafe fix), so the test does not depend on the
fixes the real rules happen to offer.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities, make_test_lsp_client

from torchmemlint.output import DOCS_URL

LAUNCH = str(Path(__file__).parent / "data" / "surface_rules" / "launch.py")
SERVER = [sys.executable, LAUNCH, "torchmemlint", "lsp"]
PUBLISH = types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS
TIMEOUT = 20

CONFIG = '[tool.torchmemlint]\nextend-select = ["TML991"]\n'
# Non-ASCII before the finding: "ö" is 1 UTF-16 unit and 2 UTF-8 bytes, "😀" 2 units and 4 bytes.
MODEL = (
    "import torch\n"
    "from torch.autograd import Variable\n"
    "\n"
    'größe = "😀"; a = Variable(torch.ones(2))\n'
    "b = torch.zeros(2, 3)\n"
)
UNITS = {"utf-8": 1, "utf-16": 2, "utf-32": 4}


def units(text: str, encoding: str) -> int:
    """Length of ``text`` in the code units of an LSP position encoding."""
    return len(text.encode(f"{encoding}-le" if encoding != "utf-8" else "utf-8")) // UNITS[encoding]


def offset(text: str, position: types.Position, encoding: str = "utf-16") -> int:
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    line_start = starts[position.line]
    index = line_start
    while units(text[line_start:index], encoding) < position.character:
        index += 1
    return index


def apply_edits(text: str, edit: types.WorkspaceEdit, uri: str) -> str:
    edits = sorted(
        edit.changes[uri],
        key=lambda e: (e.range.start.line, e.range.start.character),
        reverse=True,
    )
    for change in edits:
        start, end = offset(text, change.range.start), offset(text, change.range.end)
        text = text[:start] + change.new_text + text[end:]
    return text


def client_recording_registrations() -> LanguageClient:
    client = make_test_lsp_client()
    client.registrations = []

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(ls: LanguageClient, params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)

    return client


async def start(client: LanguageClient, root: Path, capabilities) -> None:
    (root / "pyproject.toml").write_text(CONFIG, encoding="utf-8")
    await client.initialize_session(
        types.InitializeParams(capabilities=capabilities, root_uri=root.as_uri())
    )


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=SERVER, client_factory=client_recording_registrations)
)
async def client(lsp_client: LanguageClient, request):
    root = request.getfixturevalue("tmp_path")
    await start(lsp_client, root, client_capabilities("visual-studio-code"))
    lsp_client.root = root
    yield
    await lsp_client.shutdown_session()


async def open_and_wait(client: LanguageClient, name: str, text: str, version: int = 1):
    uri = (client.root / name).as_uri()
    waiting = client.protocol.wait_for_notification_async(PUBLISH)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
        )
    )
    return uri, await asyncio.wait_for(waiting, TIMEOUT)


async def change_and_wait(client: LanguageClient, uri: str, text: str, version: int):
    waiting = client.protocol.wait_for_notification_async(PUBLISH)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )
    return await asyncio.wait_for(waiting, TIMEOUT)


async def actions_at(client, uri, diagnostic, only=None) -> List[types.CodeAction]:
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic], only=only),
        )
    )
    return result or []


def by_code(diagnostics) -> dict:
    return {diagnostic.code: diagnostic for diagnostic in diagnostics}


@pytest.mark.slow
@pytest.mark.asyncio
async def test_diagnostics_quick_fixes_noqa_and_fix_all(client: LanguageClient):
    uri, published = await open_and_wait(client, "model.py", MODEL)
    found = by_code(published.diagnostics)
    assert sorted(found) == ["TML990", "TML991"]

    # Exact ranges, in UTF-16 units after the non-ASCII prefix.
    line = MODEL.splitlines()[3]
    variable = found["TML990"]
    assert (variable.range.start.line, variable.range.end.line) == (3, 3)
    assert variable.range.start.character == units(line[: line.index("Variable")], "utf-16")
    assert variable.range.end.character == units(line[: line.index(")") + 2], "utf-16")
    assert variable.code_description.href.startswith(f"{DOCS_URL}#tml990")
    assert variable.source == "torchmemlint"
    # Severity by rule: a default rule warns, an opt-in rule informs.
    assert variable.severity == types.DiagnosticSeverity.Warning
    assert found["TML991"].severity == types.DiagnosticSeverity.Information

    offered = await actions_at(client, uri, variable)
    quick = {a.title: a for a in offered if a.kind == types.CodeActionKind.QuickFix}
    assert set(quick) == {"Fix TML990: Use the tensor", "Ignore TML990 with `# noqa: TML990`"}
    assert quick["Fix TML990: Use the tensor"].kind == types.CodeActionKind.QuickFix
    unsafe = {a.title for a in await actions_at(client, uri, found["TML991"])}
    assert "Fix TML991: Use `torch.empty` (unsafe)" in unsafe

    # source.fixAll applies the safe fix only.
    fix_all = await actions_at(client, uri, variable, only=[types.CodeActionKind.SourceFixAll])
    assert [a.kind for a in fix_all] == ["source.fixAll.torchmemlint"]
    all_fixed = apply_edits(MODEL, fix_all[0].edit, uri)
    assert "Variable(" not in all_fixed.splitlines()[3] and "torch.zeros(2, 3)" in all_fixed

    # Apply the quick fix: its diagnostic goes away, the other stays.
    fixed = apply_edits(MODEL, quick["Fix TML990: Use the tensor"].edit, uri)
    assert fixed == all_fixed
    published = await change_and_wait(client, uri, fixed, 2)
    assert [d.code for d in published.diagnostics] == ["TML991"]

    # Ignore the other one with a noqa comment: nothing is left.
    ignore = [
        a for a in await actions_at(client, uri, published.diagnostics[0]) if "noqa" in a.title
    ][0]
    silenced = apply_edits(fixed, ignore.edit, uri)
    assert silenced.splitlines()[4] == "b = torch.zeros(2, 3)  # noqa: TML991"
    published = await change_and_wait(client, uri, silenced, 3)
    assert list(published.diagnostics) == [] and published.version == 3


@pytest.mark.slow
@pytest.mark.asyncio
async def test_noqa_goes_on_the_reported_row_and_extends_an_existing_noqa(client):
    text = (
        "import torch\n"
        "a = torch.autograd.Variable(\n"
        "    torch.ones(2)\n"
        ")\n"
        "b = torch.autograd.Variable(torch.ones(2))  # noqa: E501\n"
    )
    uri, published = await open_and_wait(client, "multi.py", text)
    assert [d.range.start.line for d in published.diagnostics] == [1, 4]
    for diagnostic in published.diagnostics:
        action = [a for a in await actions_at(client, uri, diagnostic) if "noqa" in a.title][0]
        text = apply_edits(text, action.edit, uri)
    # On the reported row, the one flake8 reads too (the CLI and the server read any row).
    assert text.splitlines()[1] == "a = torch.autograd.Variable(  # noqa: TML990"
    assert text.splitlines()[4].endswith("# noqa: E501, TML990")
    assert list((await change_and_wait(client, uri, text, 2)).diagnostics) == []


@pytest.mark.slow
@pytest.mark.asyncio
async def test_changes_are_debounced_to_the_latest_version(client):
    uri, _ = await open_and_wait(client, "typing.py", "import torch\n")
    waiting = client.protocol.wait_for_notification_async(PUBLISH)
    typed = "import torch\n"
    for version, piece in enumerate(("a = torch.autograd.", "Variable(", "x)\n"), start=2):
        typed += piece
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=typed)],
            )
        )
    published = await asyncio.wait_for(waiting, TIMEOUT)
    # Linted once, after the last keystroke: no half-typed version was published first.
    assert published.version == 4
    assert [d.code for d in published.diagnostics] == ["TML990"]


@pytest.mark.slow
@pytest.mark.asyncio
async def test_config_is_reloaded_when_it_changes(client):
    uri, published = await open_and_wait(client, "model.py", MODEL)
    # The server asks the editor to watch the config files (right after `initialized`).
    for _ in range(TIMEOUT * 10):
        if client.registrations:
            break
        await asyncio.sleep(0.1)
    [registration] = client.registrations
    assert registration.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
    assert sorted(w["globPattern"] for w in registration.register_options["watchers"]) == [
        "**/pyproject.toml",
        "**/torchmemlint.toml",
    ]
    assert sorted(by_code(published.diagnostics)) == ["TML990", "TML991"]

    config = client.root / "pyproject.toml"
    config.write_text('[tool.torchmemlint]\nignore = ["TML990"]\n', encoding="utf-8")
    waiting = client.protocol.wait_for_notification_async(PUBLISH)
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            [types.FileEvent(uri=config.as_uri(), type=types.FileChangeType.Changed)]
        )
    )
    published = await asyncio.wait_for(waiting, TIMEOUT)
    assert list(published.diagnostics) == []  # TML991 is off by default again, TML990 ignored

    config.write_text("[tool.torchmemlint]\nselect = [\"NOPE\"]\n", encoding="utf-8")
    waiting = client.protocol.wait_for_notification_async(PUBLISH)
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            [types.FileEvent(uri=config.as_uri(), type=types.FileChangeType.Changed)]
        )
    )
    published = await asyncio.wait_for(waiting, TIMEOUT)
    [shown] = [message for message in client.messages if "NOPE" in message.message]
    assert shown.type == types.MessageType.Error
    assert f"{config}:2:" in shown.message and "last good settings" in shown.message
    assert list(published.diagnostics) == []  # the last good settings meanwhile


NEOVIM = client_capabilities("neovim")  # the newest Neovim pytest-lsp knows: no file watching


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def neovim(lsp_client: LanguageClient, request):
    root = request.getfixturevalue("tmp_path")
    watching = NEOVIM.workspace.did_change_watched_files
    assert watching is None or not watching.dynamic_registration
    await start(lsp_client, root, NEOVIM)
    lsp_client.root = root
    yield
    await lsp_client.shutdown_session()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_config_edits_count_without_file_watch_events_or_buffer_edits(neovim):
    client = neovim
    uri, published = await open_and_wait(client, "model.py", MODEL)
    assert sorted(by_code(published.diagnostics)) == ["TML990", "TML991"]
    config = client.root / "pyproject.toml"

    # Edited outside the editor: no event, no buffer change; the server notices by itself.
    waiting = client.protocol.wait_for_notification_async(PUBLISH)
    config.write_text('[tool.torchmemlint]\nignore = ["TML990"]\n', encoding="utf-8")
    published = await asyncio.wait_for(waiting, TIMEOUT)
    assert list(published.diagnostics) == []

    # Broken (an unclosed list): a visible error naming file and line; last good settings.
    waiting = client.protocol.wait_for_notification_async(PUBLISH)
    config.write_text('[tool.torchmemlint]\nselect = ["TML4"\n', encoding="utf-8")
    published = await asyncio.wait_for(waiting, TIMEOUT)
    assert list(published.diagnostics) == []
    [shown] = [message for message in client.messages if "invalid TOML" in message.message]
    assert f"{config}:2: invalid TOML" in shown.message
    # Shown once, not on every lint while it stays broken (here: after an edit of the buffer).
    edited = MODEL + "c = 1\n"
    assert list((await change_and_wait(client, uri, edited, 2)).diagnostics) == []
    assert len([m for m in client.messages if "invalid TOML" in m.message]) == 1

    # Repaired: back in force. A closer torchmemlint.toml, created later, governs the files of
    # its directory, as for the CLI.
    config.write_text(CONFIG, encoding="utf-8")
    published = await asyncio.wait_for(waiting_for(client, uri), TIMEOUT)
    assert sorted(by_code(published.diagnostics)) == ["TML990", "TML991"]
    (client.root / "sub").mkdir()
    sub_uri, sub = await open_and_wait(client, "sub/model.py", MODEL)
    assert sorted(by_code(sub.diagnostics)) == ["TML990", "TML991"]
    (client.root / "sub" / "torchmemlint.toml").write_text('ignore = ["TML99"]\n')
    published = await asyncio.wait_for(waiting_for(client, sub_uri), TIMEOUT)
    assert list(published.diagnostics) == []
    assert not [m for m in client.messages if "sub" in m.message]


async def waiting_for(client: LanguageClient, uri: str):
    """The next diagnostics published for ``uri`` (others may come first)."""
    while True:
        published = await client.protocol.wait_for_notification_async(PUBLISH)
        if published.uri == uri:
            return published


@pytest.mark.slow
@pytest.mark.asyncio
async def test_unparsable_buffer_gives_one_syntax_diagnostic_and_code_never_runs(client):
    marker = client.root / "ran.txt"
    broken = f"import torch\nopen({str(marker)!r}, 'w').close()\ndef f(:\n"
    uri, published = await open_and_wait(client, "broken.py", broken)
    assert [(d.code, d.severity) for d in published.diagnostics] == [
        ("E999", types.DiagnosticSeverity.Error)
    ]
    assert published.diagnostics[0].range.start.line == 2
    repaired = broken.replace("def f(:\n", "a = torch.autograd.Variable(x)\n")
    published = await change_and_wait(client, uri, repaired, 2)
    assert [d.code for d in published.diagnostics] == ["TML990"]  # the server lived on
    assert not marker.exists()


@pytest_lsp.fixture(
    params=["utf-8", "utf-32"],
    config=ClientServerConfig(server_command=SERVER),
)
async def client_with_encoding(lsp_client: LanguageClient, request):
    root = request.getfixturevalue("tmp_path")
    capabilities = types.ClientCapabilities(
        general=types.GeneralClientCapabilities(position_encodings=[request.param])
    )
    await start(lsp_client, root, capabilities)
    lsp_client.root = root
    lsp_client.encoding = request.param
    yield
    await lsp_client.shutdown_session()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_ranges_follow_the_negotiated_position_encoding(client_with_encoding):
    client = client_with_encoding
    _, published = await open_and_wait(client, "model.py", MODEL)
    line = MODEL.splitlines()[3]
    start = by_code(published.diagnostics)["TML990"].range.start
    assert start.character == units(line[: line.index("Variable")], client.encoding)


def _framed(message: dict) -> bytes:
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _unframed(stream: bytes) -> List[dict]:
    messages = []
    while stream.strip():
        header, _, rest = stream.partition(b"\r\n\r\n")
        length = int(re.search(rb"Content-Length: (\d+)", header).group(1))
        messages.append(json.loads(rest[:length]))
        stream = rest[length:]
    return messages


@pytest.mark.slow
def test_the_server_process_never_imports_torch_while_it_lints(tmp_path):
    # The installed command, every rule selected, one document linted, then a clean exit;
    # -X importtime lists every module the process imported.
    (tmp_path / "pyproject.toml").write_text('[tool.torchmemlint]\nselect = ["ALL"]\n')
    text = "import torch\nfrom torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x)\n"
    session = [
        {"id": 1, "method": "initialize",
         "params": {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}},
        {"method": "initialized", "params": {}},
        {"method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": (tmp_path / "m.py").as_uri(), "languageId": "python", "version": 1,
            "text": text}}},
        {"id": 2, "method": "shutdown"},
        {"method": "exit"},
    ]
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "torchmemlint", "lsp"],
        input=b"".join(_framed({"jsonrpc": "2.0", **message}) for message in session),
        cwd=tmp_path, capture_output=True, timeout=120,
    )
    published = [m["params"] for m in _unframed(result.stdout) if m.get("method") == PUBLISH]
    assert "TML401" in [d["code"] for d in published[0]["diagnostics"]]
    imported = re.findall(r"\|\s+([\w.]+)\s*$", result.stderr.decode(), re.M)
    assert "torchmemlint.lsp" in imported
    assert not [name for name in imported if name == "torch" or name.startswith("torch.")]


def _surface(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI or flake8, with the test-only rules registered, as a subprocess."""
    return subprocess.run(
        [sys.executable, LAUNCH, *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def _tml_rows(result: subprocess.CompletedProcess) -> List[tuple]:
    assert "Traceback" not in result.stderr, result.stderr
    rows = []
    for line in result.stdout.splitlines():
        parts = line.split(":", 3)
        if len(parts) == 4 and parts[3].split()[0].startswith("TML"):
            rows.append((int(parts[1]), parts[3].split()[0]))
    return sorted(rows)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_after_the_noqa_action_the_cli_flake8_and_the_server_are_all_silent(client):
    # Multi-line statements (flake8 reads `# noqa` on the reported row only), a finding in a
    # compound statement's header, two findings on one row, and a rule enabled by the config.
    text = (
        "import torch\n"
        "a = torch.autograd.Variable(\n"
        "    torch.ones(2)\n"
        ")\n"
        "for v in torch.autograd.Variable(\n"
        "    torch.ones(2)\n"
        "):\n"
        "    pass\n"
        "c = torch.zeros(2, 3); d = torch.autograd.Variable(\n"
        "    1)\n"
    )
    path = client.root / "model.py"
    path.write_text(text, encoding="utf-8")
    expected = [(2, "TML990"), (5, "TML990"), (9, "TML990"), (9, "TML991")]
    assert _tml_rows(_surface("torchmemlint", "check", "model.py", cwd=client.root)) == expected
    assert _tml_rows(_surface("flake8", "model.py", cwd=client.root)) == expected

    uri, published = await open_and_wait(client, "model.py", text)
    version = 1
    while published.diagnostics:
        [action] = [
            a for a in await actions_at(client, uri, published.diagnostics[0]) if "noqa" in a.title
        ]
        text = apply_edits(text, action.edit, uri)
        version += 1
        published = await change_and_wait(client, uri, text, version)
    assert version == 1 + len(expected)
    assert text.splitlines()[8].endswith("# noqa: TML991, TML990")

    path.write_text(text, encoding="utf-8")
    assert _tml_rows(_surface("torchmemlint", "check", "model.py", cwd=client.root)) == []
    assert _tml_rows(_surface("flake8", "model.py", cwd=client.root)) == []


@pytest.mark.slow
@pytest.mark.asyncio
async def test_extended_base_config_and_unfixable_count_as_in_the_cli(neovim):
    # A config that `extend`s a shared base outside the project: editing the base (outside the
    # editor, no watch events) re-lints; `unfixable` keeps the diagnostic but offers no fix,
    # neither as a quick fix nor in fix-all.
    client = neovim
    base = client.root / "shared" / "base.toml"
    base.parent.mkdir()
    base.write_text('extend-select = ["TML991"]\n', encoding="utf-8")
    project = client.root / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[tool.torchmemlint]\nextend = "../shared/base.toml"\n', encoding="utf-8"
    )
    uri, published = await open_and_wait(client, "project/model.py", MODEL)
    found = by_code(published.diagnostics)
    assert sorted(found) == ["TML990", "TML991"]
    titles = {a.title for a in await actions_at(client, uri, found["TML990"])}
    assert "Fix TML990: Use the tensor" in titles

    waiting = client.protocol.wait_for_notification_async(PUBLISH)
    base.write_text('extend-select = ["TML991"]\nunfixable = ["TML990"]\n', encoding="utf-8")
    published = await asyncio.wait_for(waiting, TIMEOUT)
    found = by_code(published.diagnostics)
    assert sorted(found) == ["TML990", "TML991"]  # still reported
    titles = {a.title for a in await actions_at(client, uri, found["TML990"])}
    assert titles == {"Ignore TML990 with `# noqa: TML990`"}  # but not fixed
    fix_all = await actions_at(client, uri, found["TML990"], only=[types.CodeActionKind.SourceFixAll])
    assert fix_all == []

    waiting = client.protocol.wait_for_notification_async(PUBLISH)
    base.write_text("\n", encoding="utf-8")  # the base selects nothing more now
    published = await asyncio.wait_for(waiting, TIMEOUT)
    assert sorted(by_code(published.diagnostics)) == ["TML990"]
