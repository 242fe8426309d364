"""TML501 on a module class's method that runs its own forward (``self(x)``) and only makes a
number of the output: reported when no other code can be its caller, left to the caller when a
file of the project that imports the class reads ``.<method>`` (a pipeline that calls it under
``torch.no_grad()``, as diffusers' LTX-2 pipelines call their duration head's
``predict_num_frames``). Driven through the CLI, with the result cache: adding the caller in the
importing file makes the finding go on a warm run."""

from __future__ import annotations

from pathlib import Path
from typing import Set, Tuple

import pytest

from project_cli import lint_project

ROOT = Path(__file__).resolve().parent.parent

HEAD = """import torch
import torch.nn as nn


class DurationHead(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, 1)

    def forward(self, tokens):
        return self.proj(tokens).mean()

    def predict_num_frames(self, tokens, frame_rate=24.0):
        seconds = self(tokens)
        return round(seconds.item() * frame_rate)
"""

PIPELINE_CALLS = """import torch

from .duration_head import DurationHead


class Pipeline:
    def __init__(self):
        self.duration_head = DurationHead(16)

    @torch.no_grad()
    def __call__(self, tokens):
        return self.duration_head.predict_num_frames(tokens)
"""

# a look-alike: the importing file builds the head but never calls the method
PIPELINE_BUILDS = """import torch

from .duration_head import DurationHead


class Pipeline:
    def __init__(self):
        self.duration_head = DurationHead(16)

    @torch.no_grad()
    def __call__(self, tokens):
        return self.duration_head(tokens)
"""


def _lint(project: Path, *extra: str) -> Set[Tuple[str, int]]:
    return lint_project(project, "TML501", *extra)


def _project(root: Path, pipeline: str) -> Path:
    package = root / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "duration_head.py").write_text(HEAD)
    (package / "pipeline.py").write_text(pipeline)
    return root


SITE = ("duration_head.py", HEAD.splitlines().index("        seconds = self(tokens)") + 1)


@pytest.mark.parametrize("extra", [("--no-cache",), ("--no-cache", "--isolated")], ids=["default", "isolated"])
def test_a_method_an_importer_calls_is_left_to_it(tmp_path, extra):
    assert _lint(_project(tmp_path, PIPELINE_CALLS), *extra) == set()


def test_a_method_no_importer_calls_is_reported(tmp_path):
    assert _lint(_project(tmp_path, PIPELINE_BUILDS), "--no-cache") == {SITE}


def test_the_head_alone_is_reported(tmp_path):
    (tmp_path / "duration_head.py").write_text(HEAD)
    assert _lint(tmp_path, "--no-cache") == {SITE}


def test_adding_the_caller_in_the_importer_clears_the_cached_finding(tmp_path):
    project = _project(tmp_path, PIPELINE_BUILDS)
    assert _lint(project) == {SITE}
    (project / "pkg" / "pipeline.py").write_text(PIPELINE_CALLS)
    assert _lint(project) == set()  # warm: the head's cache entry is keyed by its importers' texts


# rsl_rl's random network distillation, vendored as ``pkg/vendor/rl/`` with no
# ``vendor/__init__.py`` (a namespace package Python imports through): a method that runs the
# module's own submodules and keeps only their detached outputs, which an algorithm of another
# file calls (in the real code, inside the runner's ``torch.inference_mode()``).
RND = """import torch
import torch.nn as nn


class RandomNetworkDistillation(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.predictor = nn.Linear(dim, dim)
        self.target = nn.Linear(dim, dim)

    def get_intrinsic_reward(self, state):
        target = self.target(state).detach()
        predicted = self.predictor(state).detach()
        return torch.linalg.norm(target - predicted, dim=1)
"""

ALGORITHM = """from pkg.vendor.rl.rnd import RandomNetworkDistillation


class PPO:
    def __init__(self, dim):
        self.rnd = RandomNetworkDistillation(dim)

    def process_env_step(self, state):
        return self.rnd.get_intrinsic_reward(state)
"""


def _vendored(root: Path, algorithm: str) -> Path:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    vendored = root / "pkg" / "vendor" / "rl"  # (no pkg/vendor/__init__.py)
    vendored.mkdir(parents=True)
    (vendored / "__init__.py").write_text("")
    (vendored / "rnd.py").write_text(RND)
    (vendored / "ppo.py").write_text(algorithm)
    return root


RND_SITES = {("rnd.py", RND.splitlines().index(line) + 1) for line in (
    "        target = self.target(state).detach()", "        predicted = self.predictor(state).detach()")}


def test_a_submodule_method_an_importer_calls_through_a_namespace_package_is_left_to_it(tmp_path):
    assert _lint(_vendored(tmp_path, ALGORITHM), "--no-cache") == set()


def test_the_same_method_no_importer_calls_is_reported(tmp_path):
    assert _lint(_vendored(tmp_path, ALGORITHM.replace(".get_intrinsic_reward(state)", "(state)")), "--no-cache") == RND_SITES


