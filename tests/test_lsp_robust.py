"""The language server against client mistakes and large buffers, over raw JSON-RPC.

A raw client (JSON-RPC framed by hand on the server's stdin and stdout, as an editor does)
can send what a typed client refuses to build: params of the wrong shape, a body that is not
JSON. Every request must get an answer, the log no traceback; a large buffer is linted in the
background and its lint is cancelled when a newer version arrives.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_robustness import BLOCK, GOOD  # the CLI robustness tests' good file and block

REPO = Path(__file__).resolve().parent.parent


class RawClient:
    def __init__(self, root: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TORCHMEMLINT"))}
        env["PYTHONPATH"] = str(REPO)
        self.log = open(root / "server.log", "w+b")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "torchmemlint", "lsp"],
            cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env,
        )
        self.root = root
        self.messages: "queue.Queue[dict]" = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    return
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
                elif line in (b"\r\n", b"\n"):
                    break
            self.messages.put(json.loads(stream.read(length)))

    def send_raw(self, body: bytes) -> None:
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def send(self, message: dict) -> None:
        self.send_raw(json.dumps({"jsonrpc": "2.0", **message}).encode())

    def request(self, method: str, params=None, **extra) -> int:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, **extra}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.next_id

    def notify(self, method: str, params) -> None:
        self.send({"method": method, "params": params})

    def wait_for(self, predicate, timeout: float = 30) -> dict:
        """The first message that fits; the ones before it are kept in ``seen``."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("no such message from the server in time")
            try:
                message = self.messages.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append(message)
            if predicate(message):
                return message

    seen: list

    def response(self, request_id, timeout: float = 30) -> dict:
        return self.wait_for(lambda m: "method" not in m and m.get("id") == request_id, timeout)

    def start(self) -> None:
        self.seen = []
        ident = self.request(
            "initialize", {"processId": None, "rootUri": self.root.as_uri(), "capabilities": {}}
        )
        self.response(ident)
        self.notify("initialized", {})

    def open(self, name: str, text: str, version: int = 1) -> str:
        uri = (self.root / name).as_uri()
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}},
        )
        return uri

    def published(self, uri: str, version=None, timeout: float = 30) -> dict:
        return self.wait_for(
            lambda m: m.get("method") == "textDocument/publishDiagnostics"
            and m["params"]["uri"] == uri
            and (version is None or m["params"].get("version") == version),
            timeout,
        )

    def stop(self) -> bytes:
        try:
            self.response(self.request("shutdown"), timeout=60)
            self.notify("exit", None)
            self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self.log.seek(0)
            log = self.log.read()
            self.log.close()
        return log


def code_action(uri: str, line: int = 0) -> dict:
    return {
        "textDocument": {"uri": uri},
        "range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 200}},
        "context": {"diagnostics": []},
    }


def test_every_request_is_answered_and_no_traceback_is_logged(tmp_path):
    client = RawClient(tmp_path)
    try:
        client.start()
        uri = client.open("model.py", GOOD)
        assert client.published(uri)["params"]["diagnostics"][0]["code"] == "TML401"

        # params of the wrong shape, or none: a JSON-RPC error (invalid params), not silence
        for params in ({"textDocument": 5}, None, [1, 2], {"textDocument": {"uri": uri}}):
            answer = client.response(client.request("textDocument/codeAction", params))
            assert answer["error"]["code"] == -32602, answer
        # a body that is not JSON: JSON-RPC's parse error
        client.send_raw(b'{"jsonrpc": "2.0", "id": 99, "method": ')
        assert client.wait_for(lambda m: m.get("error", {}).get("code") == -32700)
        # an unknown method
        answer = client.response(client.request("torchmemlint/nothing", {}))
        assert answer["error"]["code"] == -32601
        # notifications of the wrong shape, or about documents never opened: ignored
        client.notify("textDocument/didOpen", {"textDocument": {"uri": 3}})
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri}})
        never = (tmp_path / "never.py").as_uri()
        client.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": never, "version": 2}, "contentChanges": [{"text": "x = 1\n"}]},
        )
        client.notify("textDocument/didClose", {"textDocument": {"uri": never}})
        # a code action for a document that is not open: an empty answer
        answer = client.response(client.request("textDocument/codeAction", code_action(never)))
        assert answer["result"] == []
        # and the server still works
        actions = client.response(client.request("textDocument/codeAction", code_action(uri, 1)))
        assert any("TML401" in action["title"] for action in actions["result"])
    finally:
        log = client.stop()
    assert b"Traceback" not in log, log.decode()


@pytest.mark.slow
def test_a_large_buffer_is_linted_in_the_background_and_cancelled_by_a_newer_version(tmp_path):
    head = "import torch\nimport torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n"
    large = head + "".join(BLOCK.format(i=i) for i in range(5000))  # 50,003 lines
    client = RawClient(tmp_path)
    try:
        client.start()
        small = client.open("small.py", GOOD)
        client.published(small)
        big = client.open("big.py", large)
        time.sleep(0.5)  # its lint has started
        started = time.monotonic()
        answer = client.response(client.request("textDocument/codeAction", code_action(small, 1)))
        assert time.monotonic() - started < 5  # answered while the large buffer is linted
        assert any("TML401" in action["title"] for action in answer["result"])
        assert not [m for m in client.seen if m.get("params", {}).get("uri") == big]
        # a newer version supersedes the lint in flight: only its diagnostics are published
        client.send(
            {
                "method": "textDocument/didChange",
                "params": {
                    "textDocument": {"uri": big, "version": 2},
                    "contentChanges": [{"text": GOOD}],
                },
            }
        )
        published = client.published(big, version=2, timeout=60)
        assert [d["code"] for d in published["params"]["diagnostics"]] == ["TML401"]
        assert time.monotonic() - started < 20  # not after the 50,000-line lint
        stale = [
            m for m in client.seen
            if m.get("method") == "textDocument/publishDiagnostics"
            and m["params"]["uri"] == big and m["params"].get("version") == 1
        ]
        assert not stale
    finally:
        log = client.stop()
    assert b"Traceback" not in log, log.decode()
