"""TML501 on a model whose class derives a library's module class: PyG's ``GAE`` (every class of
``torch_geometric.nn`` is an ``nn.Module``, as PyG documents), DGL's ``dgl.nn`` layers and
transformers' ``PreTrainedModel`` (``vocabulary.library_module``), in the file or in another
file of the package (SPACE's ``class SPACE_Graph(GAE)`` in ``model.py``, loaded, put in
evaluation mode and run through its ``encode`` in ``utils.py``). A method that returns what one
of its modules returns, also unpacked and returned as a tuple (``z, attention =
self.encoder(x)`` ... ``return z, attention``), is the model's output.

Look-alikes stay quiet: the same calls under ``torch.no_grad()``, a class deriving a library
class that is not a module (PyG's ``Data``), a method returning something its modules did not
make.
"""

from __future__ import annotations

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

MODEL = '''
import torch
from torch.nn import Linear, Sequential, ReLU
from torch_geometric.data import Data
from torch_geometric.nn import GAE


class Graph(GAE):
    def __init__(self, encoder, hidden, features):
        super().__init__(encoder)
        self.decoder_x = Sequential(Linear(hidden, 64), ReLU(), Linear(64, features))

    def encode(self, *args, **kwargs):
        z, attention = self.encoder(*args, **kwargs)
        return z, attention

    def count(self, x):
        return x.shape[0]


class Batch(Data):
    def encode(self, x):
        return self.transform(x)
'''

UTILS = '''
import numpy as np
import torch

from .model import Batch, Graph


def embed(encoder, x, edge_index, path):
    model = Graph(encoder, 10, 20)
    model.load_state_dict(torch.load(path))
    model = model.eval()
    z, attention = model.encode(x, edge_index)  # expect: TML501
    return z.cpu().detach().numpy()


def embed_quietly(encoder, x, edge_index, path):
    model = Graph(encoder, 10, 20)
    model.load_state_dict(torch.load(path))
    model = model.eval()
    with torch.no_grad():
        z, attention = model.encode(x, edge_index)
    return z.cpu().numpy()


def counted(encoder, x, path):
    model = Graph(encoder, 10, 20)
    model = model.eval()
    return np.array(model.count(x))


def batched(x):
    batch = Batch()
    return batch.encode(x).cpu().detach().numpy()
'''


def test_a_model_deriving_a_library_module_class_in_another_file(tmp_path):
    package = tmp_path / "space"
    package.mkdir()
    found = lint_cases(package, {"__init__": "", "model": MODEL, "utils": UTILS}, "TML501")
    assert set(found["utils"]) == marked(UTILS)
    assert not found["model"] and not found["__init__"]


def test_the_same_classes_in_one_file(tmp_path):
    source = MODEL + UTILS.replace("from .model import Batch, Graph\n", "")
    found = lint_cases(tmp_path, {"one": source}, "TML501")
    assert set(found["one"]) == marked(source)
