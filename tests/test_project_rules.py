"""Rules that ask the project (TML301, TML403, TML501): a project whose blocks, encoders,
helpers and training script are separate files gets the findings of the same code pasted into
one file, line for line.

The project is written to a temporary directory: a package ``pkg`` (layers, blocks that take
the layers with a star import, a builder module, encoders, a network that imports a subclass
base through a re-export in ``pkg/__init__.py``), a ``models.py`` and a training script
beside it that takes the models with ``from models import *``. The same statements, without
the imports between these files, make the pasted file. Both go through the CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent

# (path, source); the files in the order the pasted copy takes them (definitions first).
# A trailing `# expect: CODE` marks where a finding must be; `# quiet` a look-alike.
FILES: List[Tuple[str, str]] = [
    ("pkg/layers.py", '''\
import torch.nn as nn


class ConvBN(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return self.bn(self.conv(x))


class ConvGN(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.norm = nn.GroupNorm(8, c)

    def forward(self, x):
        return self.norm(self.conv(x))


def stem_norm(x, mean, var):
    return nn.functional.batch_norm(x, mean, var, training=True)


class BaseModel(nn.Module):
    def describe(self):
        return type(self).__name__
'''),
    ("pkg/blocks.py", '''\
import torch.nn as nn

from .layers import *


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = ConvBN(c)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.body(x))


class GNBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = ConvGN(c)

    def forward(self, x):
        return self.body(x)
'''),
    ("pkg/builders.py", '''\
import torch.nn as nn

from .blocks import Block, GNBlock


def make_stage(c, n):
    return nn.Sequential(*[Block(c) for _ in range(n)])


def make_gn_stage(c, n):
    return nn.Sequential(*[GNBlock(c) for _ in range(n)])
'''),
    ("pkg/encoders.py", '''\
import torch.nn as nn
from torchvision.models.resnet import Bottleneck, ResNet


class TVEncoder(ResNet):
    def __init__(self):
        super().__init__(Bottleneck, [3, 4, 6, 3])
        del self.fc


class ResNetEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = nn.Conv2d(64, 64, 3, padding=1)

    def forward(self, x):
        return self.layer1(self.maxpool(self.relu(self.bn1(self.conv1(x)))))


class PlainEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, padding=1)
        self.maxpool = nn.Conv2d(64, 64, 3, stride=2, padding=1)
        self.layer1 = nn.Conv2d(64, 64, 3, padding=1)

    def forward(self, x):
        return self.layer1(self.maxpool(self.conv1(x)))
'''),
    ("pkg/__init__.py", '''\
from .encoders import ResNetEncoder
from .blocks import *
'''),
    ("pkg/net.py", '''\
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from . import ResNetEncoder
from .encoders import PlainEncoder, TVEncoder, Bottleneck
from .builders import make_gn_stage, make_stage
from .blocks import Block, GNBlock
from .layers import BaseModel, stem_norm


class Tagger(BaseModel):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(self.rnn(x)[0])

    def predict(self, x):
        out, _ = self.rnn(x)  # quiet: a method of a module class (its caller decides)
        return {"pred": self.fc(out)}


class Encoder(ResNetEncoder):
    def __init__(self):
        super().__init__()
        self.maxpool = nn.Identity()  # expect: TML301


class StemEncoder(ResNetEncoder):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(self.conv1, self.bn1, self.relu)  # expect: TML301

    def forward(self, x):
        return self.layer1(self.stem(x))


class TVNoPool(TVEncoder):
    def __init__(self):
        super().__init__()
        self.maxpool = nn.Identity()  # expect: TML301


class FlatEncoder(PlainEncoder):
    def __init__(self):
        super().__init__()
        self.maxpool = nn.Identity()  # quiet: no max-pool stem to drop


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.block = Block(64)
        self.gn_block = GNBlock(64)
        self.stage = make_stage(64, 2)
        self.gn_stage = make_gn_stage(64, 2)
        self.bottleneck = Bottleneck(256, 64)
        self.gn_bottleneck = Bottleneck(256, 64, norm_layer=lambda c: nn.GroupNorm(8, c))

    def forward(self, x, mean, var):
        x = self.encoder(x)
        x = checkpoint(self.block, x, use_reentrant=False)  # expect: TML403 (layers)
        x = checkpoint(self.gn_block, x, use_reentrant=False)  # quiet
        x = checkpoint(self.stage, x, use_reentrant=False)  # expect: TML403 (layers)
        x = checkpoint(self.gn_stage, x, use_reentrant=False)  # quiet
        x = checkpoint(self.bottleneck, x, use_reentrant=False)  # expect: TML403
        x = checkpoint(self.gn_bottleneck, x, use_reentrant=False)  # quiet
        return checkpoint(stem_norm, x, mean, var, use_reentrant=False)  # expect: TML403
'''),
    ("models.py", '''\
import torch.nn as nn


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, z):
        return self.fc(z)


class Sampler:
    def __call__(self, z):
        return z

    def eval(self):
        return self
'''),
    ("train.py", '''\
import torch
from torchvision.utils import save_image

from models import *
from pkg.net import Net



class EMAGenerator(Generator):
    pass


generator = Generator()
sampler = Sampler()
ema = EMAGenerator()


def sample_image(n_row, step):
    z = torch.randn(n_row, 8)
    save_image(generator(z).data, "images/%d.png" % step)  # expect: TML501


def sample_plain(n_row, step):
    z = torch.randn(n_row, 8)
    save_image(sampler(z).data, "plain/%d.png" % step)  # quiet: not a module


def sample_ema(n_row, step):
    z = torch.randn(n_row, 8)
    save_image(ema(z).data, "ema/%d.png" % step)  # expect: TML501


def export_features(x, mean, var):
    runner = Net()
    runner.eval()
    features = runner(x, mean, var)  # expect: TML501
    return features


def export_plain(x):
    tool = Sampler()
    tool.eval()
    out = tool(x)  # quiet: not a module
    return out
'''),
]
CODES = "TML301,TML403,TML501"


def _project_import(line: str) -> bool:
    """An import between the files of the project (left out of the pasted copy)."""
    stripped = line.strip()
    return stripped.startswith(("from .", "from models import", "from pkg"))


def _write(root: Path) -> Tuple[Path, Dict[Tuple[str, int], int], Set[Tuple[str, int, str]]]:
    """The project under ``root/project`` and the pasted copy ``root/pasted.py``; the map
    (file, line) -> pasted line, and the expected findings (file, line, code)."""
    project = root / "project"
    pasted_lines: List[str] = []
    line_map: Dict[Tuple[str, int], int] = {}
    expected: Set[Tuple[str, int, str]] = set()
    for relative, source in FILES:
        path = project / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
        for number, line in enumerate(source.splitlines(), start=1):
            if "# expect: " in line:
                expected.add((relative, number, line.rsplit("# expect: ", 1)[1].split()[0]))
            if _project_import(line):
                continue
            pasted_lines.append(line)
            line_map[(relative, number)] = len(pasted_lines)
        pasted_lines.extend(["", ""])
    pasted = root / "pasted.py"
    pasted.write_text("\n".join(pasted_lines) + "\n", encoding="utf-8")
    return project, line_map, expected


def _lint(target: Path, *extra: str) -> List[dict]:
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--no-cache", "--select", CODES,
         "--output-format", "json", "--exit-zero", *extra, str(target)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("extra", [(), ("--isolated",)], ids=["default", "isolated"])
def test_split_project_gets_the_findings_of_the_pasted_file(tmp_path, extra):
    project, line_map, expected = _write(tmp_path)
    split = {
        (Path(f["filename"]).resolve().relative_to(project.resolve()).as_posix(), f["location"]["row"], f["code"])
        for f in _lint(project, *extra)
    }
    assert split == expected
    pasted = {(f["location"]["row"], f["code"]) for f in _lint(tmp_path / "pasted.py", *extra)}
    assert pasted == {(line_map[(file, line)], code) for file, line, code in split}


@pytest.mark.slow
def test_one_file_of_the_project_reads_its_neighbours(tmp_path):
    """Linting only ``pkg/net.py`` still follows its names into the rest of its package."""
    project, _, expected = _write(tmp_path)
    found = {(f["location"]["row"], f["code"]) for f in _lint(project / "pkg" / "net.py")}
    assert found == {(line, code) for file, line, code in expected if file == "pkg/net.py"}


@pytest.mark.slow
def test_an_edit_in_one_file_relints_the_files_that_import_it(tmp_path):
    """With the result cache: after ``pkg/layers.py`` turns its BatchNorm into a GroupNorm, the
    files that import it (directly or through others) are linted again and the two findings
    that came from it go; ``models.py`` and ``pkg/encoders.py``, which do not, are not."""
    project, _, expected = _write(tmp_path)

    def lint() -> Set[Tuple[str, int, str]]:
        result = subprocess.run(
            [sys.executable, "-m", "torchmemlint", "check", "--select", CODES,
             "--output-format", "json", "--exit-zero", "."],
            capture_output=True, text=True, cwd=project, timeout=300,
        )
        assert result.returncode == 0, result.stderr
        return {
            (Path(f["filename"]).resolve().relative_to(project.resolve()).as_posix(), f["location"]["row"], f["code"])
            for f in json.loads(result.stdout)
        }

    assert lint() == expected
    cache = project / ".torchmemlint_cache"
    stamps = {path: path.stat().st_mtime_ns for path in cache.glob("*/*/*.json")}
    assert len(stamps) == len(FILES)
    layers = project / "pkg" / "layers.py"
    layers.write_text(layers.read_text().replace("nn.BatchNorm2d(c)", "nn.GroupNorm(8, c)"))
    warm = lint()
    rewritten = sorted(
        path.name for path, stamp in stamps.items()
        if path.stat().st_mtime_ns != stamp
    )
    assert len(rewritten) == len(FILES) - 2, rewritten  # all but models.py and encoders.py
    net = dict(FILES)["pkg/net.py"].splitlines()
    gone = {("pkg/net.py", number, "TML403") for number, line in enumerate(net, start=1) if "(layers)" in line}
    assert len(gone) == 2
    assert warm == expected - gone


@pytest.mark.slow
def test_flake8_on_one_file_follows_its_names_into_the_project(tmp_path):
    """flake8 checks ``pkg/net.py`` alone; the rules still read the rest of its package."""
    project, _, expected = _write(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "TML301,TML403", "pkg/net.py"],
        capture_output=True, text=True, cwd=project, timeout=300,
    )
    found = {
        (int(line.split(":")[1]), line.split(": ", 1)[1].split()[0])
        for line in result.stdout.splitlines() if line.strip()
    }
    assert found == {(line, code) for file, line, code in expected if file == "pkg/net.py"}, result.stderr
