"""TML401-404 on checkpoint forms mined from public repositories (reduced copies, rewritten):
what a project's own checkpointing code runs is read as the computation it is.

- a helper function that hands its parameter to torch's checkpoint (``def checkpoint(fn,
  *args, **kwargs): return torch_checkpoint(fn, *args, use_reentrant=False, **kwargs)``, also
  with the model as a first parameter, or defined in a sibling package ``utils/`` beside
  ``models/``) checkpoints what its callers pass: TML402/403 at the caller, TML401 at the
  caller only where the helper passes the caller's keywords on and none chooses a variant;
- a module whose ``forward`` checkpoints the module its ``__init__`` was given
  (``CheckpointWrapper(nn.Linear(...))``) checkpoints that module, as ``checkpoint_wrapper`` does;
- a closure a factory builds from the block's layers (the memory-efficient DenseNet's
  ``_bn_function_factory(self.norm1, self.relu1, self.conv1)``) runs the layers it was given;
- a method that only forwards to one layer (``def _fc(self, h): return self.fc(h)``) and a
  builder whose every ``return`` is one layer (LDM's ``Normalize(c)`` -> ``nn.GroupNorm``) are
  that single op (TML402).

Look-alikes stay quiet: a project's own ``checkpoint(func, inputs, params, flag)`` that never
calls torch's, a helper that runs its callable without checkpointing it, a module that keeps
the module it was given but checkpoints something else, a method or builder that runs two ops.
Each file marks the rows that must be reported with ``# expect: CODE`` (several on one row);
every other row must stay quiet. The CLI runs once over all of them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Set, Tuple

import pytest

pytestmark = pytest.mark.slow

EXPECT = re.compile(r"expect:\s*((?:TML\d{3}[ ,]*)+)")

CASES: Dict[str, Dict[str, str]] = {
    # a helper in a sibling package that forwards to torch's checkpoint, non-reentrant
    "helper_sibling": {
        "utils/__init__.py": "",
        "utils/ckpt.py": """
            from torch.utils.checkpoint import checkpoint as torch_checkpoint


            def checkpoint(function, *args, **kwargs):
                return torch_checkpoint(function, *args, use_reentrant=False, **kwargs)
        """,
        "models/__init__.py": "",
        "models/net.py": """
            import torch.nn as nn
            from utils.ckpt import checkpoint


            class Head(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.norm = nn.LayerNorm(d)
                    self.body = nn.Sequential(nn.Linear(d, d), nn.BatchNorm1d(d), nn.ReLU())
                    self.mlp = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))

                def forward(self, x):
                    x = checkpoint(self.norm, x)  # expect: TML402
                    x = checkpoint(self.mlp, x)
                    return checkpoint(self.body, x)  # expect: TML403
        """,
    },
    # a helper that writes the variant into the keywords it passes on: callers need not say it
    "helper_sets_default": {
        "blocks.py": """
            import torch
            import torch.nn as nn


            def checkpoint(function, *args, **kwargs):
                kwargs.setdefault("use_reentrant", False)
                return torch.utils.checkpoint.checkpoint(function, *args, **kwargs)


            class Local(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.project_in = nn.Linear(d, d)
                    self.mlp = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))

                def forward(self, x):
                    x = checkpoint(self.project_in, x)  # expect: TML402
                    return checkpoint(self.mlp, x)
        """,
    },
    # a reentrant helper that may be switched off: TML401 at its own call, the contents at the callers
    "helper_reentrant": {
        "utils/__init__.py": "",
        "utils/util.py": """
            import torch

            loaded_options = None


            def checkpoint(fn, *args):
                enabled = loaded_options is not None and loaded_options.get('checkpointing_enabled', True)
                if enabled:
                    return torch.utils.checkpoint.checkpoint(fn, *args)  # expect: TML401
                return fn(*args)
        """,
        "models/__init__.py": "",
        "models/arch.py": """
            import torch.nn as nn
            from utils.util import checkpoint


            class ConvBnLelu(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.conv = nn.Conv2d(c, c, 3, padding=1)
                    self.bn = nn.BatchNorm2d(c)
                    self.lelu = nn.LeakyReLU(0.2)

                def forward(self, x):
                    return self.lelu(self.bn(self.conv(x)))


            class Net(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.blocks = nn.ModuleList([ConvBnLelu(c) for _ in range(4)])
                    self.final = nn.Conv2d(c, 3, 1)

                def forward(self, x):
                    for b in self.blocks:
                        x = checkpoint(b, x)  # expect: TML403
                    return checkpoint(self.final, x)  # expect: TML402
        """,
    },
    # a helper that passes the caller's keywords on: the caller chooses the variant
    "helper_kwargs": {
        "m.py": """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint


            def ckpt(fn, *args, **kwargs):
                return checkpoint(fn, *args, **kwargs)


            class Net(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.mlp = nn.Sequential(nn.Linear(d, d), nn.Dropout(0.1), nn.Linear(d, d))

                def forward(self, x):
                    x = ckpt(self.mlp, x)  # expect: TML401
                    x = ckpt(self.mlp, x, use_reentrant=False, preserve_rng_state=False)  # expect: TML404
                    return ckpt(self.mlp, x, use_reentrant=False)
        """,
    },
    # the model passed first: `checkpoint_wrapper(self, fn, *args)`
    "helper_self_first": {
        "m.py": """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint


            def checkpoint_wrapper(self, fn, *args):
                if self.grad_checkpointing:
                    return checkpoint(fn, *args, use_reentrant=False)
                return fn(*args)


            class Model(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.grad_checkpointing = True
                    self.proj = nn.Linear(d, d)
                    self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

                def forward(self, x):
                    x = checkpoint_wrapper(self, self.mlp, x)
                    return checkpoint_wrapper(self, self.proj, x)  # expect: TML402
        """,
    },
    # a module that checkpoints the module it was given, in another file of the package
    "wrapper_module": {
        "pkg/__init__.py": "",
        "pkg/utils.py": """
            from torch import nn
            from torch.utils.checkpoint import checkpoint


            class CheckpointWrapper(nn.Module):
                def __init__(self, module: nn.Module) -> None:
                    super().__init__()
                    self.module = module

                def forward(self, *args, **kwargs):
                    return checkpoint(self.module, *args, **kwargs, use_reentrant=False)


            class Holder(nn.Module):
                def __init__(self, module, head):
                    super().__init__()
                    self.module = module
                    self.head = head

                def forward(self, x):
                    return checkpoint(self.head, self.module(x), use_reentrant=False)
        """,
        "pkg/model.py": """
            from torch import nn
            from pkg.utils import CheckpointWrapper, Holder


            class Net(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.stem = CheckpointWrapper(nn.Sequential(nn.Conv2d(3, c, 3), nn.BatchNorm2d(c), nn.ReLU()))  # expect: TML403
                    self.head = CheckpointWrapper(nn.Linear(c, 10))  # expect: TML402
                    self.body = CheckpointWrapper(nn.Sequential(nn.Conv2d(c, c, 3), nn.GroupNorm(8, c), nn.ReLU()))
                    self.kept = Holder(nn.BatchNorm2d(c), nn.Sequential(nn.Linear(c, c), nn.ReLU(), nn.Linear(c, c)))

                def forward(self, x):
                    return self.head(self.kept(self.body(self.stem(x))).mean((2, 3)))
        """,
    },
    # a method that only forwards to one layer; one that runs two
    "method_single_op": {
        "m.py": """
            import torch
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint


            class CheckpointedBlock(nn.Module):
                def __init__(self, dim, hidden):
                    super().__init__()
                    self.layer1 = nn.Linear(dim, hidden)
                    self.layer2 = nn.Linear(hidden, dim)

                def _layer2_fn(self, h):
                    return self.layer2(h)

                def _both(self, h):
                    return self.layer2(torch.relu(self.layer1(h)))

                def forward(self, x):
                    h = torch.relu(self.layer1(x))
                    out = checkpoint(self._layer2_fn, h, use_reentrant=False)  # expect: TML402
                    return checkpoint(self._both, out, use_reentrant=False)
        """,
    },
    # LDM's `Normalize(c)` builder, imported relatively; a builder that returns two layers
    "builder_single_op": {
        "ae/__init__.py": "",
        "ae/modules.py": """
            import torch


            def nonlinearity(x):
                return x * torch.sigmoid(x)


            def Normalize(in_channels, num_groups=32):
                return torch.nn.GroupNorm(num_groups=num_groups, num_channels=in_channels, eps=1e-6, affine=True)


            def NormAct(in_channels):
                return torch.nn.Sequential(torch.nn.GroupNorm(32, in_channels), torch.nn.SiLU())
        """,
        "ae/decoder.py": """
            import torch
            import torch.nn as nn
            from .modules import Normalize, NormAct, nonlinearity


            class Decoder(nn.Module):
                def __init__(self, block_in, out_ch):
                    super().__init__()
                    self.norm_out = Normalize(block_in)
                    self.norm_act = NormAct(block_in)
                    self.conv_out = torch.nn.Conv3d(block_in, out_ch, kernel_size=3, stride=1, padding=1)

                def forward(self, h):
                    h = torch.utils.checkpoint.checkpoint(self.norm_out, h, use_reentrant=False)  # expect: TML402
                    h = torch.utils.checkpoint.checkpoint(nonlinearity, h, use_reentrant=False)
                    h = torch.utils.checkpoint.checkpoint(self.norm_act, h, use_reentrant=False)
                    return torch.utils.checkpoint.checkpoint(self.conv_out, h, use_reentrant=False)  # expect: TML402
        """,
    },
    # a closure built from the block's layers: by a module-level factory (the memory-efficient
    # DenseNet, layers registered by `self.add_module('norm1', ...),` with a stray comma) or by
    # one nested in `forward`; a factory whose closure never calls the BatchNorm it is given
    "closure_factory": {
        "m.py": """
            import torch
            import torch.nn as nn
            import torch.utils.checkpoint as cp


            def _bn_function_factory(norm, relu, conv):
                def bn_function(*inputs):
                    concated_features = torch.cat(inputs, 1)
                    return conv(relu(norm(concated_features)))
                return bn_function


            def _conv_only_factory(norm, conv):
                def conv_function(x):
                    return conv(x)
                return conv_function


            class _DenseLayer(nn.Module):
                def __init__(self, num_input_features, growth_rate, bn_size, efficient=False):
                    super(_DenseLayer, self).__init__()
                    self.add_module('norm1', nn.BatchNorm2d(num_input_features)),
                    self.add_module('relu1', nn.ReLU(inplace=True)),
                    self.add_module('conv1', nn.Conv2d(num_input_features, bn_size * growth_rate, kernel_size=1, bias=False)),
                    self.efficient = efficient

                def forward(self, *prev_features):
                    bn_function = _bn_function_factory(self.norm1, self.relu1, self.conv1)
                    conv_function = _conv_only_factory(self.norm1, self.conv1)
                    if self.efficient and any(feature.requires_grad for feature in prev_features):
                        out = cp.checkpoint(bn_function, *prev_features, use_reentrant=False)  # expect: TML403
                        return cp.checkpoint(conv_function, out, use_reentrant=False)
                    return bn_function(*prev_features)


            class ConvBnRelu(nn.Module):
                def __init__(self, in_planes, out_planes, has_bn=True, efficient=False):
                    super().__init__()
                    self.conv = nn.Conv2d(in_planes, out_planes, 3, padding=1)
                    self.has_bn = has_bn
                    self.bn = nn.BatchNorm2d(out_planes)
                    self.relu = nn.ReLU(inplace=True)
                    self.efficient = efficient

                def forward(self, x):
                    def _func_factory(conv, bn, relu, has_bn):
                        def func(x):
                            x = conv(x)
                            if has_bn:
                                x = bn(x)
                            return relu(x)
                        return func

                    func = _func_factory(self.conv, self.bn, self.relu, self.has_bn)
                    if self.efficient:
                        return cp.checkpoint(func, x, use_reentrant=False)  # expect: TML403
                    return func(x)
        """,
    },
    # look-alikes: a project's own checkpoint that never calls torch's, a helper that only runs
    # its callable, a decorator that checkpoints the function it wraps
    "look_alikes": {
        "tools/__init__.py": "",
        "tools/checkpoints.py": """
            import torch


            def checkpoint(func, inputs, params, flag):
                if flag:
                    return CheckpointFunction.apply(func, len(inputs), *(tuple(inputs) + tuple(params)))
                return func(*inputs)


            class CheckpointFunction(torch.autograd.Function):
                @staticmethod
                def forward(ctx, run_function, length, *args):
                    ctx.run_function = run_function
                    with torch.no_grad():
                        return run_function(*args[:length])


            def run(fn, *args):
                return fn(*args)


            def checkpointed(func):
                def wrapper(*args, **kwargs):
                    return torch.utils.checkpoint.checkpoint(func, *args, **kwargs)
                return wrapper
        """,
        "net.py": """
            import torch.nn as nn
            from tools.checkpoints import checkpoint, checkpointed, run


            class Block(nn.Module):
                def __init__(self, c, use_checkpoint=False):
                    super().__init__()
                    self.use_checkpoint = use_checkpoint
                    self.norm = nn.BatchNorm2d(c)
                    self.conv = nn.Conv2d(c, c, 1)

                def forward(self, x):
                    x = checkpoint(self._forward, (x,), self.parameters(), self.use_checkpoint)
                    return run(self.conv, x)

                def _forward(self, x):
                    return self.norm(x)

                @checkpointed
                def head(self, x):
                    return self.conv(x)
        """,
    },
    # an attribute `__init__` binds to torch's checkpoint in one arm of a choice, called in
    # forward on each projection (built by `skip_init`, one possibly None), and on
    # `super().forward` of a quantised Linear
    "attribute_alias": {
        "ffn.py": """
            import torch.nn as nn
            import torch.utils.checkpoint as cp
            from torch.utils.checkpoint import checkpoint
            from torch.nn.utils import skip_init


            class FeedForward(nn.Module):
                def __init__(self, d, d_ff, use_ckpting=(), gated=False):
                    super().__init__()
                    self.w_1 = skip_init(nn.Linear, in_features=d, out_features=d_ff)
                    self.w_2 = skip_init(nn.Linear, in_features=d_ff, out_features=d)
                    if gated:
                        self.w_3 = skip_init(nn.Linear, in_features=d, out_features=d_ff)
                    else:
                        self.w_3 = None
                    self.block = skip_init(Block, d)
                    self.maybe_ckpt = checkpoint if "ffn" in use_ckpting else lambda f, x: f(x)
                    self.safe_ckpt = cp.checkpoint

                def forward(self, x):
                    inter = self.maybe_ckpt(self.w_1, x)  # expect: TML401, TML402
                    if self.w_3 is not None:
                        inter.mul_(self.maybe_ckpt(self.w_3, x))  # expect: TML401, TML402
                    inter = self.maybe_ckpt(self.block, inter)  # expect: TML401
                    return self.safe_ckpt(self.w_2, inter, use_reentrant=False)  # expect: TML402


            class Block(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.fc = nn.Linear(d, d)
                    self.act = nn.GELU()

                def forward(self, x):
                    return self.act(self.fc(x))


            def make_lora(base):
                class LoraLinear(base):
                    def __init__(self, *args, use_ckpting=()):
                        super().__init__(*args)
                        self.maybe_ckpt = (
                            checkpoint if "lora" in use_ckpting else lambda f, x: f(x)
                        )

                    def forward(self, x):
                        return self.maybe_ckpt(super().forward, x)  # expect: TML401

                return LoraLinear
        """,
    },
    # look-alikes: attributes bound to a project's own runner, or to two different
    # checkpointing functions; another object's attribute of the same name
    "attribute_alias_look_alikes": {
        "net.py": """
            import torch.nn as nn
            import deepspeed
            from torch.utils.checkpoint import checkpoint


            def run(f, x):
                return f(x)


            class Net(nn.Module):
                def __init__(self, d, opts, other):
                    super().__init__()
                    self.fc = nn.Linear(d, d)
                    self.maybe_ckpt = run if "ffn" in opts else lambda f, x: f(x)
                    self.either = checkpoint if "torch" in opts else deepspeed.checkpointing.checkpoint
                    self.other = other

                def forward(self, x):
                    x = self.maybe_ckpt(self.fc, x)
                    x = self.either(self.fc, x)
                    return self.other.maybe_ckpt(self.fc, x)


            class Saver:
                def __init__(self, store):
                    self.checkpoint = store.save

                def step(self, model, x):
                    return self.checkpoint(model, x)
        """,
    },
    # a module class whose forward runs one weight-normalised conv, checkpointed element by
    # element through a file-level pass-through helper; one whose forward runs two layers, or
    # whose forward does more than return the layer's call, is not a single op
    "wrapper_module_single_op": {
        "disc.py": """
            import torch
            from torch import nn
            from torch.nn.utils import weight_norm, spectral_norm


            def checkpoint(function, *args, **kwargs):
                kwargs.setdefault("use_reentrant", False)
                return torch.utils.checkpoint.checkpoint(function, *args, **kwargs)


            class NormConv2d(nn.Module):
                def __init__(self, *args, **kwargs):
                    super().__init__()
                    self.conv = weight_norm(nn.Conv2d(*args, **kwargs))

                def forward(self, x):
                    return self.conv(x)


            class SNConv2d(NormConv2d):
                def __init__(self, *args, **kwargs):
                    super().__init__()
                    self.conv = spectral_norm(nn.Conv2d(*args, **kwargs))
                    self.act = nn.LeakyReLU(0.2)

                def forward(self, x):
                    return self.act(self.conv(x))


            class ScaledConv(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.conv = nn.Conv2d(c, c, 3)

                def forward(self, x):
                    y = self.conv(x)
                    return y * 0.5


            class Discriminator(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.convs = nn.ModuleList()
                    self.convs.append(NormConv2d(c, c, kernel_size=3))
                    self.convs.append(NormConv2d(c, c, kernel_size=3, dilation=(2, 1)))
                    self.conv_post = NormConv2d(c, 1, kernel_size=3)
                    self.sn = SNConv2d(c, c, 3)
                    self.scaled = ScaledConv(c)

                def forward(self, z):
                    fmap = []
                    for layer in self.convs:
                        z = checkpoint(layer, z)  # expect: TML402
                        fmap.append(z)
                    z = checkpoint(self.sn, z)
                    z = checkpoint(self.scaled, z)
                    return checkpoint(self.conv_post, z), fmap  # expect: TML402
        """,
    },
}


def _expected(source: str) -> Set[Tuple[int, str]]:
    found = set()
    for row, line in enumerate(textwrap.dedent(source).strip("\n").splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            found.update((row, code) for code in re.findall(r"TML\d{3}", match.group(1)))
    return found


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[Tuple[str, str], Set[Tuple[int, str]]]:
    root = tmp_path_factory.mktemp("checkpoint_mined")
    for name, files in CASES.items():
        for filename, source in files.items():
            path = root / name / filename
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source).strip("\n") + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "torchmemlint", "check", str(root), "--no-cache", "--isolated",
               "--exit-zero", "--select", "TML4,TML604", "--output-format", "json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    findings: Dict[Tuple[str, str], Set[Tuple[int, str]]] = {}
    for finding in json.loads(result.stdout):
        relative = Path(finding["filename"]).resolve().relative_to(root.resolve())
        key = (relative.parts[0], "/".join(relative.parts[1:]))
        findings.setdefault(key, set()).add((finding["location"]["row"], finding["code"]))
    return findings


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    for filename, source in CASES[name].items():
        assert found.get((name, filename), set()) == _expected(source), filename


def test_the_helper_alone_does_not_make_its_callers_findings(tmp_path):
    """Linted without the helper's file, ``checkpoint`` is an unknown function: the callers'
    findings need the project's other file, not the name."""
    files = CASES["helper_sibling"]
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "net.py").write_text(textwrap.dedent(files["models/net.py"]).strip("\n") + "\n")
    command = [sys.executable, "-m", "torchmemlint", "check", str(tmp_path), "--no-cache", "--isolated",
               "--exit-zero", "--select", "TML4", "--output-format", "json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