def test_module_names_cross_namespace_packages(tmp_path):
    from torchmemlint.project import module_name, package_root

    root = _vendored(tmp_path, ALGORITHM)
    assert module_name(str(root / "pkg" / "vendor" / "rl" / "rnd.py")) == ("pkg.vendor.rl.rnd", "pkg.vendor.rl")
    assert package_root(str(root / "pkg" / "vendor" / "rl" / "rnd.py")) == str(root / "pkg")
    (root / "scripts").mkdir()  # a directory beside the package, no regular package above it
    assert module_name(str(root / "scripts" / "train.py")) == ("train", "")


# gt4sd's granular decoders: a method that runs a submodule and makes indices of its output,
# called by the models of other files (in their validation steps, under Lightning's
# ``no_grad``); an evaluation-named method that switches to evaluation first stays reported,
# as nerfstudio's ``get_eval_loss_dict`` should be (its trainer keeps autograd on)
DECODER = """import torch
import torch.nn as nn


class Decoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, z):
        return self.proj(z)

    def greedy_tokens(self, z):
        logits = self.proj(z)
        return logits.argmax(dim=-1).tolist()

    def get_eval_loss(self, z):
        self.eval()
        return float(self(z).mean())
"""

MODEL = """from pkg.decoder import Decoder


class Model:
    def __init__(self):
        self.decoder = Decoder(8)

    def decode(self, z):
        return self.decoder.greedy_tokens(z), self.decoder.get_eval_loss(z)
"""


def test_a_decoding_method_another_file_calls_is_left_to_it(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "decoder.py").write_text(DECODER)
    (tmp_path / "pkg" / "model.py").write_text(MODEL)
    evaluated = ("decoder.py", DECODER.splitlines().index("        return float(self(z).mean())") + 1)
    assert _lint(tmp_path, "--no-cache") == {evaluated}
    (tmp_path / "pkg" / "model.py").write_text(MODEL.replace("self.decoder.greedy_tokens(z)", "self.decoder(z)"))
    decoded = ("decoder.py", DECODER.splitlines().index("        logits = self.proj(z)") + 1)
    assert _lint(tmp_path, "--no-cache") == {evaluated, decoded}


# transkun: a model module no file imports (the training script builds the class its
# configuration names, through a loader outside the project) whose evaluation methods the
# script calls under ``torch.no_grad()``; one of them (`transcribe_frames`) is called only by
# another method of the class, which the script calls
LOADED = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Transcriber(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.head = nn.Linear(dim, 4)
        self.velocity = nn.Linear(dim, 8)

    def log_prob(self, x, y):
        return F.cross_entropy(self.head(x), y)

    def compute_stats(self, x):
        logits = self.head(x)
        return {"mean": logits.mean().item()}

    def compute_mir_stats(self, x):
        notes = self.transcribe_frames(x)
        return {"notes": len(notes)}

    def transcribe_frames(self, x):
        velocity = self.velocity(x)
        return velocity.argmax(dim=-1).tolist()
"""

TRAIN = """import torch

import moduleconf


def train(conf, loader):
    model = moduleconf.parseFromFile(conf).TransKun()
    optimizer = torch.optim.Adam(model.parameters())
    for x, y in loader:
        loss = model.log_prob(x, y)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            stats = model.compute_stats(x)
            mir = model.compute_mir_stats(x)
        print(stats, mir)
"""

LOADED_SITES = {("model_ablation.py", LOADED.splitlines().index(line) + 1) for line in (
    "        logits = self.head(x)", "        velocity = self.velocity(x)")}


def _loaded_by_name(root: Path, train: str) -> Path:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "model_ablation.py").write_text(LOADED)
    (root / "pkg" / "train.py").write_text(train)
    return root


def test_the_methods_of_a_module_loaded_by_name_are_left_to_the_script_calling_them(tmp_path):
    assert _lint(_loaded_by_name(tmp_path, TRAIN), "--no-cache") == set()


def test_the_same_methods_nobody_calls_are_reported(tmp_path):
    script = TRAIN.replace("            stats = model.compute_stats(x)\n            mir = model.compute_mir_stats(x)\n", "            stats = mir = None\n")
    assert script != TRAIN
    assert _lint(_loaded_by_name(tmp_path, script), "--no-cache") == LOADED_SITES


def test_a_module_an_importer_calls_nothing_of_is_still_reported(tmp_path):
    # imported by a file that calls none of its methods: the importers decide, not every file
    project = _loaded_by_name(tmp_path, TRAIN)
    (project / "pkg" / "export.py").write_text("from pkg.model_ablation import Transcriber\n\nMODEL = Transcriber(8)\n")
    assert _lint(project, "--no-cache") == LOADED_SITES


def test_adding_the_script_call_clears_the_cached_finding(tmp_path):
    script = TRAIN.replace("            mir = model.compute_mir_stats(x)\n", "            mir = None\n")
    project = _loaded_by_name(tmp_path, script)
    assert _lint(project) == {("model_ablation.py", LOADED.splitlines().index("        velocity = self.velocity(x)") + 1)}
    (project / "pkg" / "train.py").write_text(TRAIN)
    assert _lint(project) == set()  # warm: the module's entry is keyed by the texts of every file that may call it
