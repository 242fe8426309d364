"""The language server and the project (torchmemlint/project.py): an unsaved edit in one open
buffer re-lints the open buffers whose findings depend on it. A real LSP client over stdio."""

from __future__ import annotations

import asyncio
import sys
from typing import List

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, default_converter, register_lsp_features

pytestmark = pytest.mark.slow  # a server process

PUBLISH = types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS
TIMEOUT = 30
CONFIG = '[tool.torchmemlint]\nextend-select = ["TML101"]\n'
BLOCK = (
    "import torch.nn as nn\n\n\nclass Block(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n"
    "        self.conv = nn.Conv2d(3, 8, 3)\n        self.pool = nn.MaxPool2d(2)\n\n"
    "    def forward(self, x):\n        return self.pool(self.conv(x))\n"
)
SUBCLASS = "from .blocks import Block\n\n\nclass Small(Block):\n    pass\n"
DELETES = SUBCLASS.replace("    pass\n", "    def __init__(self):\n        super().__init__()\n        del self.pool\n")


def client_recording_publishes() -> LanguageClient:
    """A client that keeps every diagnostics notification in order (``published``): waiting
    for "the next one" would miss a notification that arrives in the same read as another."""
    client = LanguageClient(converter_factory=default_converter)
    client.registrations = []
    client.published = []

    def publish(ls: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        client.diagnostics[params.uri] = params.diagnostics
        client.published.append(params)

    def register(ls: LanguageClient, params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)

    features = dict(DEFAULT_CLIENT_FEATURES, **{PUBLISH: publish, types.CLIENT_REGISTER_CAPABILITY: register})
    register_lsp_features(client, features)
    return client


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "torchmemlint", "lsp"],
        client_factory=client_recording_publishes,
    )
)
async def client(lsp_client: LanguageClient, request):
    root = request.getfixturevalue("tmp_path")
    (root / "pyproject.toml").write_text(CONFIG, encoding="utf-8")
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "blocks.py").write_text(BLOCK)
    (root / "pkg" / "small.py").write_text(SUBCLASS)
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=client_capabilities("visual-studio-code"), root_uri=root.as_uri())
    )
    lsp_client.root = root
    yield
    await lsp_client.shutdown_session()


def _published(client: LanguageClient, uri: str):
    """The first diagnostics published for ``uri`` from now on (others' are skipped)."""
    since = len(client.published)

    async def first():
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        while True:
            for params in client.published[since:]:
                if params.uri == uri:
                    return params
            if loop.time() > deadline:
                raise asyncio.TimeoutError(f"no diagnostics for {uri} in {TIMEOUT} s")
            await asyncio.sleep(0.02)

    return first()


async def _fix_titles(client: LanguageClient, uri: str, diagnostic) -> List[str]:
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic]),
        )
    )
    return [action.title for action in result or [] if action.title.startswith("Fix TML101")]


@pytest.mark.asyncio
async def test_an_unsaved_edit_in_a_subclass_relints_the_base_class(client: LanguageClient):
    blocks = (client.root / "pkg" / "blocks.py").as_uri()
    small = (client.root / "pkg" / "small.py").as_uri()
    waiting = asyncio.ensure_future(_published(client, blocks))
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=blocks, language_id="python", version=1, text=BLOCK)))
    [pool] = [d for d in (await waiting).diagnostics if d.code == "TML101"]
    assert await _fix_titles(client, blocks, pool) != []  # nothing else reaches self.pool yet

    waiting = asyncio.ensure_future(_published(client, small))
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=small, language_id="python", version=1, text=SUBCLASS)))
    await waiting
    # The subclass now deletes self.pool, in the editor only (the file on disk is unchanged):
    # blocks.py is linted again without being edited, and its fix is gone.
    relinted = asyncio.ensure_future(_published(client, blocks))
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=small, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=DELETES)],
    ))
    [pool] = [d for d in (await relinted).diagnostics if d.code == "TML101"]
    assert await _fix_titles(client, blocks, pool) == []

    # Closing the subclass's buffer: the disk's text (no del) counts again.
    relinted = asyncio.ensure_future(_published(client, blocks))
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=small)))
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=blocks, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=BLOCK + "\n")],
    ))
    [pool] = [d for d in (await relinted).diagnostics if d.code == "TML101"]
    assert await _fix_titles(client, blocks, pool) != []


# a conv and a norm: a block worth checkpointing (one norm alone would be TML402)
BN_BLOCK = (
    "import torch.nn as nn\n\n\nclass BNBlock(nn.Module):\n"
    "    def __init__(self, c):\n        super().__init__()\n"
    "        self.conv = nn.Conv2d(c, c, 3, padding=1)\n        self.norm = nn.BatchNorm2d(c)\n\n"
    "    def forward(self, x):\n        return self.norm(self.conv(x))\n"
)
CHECKPOINTS = (
    "import torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n\n"
    "from .bnblocks import BNBlock\n\n\nclass Net(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n        self.block = BNBlock(8)\n\n"
    "    def forward(self, x):\n        return checkpoint(self.block, x, use_reentrant=False)\n"
)


@pytest.mark.asyncio
async def test_an_unsaved_edit_in_a_block_relints_the_file_that_checkpoints_it(client: LanguageClient):
    """TML403 follows `BNBlock` into its file: turning its BatchNorm into a GroupNorm in the
    editor re-lints the open file that checkpoints it, and the finding goes."""
    (client.root / "pkg" / "bnblocks.py").write_text(BN_BLOCK)
    (client.root / "pkg" / "net.py").write_text(CHECKPOINTS)
    bnblocks = (client.root / "pkg" / "bnblocks.py").as_uri()
    net = (client.root / "pkg" / "net.py").as_uri()
    waiting = asyncio.ensure_future(_published(client, net))
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=net, language_id="python", version=1, text=CHECKPOINTS)))
    assert [d.code for d in (await waiting).diagnostics] == ["TML403"]

    waiting = asyncio.ensure_future(_published(client, bnblocks))
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=bnblocks, language_id="python", version=1, text=BN_BLOCK)))
    await waiting
    relinted = asyncio.ensure_future(_published(client, net))
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=bnblocks, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(
            text=BN_BLOCK.replace("nn.BatchNorm2d(c)", "nn.GroupNorm(4, c)"))],
    ))
    assert [d.code for d in (await relinted).diagnostics] == []
