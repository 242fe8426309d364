"""TML7xx on a whole torchrun training script, through the CLI; the analysis facts they ask
(``multi_device_evidence``, ``call_keywords``)."""

from __future__ import annotations

import json
import subprocess
import sys

import libcst as cst
import pytest

from torchmemlint.analysis.file import FileAnalysis
from torchmemlint.analysis.names import Bindings
from torchmemlint.analysis.scripts import call_keywords, multi_device_evidence

SCRIPT = '''\
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from model import GPT


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    model = GPT().cuda(local_rank)
    if os.path.exists("ckpt.pt"):
        model.load_state_dict(torch.load("ckpt.pt"))
    ddp_kwargs = dict(device_ids=[local_rank], find_unused_parameters=False)
    model = DDP(model, **ddp_kwargs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad(set_to_none=False)
            loss = model(x, y)
            loss.backward()
            optimizer.step()
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
'''


def _lint(tmp_path, *args):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    run = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--isolated", *args, str(path)],
        capture_output=True, text=True,
    )
    return path, run


def _findings(code, *paths):
    """The CLI's JSON findings of ``code`` in ``paths``, and the run (for its stderr)."""
    run = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--isolated", "--select", code,
         "--output-format", "json", *map(str, paths)],
        capture_output=True, text=True,
    )
    return json.loads(run.stdout), run


@pytest.mark.slow
def test_a_torchrun_script(tmp_path):
    _, run = _lint(tmp_path, "--select", "TML7", "--output-format", "json")
    found = sorted((f["code"], f["location"]["row"]) for f in json.loads(run.stdout))
    assert found == [("TML701", 18), ("TML702", 16), ("TML703", 26), ("TML704", 22)]
    # By default TML702 and TML703 are off.
    _, default = _lint(tmp_path, "--output-format", "json")
    codes = {f["code"] for f in json.loads(default.stdout)}
    assert {"TML701", "TML704"} <= codes and not codes & {"TML702", "TML703"}


@pytest.mark.slow
def test_unsafe_fixes_rewrite_the_script(tmp_path):
    path, run = _lint(tmp_path, "--select", "TML7", "--fix", "--unsafe-fixes")
    fixed = path.read_text()
    assert 'torch.load("ckpt.pt", map_location="cpu")' in fixed
    assert "model = DDP(model, **ddp_kwargs, gradient_as_bucket_view=True)" in fixed
    assert "optimizer.zero_grad()" in fixed
    assert "torch.cuda.empty_cache()" in fixed  # no fix: only the user can judge
    compile(fixed, "train.py", "exec")


def _analysis(source: str) -> FileAnalysis:
    module = cst.parse_module(source)
    bindings = Bindings()
    bindings.bind_statements(module.body)
    return FileAnalysis(module, bindings, text=source)


@pytest.mark.parametrize("source, evidence", [
    ("import torch.distributed as dist\n", "`torch.distributed`"),
    ("import torch\ntorch.distributed.init_process_group('nccl')\n", "`torch.distributed.init_process_group`"),
    ("from accelerate import Accelerator\n", "`accelerate.Accelerator`"),
    ("import os\nrank = int(os.environ['LOCAL_RANK'])\n", "`'LOCAL_RANK'`"),
    ("import torch\nmodel = torch.nn.DataParallel(model)\n", None),
    ("import torch\nrank = 0\n", None),
])
def test_multi_device_evidence(source, evidence):
    analysis = _analysis(source)
    assert multi_device_evidence(analysis.module, analysis.scopes) == evidence


