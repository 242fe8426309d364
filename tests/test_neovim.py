"""docs/surfaces.md's Neovim 0.7+ set-up, verbatim, in a real headless Neovim.

Neovim comes from the system (Debian stable ships 0.7.2: `apt-get install neovim`, which
.ci/run does); the test fails, never skips, without it. The block is copied out of the docs,
so the documented set-up is what runs: diagnostics arrive, and the "Ignore" quick fix, applied
and saved by Neovim, silences the finding for Neovim, the CLI and flake8.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODEL = "from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x)\n"

# Waits for diagnostics, writes them out, applies the server's "Ignore" action as the editor
# applies a workspace edit, saves, waits for the diagnostics to clear. Neovim 0.7's API.
HARNESS = r"""
local function dump(name)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(0)) do
    local code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code) or "?"
    table.insert(out, string.format("%d:%d:%s:%d:%s", d.lnum + 1, d.col + 1, code, d.severity,
      d.source or ""))
  end
  vim.fn.writefile(out, name)
end
vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 100)
dump("before.txt")
local d = vim.diagnostic.get(0)[1]
local params = vim.lsp.util.make_range_params()
params.range = { start = { line = d.lnum, character = d.col },
                 ["end"] = { line = d.end_lnum, character = d.end_col } }
params.context = { diagnostics = { { range = params.range, message = d.message,
                   code = d.user_data.lsp.code, severity = d.severity, source = d.source } } }
local titles = {}
for _, response in pairs(vim.lsp.buf_request_sync(0, "textDocument/codeAction", params, 60000) or {}) do
  for _, action in ipairs(response.result or {}) do
    table.insert(titles, action.title)
    if action.title:find("noqa") then vim.lsp.util.apply_workspace_edit(action.edit, "utf-16") end
  end
end
vim.fn.writefile(titles, "actions.txt")
vim.cmd("silent write")
vim.wait(60000, function() return #vim.diagnostic.get(0) == 0 end, 100)
dump("after.txt")
vim.cmd("qa!")
"""


def documented_setup() -> str:
    text = (ROOT / "docs" / "surfaces.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- neovim-0\.7 -->\n```lua\n(.*?)```\n<!-- /neovim-0\.7 -->", text, re.S)
    assert match, "docs/surfaces.md lacks the <!-- neovim-0.7 --> block"
    return match.group(1)


@pytest.mark.slow
def test_the_documented_neovim_setup_lints_and_ignores_in_neovim_0_7(tmp_path):
    nvim = shutil.which("nvim")
    assert nvim, "Neovim is needed for this test: apt-get install neovim (.ci/run does)"
    version = subprocess.run([nvim, "--version"], capture_output=True, text=True).stdout
    (tmp_path / "init.lua").write_text('vim.cmd("filetype on")\n' + documented_setup())
    (tmp_path / "harness.lua").write_text(HARNESS)
    (tmp_path / "model.py").write_text(MODEL)
    # `torchmemlint` as the docs call it: the one installed next to this Python.
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    env["XDG_STATE_HOME"] = env["XDG_DATA_HOME"] = env["XDG_CONFIG_HOME"] = str(tmp_path)
    result = subprocess.run(
        [nvim, "--headless", "-u", "init.lua", "model.py", "-c", "luafile harness.lua"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )
    assert (tmp_path / "after.txt").exists(), (version, result.stdout, result.stderr)
    # 2 = vim.diagnostic.severity.WARN: a default rule is a warning.
    assert (tmp_path / "before.txt").read_text().splitlines() == ["2:5:TML401:2:torchmemlint"]
    titles = (tmp_path / "actions.txt").read_text().splitlines()
    assert "Ignore TML401 with `# noqa: TML401`" in titles
    assert (tmp_path / "after.txt").read_text() == ""
    assert (tmp_path / "model.py").read_text() == MODEL.replace("x)\n", "x)  # noqa: TML401\n")
    for command in (["torchmemlint", "check", "model.py"], ["flake8", "--select", "TML", "model.py"]):
        quiet = subprocess.run(
            [sys.executable, "-m", *command], cwd=tmp_path, capture_output=True, text=True
        )
        assert (quiet.returncode, quiet.stdout) in ((0, "All checks passed!\n"), (0, "")), quiet
