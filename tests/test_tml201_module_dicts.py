"""TML201 and modules held in a mapping: a local dict filled by key, ``dict(key=module)`` or
``update(...)``, then given to ``nn.ModuleDict`` (fireworks' ``components['nonlinearity'] =
nn.ELU()``). The mapping's values are the modules a key read may call, as a display's are; a
mapping with values nobody can list (``**base``, ``update(extra)`` of a parameter), one another
method grows, or an activation after an op that keeps its output stay quiet. ``--fix`` through
the CLI keeps the model's gradients."""

from __future__ import annotations

import textwrap

import pytest
from project_cli import load_module, rule_rows, rule_run

MODELS = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    class Components(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1)
            self.bn = nn.BatchNorm2d(c)
            components = {}
            components["nonlinearity"] = nn.ELU()  # row 11
            self.components = nn.ModuleDict(components)

        def forward(self, x):
            return self.components["nonlinearity"](self.bn(self.conv(x)))


    class Keyword(nn.Module):
        def __init__(self, c, kind="elu"):
            super().__init__()
            self.kind = kind
            self.conv = nn.Conv2d(c, c, 3, padding=1)
            self.bn = nn.BatchNorm2d(c)
            self.acts = nn.ModuleDict(dict(elu=nn.ELU(), lrelu=nn.LeakyReLU(0.1)))  # row 24

        def forward(self, x):
            return self.acts[self.kind](self.bn(self.conv(x)))


    class Updated(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1)
            self.bn = nn.BatchNorm2d(c)
            heads = {}
            heads.update(act=nn.ELU())  # row 36
            self.heads = nn.ModuleDict(heads)

        def forward(self, x):
            return self.heads["act"](self.bn(self.conv(x)))


    class Extra(nn.Module):
        def __init__(self, c, extra):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1)
            self.bn = nn.BatchNorm2d(c)
            heads = {"act": nn.ELU()}
            heads.update(extra)  # (modules nobody can list here)
            self.heads = nn.ModuleDict(heads)

        def forward(self, x):
            return self.heads["act"](self.bn(self.conv(x)))


    class Starred(nn.Module):
        def __init__(self, c, base):
            super().__init__()
            self.bn = nn.BatchNorm2d(c)
            self.heads = nn.ModuleDict({**base, "act": nn.ELU()})

        def forward(self, x):
            return self.heads["act"](self.bn(x))


    class AfterSigmoid(nn.Module):
        def __init__(self, c):
            super().__init__()
            acts = {}
            acts["a"] = nn.ELU()  # (in place, it would change the sigmoid's kept result)
            self.acts = nn.ModuleDict(acts)

        def forward(self, x):
            return self.acts["a"](torch.sigmoid(x))


    class Grown(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.bn = nn.BatchNorm2d(c)
            self.acts = nn.ModuleDict({"a": nn.ELU()})

        def add(self, name, module):
            self.acts.update({name: module})

        def forward(self, x):
            return self.acts["a"](self.bn(x))
    """
)


def test_the_values_of_a_module_mapping_are_what_a_key_read_calls(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    result = rule_run("TML201", "models.py", cwd=tmp_path)
    assert rule_rows(result.stdout, "TML201") == [11, 24, 24, 36], result.stdout + result.stderr



def _grads(module, name, kwargs):
    import torch

    torch.manual_seed(0)
    model = getattr(module, name)(4, **kwargs)
    x = torch.randn(2, 4, 8, 8, requires_grad=True)
    model(x).square().sum().backward()
    return [x.grad] + [p.grad for p in model.parameters()]


CASES = (("Components", {}), ("Keyword", {"kind": "elu"}), ("Keyword", {"kind": "lrelu"}), ("Updated", {}))


@pytest.mark.parametrize("unsafe", [False, True])
def test_the_fixed_mappings_train(tmp_path, unsafe):
    """The safe fix (LeakyReLU) keeps every gradient bitwise; the unsafe one (ELU, whose
    in-place backward works from its result) keeps them within rounding."""
    torch = pytest.importorskip("torch")
    (tmp_path / "models.py").write_text(MODELS)
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    (fixed / "models.py").write_text(MODELS)
    result = rule_run("TML201", "--fix", *(["--unsafe-fixes"] if unsafe else []), "models.py", cwd=fixed)
    assert result.returncode in (0, 1), result.stderr
    text = (fixed / "models.py").read_text()
    assert "nn.LeakyReLU(0.1, inplace=True)" in text
    assert ('components["nonlinearity"] = nn.ELU(inplace=True)' in text) == unsafe
    assert 'acts["a"] = nn.ELU()  #' in text  # (the look-alike after the sigmoid is left alone)
    tag = "unsafe" if unsafe else "safe"
    original, changed = load_module(tmp_path / "models.py", f"dicts_original_{tag}"), load_module(fixed / "models.py", f"dicts_fixed_{tag}")
    for name, kwargs in CASES:
        before, after = _grads(original, name, kwargs), _grads(changed, name, kwargs)
        same = torch.equal if not unsafe else (lambda a, b: float((a - b).abs().max()) <= 1e-5 * max(1.0, float(a.abs().max())))
        assert all(same(a, b) for a, b in zip(before, after)), (name, kwargs)