@pytest.mark.parametrize("source, keywords", [
    ("f(a, b=1, c=2)\n", ["b", "c"]),
    ("kw = dict(x=1)\nf(a, **kw, y=2)\n", ["x", "y"]),
    ("kw = {'x': 1}\nf(**kw)\n", ["x"]),
    # filled in after it was built, maybe under an `if`: the literal keys may be passed
    ("kw = {'x': 1}\nkw['y'] = 2\nf(**kw)\n", ["x", "y"]),
    ("kw = {}\nif cond:\n    kw['y'] = 2\nf(**kw)\n", ["y"]),
    ("kw = {'x': 1}\nkw.update(y=2)\nf(**kw)\n", ["x", "y"]),
    ("kw = dict()\nkw.update({'z': 3})\nkw.setdefault('w', 4)\nf(**kw)\n", ["w", "z"]),
    # a key or a content the file does not show: unknown
    ("kw = {}\nkw[name] = 2\nf(**kw)\n", None),
    ("kw = {}\nkw.update(options)\nf(**kw)\n", None),
    ("kw = {}\nkw.update(**options)\nf(**kw)\n", None),
    ("def g(**kw):\n    f(**kw)\n", None),  # a parameter
    ("f(**{k: 1 for k in keys})\n", None),
])
def test_call_keywords(source, keywords):
    analysis = _analysis(source)
    calls = [(scope, call) for scope in analysis.scopes.scopes for call in scope.calls if call.func == "f"]
    assert len(calls) == 1
    found = call_keywords(calls[0][1].node, calls[0][0])
    assert (None if found is None else sorted(found)) == keywords


DDP_OPTIONS = """\
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def wrap(model, args):
    dist.init_process_group("nccl")
    options = {}
    if args.static_graph:
        options["static_graph"] = True
    if args.find_unused:
        options.update(find_unused_parameters=True)
    return DistributedDataParallel(model, device_ids=[args.rank], **options)


def wrap_viewed(model, args):
    options = dict(device_ids=[args.rank])
    if args.views:
        options["gradient_as_bucket_view"] = True
    return DistributedDataParallel(model, **options)


def wrap_off(model, rank):
    options = {"device_ids": [rank]}
    options.setdefault("gradient_as_bucket_view", False)
    return DistributedDataParallel(model, **options)


def wrap_unknown(model, extra):
    options = {}
    options.update(extra)
    return DistributedDataParallel(model, **options)
"""


@pytest.mark.slow
def test_ddp_keywords_from_a_dict_filled_under_conditions(tmp_path):
    path = tmp_path / "wrap.py"
    path.write_text(DDP_OPTIONS)
    findings, run = _findings("TML701", path)
    found = sorted((f["location"]["row"], f["fix"] is not None) for f in findings)
    # the dict filled under `if`s without the flag: reported with a fix; set to True under an
    # `if`: the user's choice; set to False: reported; filled from elsewhere: unknown, quiet
    assert found == [(12, True), (25, True)]


ZERO_GRAD_WRAPPERS = """\
import torch


class Trainer:
    def __init__(self, model, optimizers):
        self.model = model
        self.optimizers = optimizers

    def zero_grad(self, set_to_none=False):
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)

    def zero_grad_freed(self, set_to_none=True):
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)

    def zero_grad_rebound(self, set_to_none=False):
        set_to_none = set_to_none or torch.__version__ >= "2"
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none)

    def zero_grad_positional(self, keep=False):
        for optimizer in self.optimizers:
            optimizer.zero_grad(keep)

    def zero_grad_required(self, keep):
        for optimizer in self.optimizers:
            optimizer.zero_grad(keep)

    def step(self, batch):
        self.zero_grad()
        self.model(batch).sum().backward()
        for optimizer in self.optimizers:
            optimizer.step()
"""


@pytest.mark.slow
def test_zero_grad_wrapper_passing_on_a_false_default(tmp_path):
    path = tmp_path / "trainer.py"
    path.write_text(ZERO_GRAD_WRAPPERS)
    findings, run = _findings("TML704", path)
    found = sorted((f["location"]["row"], f["fix"]) for f in findings)
    # the parameter's default False reaches the optimizer (by keyword or position); a True
    # default, a rebound parameter and one without a default do not say
    assert found == [(11, None), (24, None)]


ZERO_GRAD_CONTAINERS = """\
from typing import Dict

import torch


class Container:
    def __init__(self, optimizer):
        self.optimizer = optimizer

    def zero_grad(self, set_to_none: bool = False, force: bool = False):
        if force:
            return
        self.optimizer.zero_grad(set_to_none)


class Wrapper:
    models: Dict[str, Container] = {}

    def zero_grad(self, keys=None, set_to_none: bool = False, force: bool = False):
        if keys:
            self.models[keys].zero_grad(set_to_none, force)
            for key in keys:
                self.models[key].zero_grad(set_to_none=set_to_none, force=force)
        else:
            for container in self.models.values():
                container.zero_grad(set_to_none, force)
            for container in self.models.values():
                container.zero_grad(set_to_none)
"""


