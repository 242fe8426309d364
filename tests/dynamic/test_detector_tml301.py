"""TML301 from measurement: a strided stem pool the step ran past without downsampling.

The models are written here, in the forms real code drops a pool in: the attribute replaced by
``nn.Identity()`` (on the model, from a factory function, inside a ``Sequential`` stem), the
pool left out of ``forward``, a stem put together from a built net's modules without its pool.
Look-alikes stay quiet: a net that never had a pool, a pool
replaced by a stride-2 conv, a pool left out of ``forward`` for a functional pool, a built
net's stem kept with stages of the model's own, a global (adaptive) pool replaced for features.  The bytes are compared with a second measured step of
the same net with its pool, not with a figure written here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

from torchmemlint.dynamic.detectors import detect  # noqa: E402
from torchmemlint.dynamic.lines import StepObserver  # noqa: E402
from torchmemlint.dynamic.measure import measure_training_step  # noqa: E402
from torchmemlint.dynamic.target import load_module  # noqa: E402

SHAPE = [2, 3, 64, 64]

MODELS = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Block(nn.Module):
        def __init__(self, width, stride=1):
            super().__init__()
            source = width if stride == 1 else width // 2
            self.conv1 = nn.Conv2d(source, width, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.shortcut = nn.Conv2d(source, width, 1, stride, bias=False) if stride > 1 else nn.Identity()

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + self.shortcut(x))


    def stage(width, stride):
        return nn.Sequential(Block(width, stride), Block(width))


    class ResNetish(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = stage(16, 1)
            self.layer2 = stage(32, 2)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(32, 10)

        def features(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            return self.layer2(self.layer1(x))

        def forward(self, x):
            return self.fc(torch.flatten(self.avgpool(self.features(x)), 1))


    class IdentityPool(ResNetish):
        def __init__(self):
            super().__init__()
            self.maxpool = nn.Identity()  # TML301 here


    def identity_pool_factory():
        net = ResNetish()
        net.maxpool = nn.Identity()  # TML301 from a factory
        return net


    class SkippedPool(ResNetish):
        def features(self, x):
            x = self.relu(self.bn1(self.conv1(x)))
            x = self.layer1(x)  # TML301 runs here
            return self.layer2(x)


    class SequentialStem(nn.Module):
        def __init__(self, keep_pool=False):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.MaxPool2d(2))
            if not keep_pool:
                self.stem[3] = nn.Identity()  # TML301 in a Sequential
            self.body = nn.Sequential(stage(16, 1), stage(32, 2))

        def forward(self, x):
            return self.body(self.stem(x)).mean((2, 3))


    class SlicedStem(nn.Module):
        def __init__(self, keep_pool=False):
            super().__init__()
            base = ResNetish()
            stem = [base.conv1, base.bn1, base.relu] + ([base.maxpool] if keep_pool else [])
            self.stem = nn.Sequential(*stem)  # TML301 stem kept without its pool
            self.layer1, self.layer2 = base.layer1, base.layer2

        def forward(self, x):
            return self.layer2(self.layer1(self.stem(x))).mean((2, 3))


    # -- look-alikes ----------------------------------------------------------------------------

    class NeverPooled(nn.Module):
        """A stride-2 stem straight into its stages: nothing was dropped."""

        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            self.relu = nn.ReLU(inplace=True)
            self.layer1 = stage(16, 1)
            self.layer2 = stage(32, 2)

        def forward(self, x):
            return self.layer2(self.layer1(self.relu(self.bn1(self.conv1(x))))).mean((2, 3))


    class ConvForPool(ResNetish):
        def __init__(self):
            super().__init__()
            self.maxpool = nn.Conv2d(16, 16, 3, stride=2, padding=1)  # still downsamples


    class FunctionalPool(ResNetish):
        def features(self, x):
            x = F.max_pool2d(self.relu(self.bn1(self.conv1(x))), 3, 2, 1)
            return self.layer2(self.layer1(x))


    class OwnStages(nn.Module):
        """Only the stem of a built net kept, with stages of its own: nothing of the net after the pool ran."""

        def __init__(self):
            super().__init__()
            base = ResNetish()
            self.stem = nn.Sequential(base.conv1, base.bn1, base.relu)
            self.body = nn.Sequential(stage(16, 1), stage(32, 2))

        def forward(self, x):
            return self.body(self.stem(x)).mean((2, 3))


    class FeaturesOnly(ResNetish):
        """The global pool and head dropped for features: not a downsampling pool."""

        def __init__(self):
            super().__init__()
            self.avgpool = nn.Identity()
            self.fc = nn.Identity()
''')


def row_of(path: Path, text: str) -> int:
    rows = [number for number, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(rows) == 1, (text, rows)
    return rows[0]


@pytest.fixture(scope="module")
def models_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tml301") / "stem_models.py"
    path.write_text(MODELS)
    return path


@pytest.fixture(scope="module")
def models(models_file):
    return load_module("%s:ResNetish" % models_file)


def measure(factory):
    observer = StepObserver()
    measure_training_step(factory, [SHAPE], device="fake", observer=observer)
    assert observer.finished and observer.failed is None
    return observer, [f for f in detect(observer) if f.code == "TML301"]


def later_saved(observer, prefixes):
    """Bytes kept for backward at the peak by the modules under ``prefixes``."""
    return sum(line.bytes for line in observer.lines
               if line.what == "saved for backward" and line.module.startswith(prefixes))


@pytest.mark.slow
@pytest.mark.parametrize("name, line, prefixes, reference", [
    ("IdentityPool", "self.maxpool = nn.Identity()  # TML301 here", ("layer",), "ResNetish"),
    ("identity_pool_factory", "net.maxpool = nn.Identity()", ("layer",), "ResNetish"),
    ("SkippedPool", "x = self.layer1(x)  # TML301 runs here", ("layer",), "ResNetish"),
    ("SequentialStem", "self.stem[3] = nn.Identity()", ("body",), "kept"),
    ("SlicedStem", "self.stem = nn.Sequential(*stem)", ("layer",), "kept"),
])
def test_dropped_pool_is_measured_at_its_line_with_what_the_pool_saves(models, models_file, name, line,
                                                                       prefixes, reference):
    observer, found = measure(getattr(models, name))
    assert [(f.filename, f.row) for f in found] == [(str(models_file), row_of(models_file, line))]
    if reference == "kept":
        with_pool, quiet = measure(lambda: getattr(models, name)(keep_pool=True))
        assert quiet == []
    else:
        with_pool, quiet = measure(getattr(models, reference))
        assert quiet == []
    # The same net measured with its pool: the later stages keep that much less.
    saving = later_saved(observer, prefixes) - later_saved(with_pool, prefixes)
    assert saving > 0
    assert abs(found[0].bytes - saving) <= 0.1 * saving, (found[0].bytes, saving)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["NeverPooled", "ConvForPool", "FunctionalPool", "OwnStages", "FeaturesOnly"])
def test_look_alikes_stay_quiet(models, name):
    _, found = measure(getattr(models, name))
    assert found == []


def run(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run([sys.executable, "-m", "torchmemlint", *args], capture_output=True, text=True,
                          env=env, timeout=600)


@pytest.mark.slow
def test_profile_reports_it_with_whether_the_linter_did(models_file):
    result = run("profile", "%s:IdentityPool" % models_file, "--no-verify", "--input-shape",
                 ",".join(map(str, SHAPE)), "--output-format", "json")
    assert result.returncode == 0, result.stderr
    measured = [item for item in json.loads(result.stdout)["measured"] if item["code"] == "TML301"]
    row = row_of(models_file, "self.maxpool = nn.Identity()  # TML301 here")
    assert [(item["filename"], item["row"]) for item in measured] == [(str(models_file), row)]
    assert measured[0]["bytes"] > 0
    # Whether the linter reports TML301 on that line, asked of the linter itself.
    lint = run("check", "--isolated", "--select", "ALL", "--output-format", "json", str(models_file))
    assert lint.returncode in (0, 1), lint.stderr
    static = any(item["code"] == "TML301" and item["location"]["row"] == row for item in json.loads(lint.stdout))
    assert measured[0]["static"] is static
    text = run("profile", "%s:IdentityPool" % models_file, "--no-verify", "--input-shape", ",".join(map(str, SHAPE)))
    assert text.returncode == 0, text.stderr
    assert "TML301" in text.stdout
