"""An optional import of torch (``try: import torch ... except Exception: nn = object``): the
fallback lets the file's classes be defined without torch, and where the code runs the names
are torch's. The rules read them as torch's (TML601 with its fix spelled through the ``F`` the
``try`` imports, TML201); a fallback that is code of its own keeps the name its own."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ATTENTION = """\
    class Attention(nn.Module):
        def __init__(self, dim, heads=8):
            super().__init__()
            self.heads = heads
            self.scale = (dim // heads) ** -0.5
            self.qkv = nn.Linear(dim, dim * 3)
            self.proj = nn.Linear(dim, dim)
            self.act = nn.Sequential(nn.Linear(dim, dim), nn.BatchNorm1d(dim))

        def forward(self, x):
            b, n, c = x.shape
            q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
            attn = (q @ k.transpose(-2, -1)) * self.scale
            attn = F.softmax(attn, dim=-1)
            out = (attn @ v).transpose(1, 2).reshape(b, n, c)
            return F.leaky_relu(self.proj(out), 0.2)
"""

OPTIONAL = textwrap.dedent(
    """\
    try:
        import torch
        from torch import nn
        from torch.nn import functional as F
    except Exception:  # pragma: no cover
        torch = None
        nn = object
        F = object


    """
) + textwrap.dedent(ATTENTION)

OWN_FALLBACK = textwrap.dedent(
    """\
    import torch
    from torch import nn

    try:
        from torch.nn import functional as F
    except ImportError:
        class F:  # the file's own stand-in: not torch's softmax
            @staticmethod
            def softmax(x, dim):
                return x / x.sum(dim, keepdim=True)

            @staticmethod
            def leaky_relu(x, slope):
                return x


    """
) + textwrap.dedent(ATTENTION)


def _check(path: Path, *extra: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--no-cache", "--select", "TML601,TML201", *extra, path.name],
        cwd=path.parent, capture_output=True, text=True,
    )
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr
    return result.stdout


def test_names_of_an_optional_import_are_torch_s(tmp_path):
    path = tmp_path / "optional.py"
    path.write_text(OPTIONAL)
    codes = sorted(line.split()[1] for line in _check(path).splitlines() if ": TML" in line)
    assert codes == ["TML201", "TML601"]
    diff = _check(path, "--unsafe-fixes", "--diff")
    assert "+        out = F.scaled_dot_product_attention(q, k, v, scale=self.scale).transpose(1, 2)" in diff, diff


def test_a_fallback_of_the_file_s_own_keeps_the_name_its_own(tmp_path):
    path = tmp_path / "own.py"
    path.write_text(OWN_FALLBACK)
    assert ": TML" not in _check(path)