@pytest.mark.slow
def test_zero_grad_handed_to_a_project_method_is_not_the_site(tmp_path):
    path = tmp_path / "optimizers.py"
    path.write_text(ZERO_GRAD_CONTAINERS)
    findings, run = _findings("TML704", path)
    # the torch call the value reaches (row 13) is the site; calls with a second argument
    # cannot be torch's zero_grad(set_to_none) (the project's own Container.zero_grad); a
    # one-argument call still could be (row 28)
    assert sorted(f["location"]["row"] for f in findings) == [13, 28]


MMENGINE_WRAPPERS = """\
import torch
import mmengine.model as mm_model
from mmengine.model import MMDistributedDataParallel, MMFullyShardedDataParallel
from mmcv.parallel import MMDistributedDataParallel as MMCVDDP


def wrap(model, local_rank):
    model = MMDistributedDataParallel(
        module=model.cuda(),
        device_ids=[torch.cuda.current_device()],
        broadcast_buffers=False,
        find_unused_parameters=False)
    return model


def wrap_flagged(model):
    return mm_model.MMDistributedDataParallel(module=model, gradient_as_bucket_view=True)


def wrap_off(model):
    return mm_model.wrappers.MMDistributedDataParallel(module=model, gradient_as_bucket_view=False)


def wrap_mmcv(model, rank):
    return MMCVDDP(model.cuda(), [rank], rank, 0, False)


def wrap_from_config(model, cfg):
    return MMDistributedDataParallel(module=model, **cfg.model_wrapper_cfg)


def wrap_fsdp(model):
    return MMFullyShardedDataParallel(module=model)


def wrap_positional(model):
    return MMDistributedDataParallel(model, False, [0], 0, 0, True, None, 25, False, False, True)
"""

MMENGINE_LOOKALIKE = """\
import torch


class MMDistributedDataParallel(torch.nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module


model = MMDistributedDataParallel(module=torch.nn.Linear(2, 2))
"""


@pytest.mark.slow
def test_ddp_built_by_mmengine_and_mmcv_wrappers(tmp_path):
    """mmengine's `MMDistributedDataParallel(module, detect_anomalous_params, **kwargs)` passes its
    keywords to DDP's constructor, mmcv 1.x's keeps DDP's: both build a DDP. A local class of
    that name, a wrapper given the flag or a config the file does not show, and mmengine's
    FSDP wrapper are not reported."""
    path = tmp_path / "wrappers.py"
    path.write_text(MMENGINE_WRAPPERS)
    lookalike = tmp_path / "lookalike.py"
    lookalike.write_text(MMENGINE_LOOKALIKE)
    findings, run = _findings("TML701", path, lookalike)
    found = sorted(
        (f["filename"].rsplit("/", 1)[-1], f["location"]["row"], f["message"].split(" keeps")[0])
        for f in findings
    )
    assert found == [
        ("wrappers.py", 8, "MMDistributedDataParallel"),
        ("wrappers.py", 21, "MMDistributedDataParallel"),
        ("wrappers.py", 25, "MMDistributedDataParallel"),
    ], run.stderr
    fixed = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--isolated", "--select", "TML701", "--fix",
         "--unsafe-fixes", str(path)],
        capture_output=True, text=True,
    )
    text = path.read_text()
    assert "find_unused_parameters=False, gradient_as_bucket_view=True)" in text, fixed.stdout
    assert "MMDistributedDataParallel(module=model, gradient_as_bucket_view=True)\n\n\ndef wrap_mmcv" in text
    assert "MMCVDDP(model.cuda(), [rank], rank, 0, False, gradient_as_bucket_view=True)" in text
    compile(text, "wrappers.py", "exec")


# DDP keywords held by `self` (built in `__init__`) and read from a dataclass by `asdict`.
SPREAD_MAPPINGS = '''\
import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Optional

import torch
from torch.nn.parallel import DistributedDataParallel as DDP


class Accelerator:
    def __init__(self, find_unused_parameters=False, device=0, static=False):
        self.device = device
        self._ddp_kwargs = {"find_unused_parameters": find_unused_parameters}
        if static:
            self._ddp_kwargs["static_graph"] = True

    def wrap_model(self, model):
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=[self.device], **self._ddp_kwargs)


class FromCaller:
    def __init__(self, ddp_kwargs=None):
        self.ddp_kwargs = ddp_kwargs or {}

    def wrap(self, model):
        return DDP(model, **self.ddp_kwargs)


class ViewsOn:
    def __init__(self):
        self.kwargs = dict(gradient_as_bucket_view=True)

    def wrap(self, model):
        return DDP(model, **self.kwargs)


class Required:
    def __init__(self, ddp_kwargs):
        self.ddp_kwargs = ddp_kwargs

    def wrap(self, model):
        return DDP(model, **self.ddp_kwargs)


class Reassigned:
    def __init__(self):
        self.kwargs = {}

    def configure(self, kwargs):
        self.kwargs.update(kwargs)

    def wrap(self, model):
        return DDP(model, **self.kwargs)


@dataclass
class Strategy:
    pass


@dataclass
class DDPStrategy(Strategy):
    find_unused_parameters: bool = False
    gradient_as_bucket_view: bool = False
    static_graph: bool = field(default=False)


@dataclasses.dataclass
class ViewStrategy:
    gradient_as_bucket_view: bool = True


def prepare_ddp(module, device_ids, strategy: Optional[DDPStrategy] = None):
    strategy = strategy if strategy is not None else DDPStrategy()
    params_dict = asdict(strategy)
    del params_dict["static_graph"]
    return DDP(module, device_ids=device_ids, **params_dict)


def prepare_views(module, strategy=None):
    strategy = strategy or ViewStrategy()
    return DDP(module, **asdict(strategy))


def prepare_given(module, strategy: DDPStrategy):
    return DDP(module, **asdict(strategy))


def prepare_on(module):
    return DDP(module, **dataclasses.asdict(DDPStrategy(gradient_as_bucket_view=True)))


def prepare_positional_off(module):
    return DDP(module, **asdict(DDPStrategy(True, False)))
'''


@pytest.mark.slow
def test_ddp_keywords_from_self_and_from_a_dataclass(tmp_path):
    """A dict `__init__` builds on `self` (filled under an `if`) and spread in another method,
    and `asdict` of a same-file dataclass (with a base, a `field(default=...)`, a key deleted,
    the instance built when the caller passes none): DDP gets no `gradient_as_bucket_view`, or
    False. Quiet: a dict or instance the caller passes (required parameter), the flag set True
    in the dict or the dataclass (default or constructor), a dict another method updates."""
    path = tmp_path / "spread.py"
    path.write_text(SPREAD_MAPPINGS)
    findings, run = _findings("TML701", path)
    found = sorted((f["location"]["row"], f["fix"] is not None) for f in findings)
    # 17: the key is known to be absent, so the fix adds it after `**self._ddp_kwargs`;
    # 25: read on the path where the caller passes no dict: no fix (the caller's may hold it);
    # 76 and 93: the False is a dataclass field's default / a constructor argument: no fix here
    assert found == [(17, True), (25, False), (76, False), (93, False)], run.stderr
    messages = {f["location"]["row"]: f["message"] for f in findings}
    assert "read from `self._ddp_kwargs`, built in `__init__`" in messages[17]
    assert "the fields of `DDPStrategy`, when `strategy` is not passed" in messages[76]


# accelerate's DDP keywords and a DDP built through `functools.partial`: what the partial builds
# gets its keywords, unless a call of it passes the flag (or a `**mapping` that may).
PARTIALS = """\
import functools
from functools import partial

import torch
from accelerate import Accelerator, DistributedDataParallelKwargs
from torch.nn.parallel import DistributedDataParallel as DDP


def find_and_pop(arr, cond, default=None):
    for i, x in enumerate(arr):
        if cond(x):
            return arr.pop(i)
    return default() if callable(default) else default


class Trainer:
    def __init__(self, accelerate_kwargs: dict = dict()):
        kwargs_handlers = accelerate_kwargs.get("kwargs_handlers", [])
        ddp_kwargs = find_and_pop(
            kwargs_handlers,
            lambda x: isinstance(x, DistributedDataParallelKwargs),
            partial(DistributedDataParallelKwargs, find_unused_parameters=True)
        )
        kwargs_handlers.append(ddp_kwargs)
        self.accelerator = Accelerator(kwargs_handlers=kwargs_handlers)


def wrap_all(models, rank):
    wrap = functools.partial(DDP, device_ids=[rank])
    return [wrap(m) for m in models]


def quiet(opts, rank, model):
    make = partial(DistributedDataParallelKwargs, find_unused_parameters=True)
    handler = make(gradient_as_bucket_view=True)
    viewed = partial(DistributedDataParallelKwargs, gradient_as_bucket_view=True)()
    spread = partial(DistributedDataParallelKwargs, find_unused_parameters=True)(**opts)
    unrelated = partial(dict, find_unused_parameters=True)()
    positional = partial(DDP, model, [rank], rank, 0, True, None, 25, False, False, True)()
    return Accelerator(kwargs_handlers=[handler, viewed, spread, unrelated]), positional
"""


@pytest.mark.slow
def test_ddp_keywords_built_through_partial(tmp_path):
    path = tmp_path / "partials.py"
    path.write_text(PARTIALS)
    findings, run = _findings("TML701", path)
    found = sorted((f["location"]["row"], f["message"].split(" keeps")[0]) for f in findings)
    assert found == [(22, "DistributedDataParallelKwargs"), (29, "DDP")], run.stderr
    subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--isolated", "--select", "TML701", "--fix",
         "--unsafe-fixes", str(path)],
        capture_output=True, text=True,
    )
    text = path.read_text()
    assert "partial(DistributedDataParallelKwargs, find_unused_parameters=True, gradient_as_bucket_view=True)\n" in text
    assert "functools.partial(DDP, device_ids=[rank], gradient_as_bucket_view=True)" in text
    compile(text, "partials.py", "exec")


LOCAL_SUBCLASSES = """\
import torch
from torch.nn.parallel import DistributedDataParallel as DDP


class TrialContext:
    def wrap_model(self, model):
        return self._PassThroughDDP(model)

    def wrap_models(self, models):
        return [self._KeptDDP(model) for model in models]

    def wrap_own(self, model):
        return self._OwnInit(model)

    def wrap_flagged(self, model):
        return self._KeptDDP(model, gradient_as_bucket_view=True)

    class _PassThroughDDP(torch.nn.parallel.DistributedDataParallel):
        \"\"\"Pass-through wrapper: inner module attributes reachable.\"\"\"

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self.module, name)

    class _KeptDDP(DDP):
        pass

    class _OwnInit(DDP):
        def __init__(self, module):
            super().__init__(module, gradient_as_bucket_view=True)

    class _NotDDP(torch.nn.Module):
        pass


class TopLevelDDP(DDP):
    pass


def build(model, other):
    return TopLevelDDP(model), other._KeptDDP(model), TrialContext._NotDDP()


def build_named(_KeptDDP, model):
    return _KeptDDP(model)
"""


@pytest.mark.slow
def test_ddp_built_by_a_subclass_defined_in_the_file(tmp_path):
    """A class of this file that subclasses torch's DDP and keeps its constructor (no
    `__init__`: determined's pass-through `_PyTorchDistributedDataParallel` nested in its
    context class, called as `self._PyTorchDistributedDataParallel(model)`) builds a DDP; one
    with its own `__init__`, a call given the flag, another object's attribute, a parameter of
    the same name and a subclass of `nn.Module` do not report."""
    path = tmp_path / "context.py"
    path.write_text(LOCAL_SUBCLASSES)
    findings, run = _findings("TML701", path)
    assert run.returncode in (0, 1), run.stderr
    found = sorted((f["location"]["row"], f["message"].split(" keeps")[0]) for f in findings)
    assert found == [(7, "_PassThroughDDP"), (10, "_KeptDDP"), (43, "TopLevelDDP")]
