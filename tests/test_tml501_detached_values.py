"""TML501 where the called value's kind is not shown (``module_calls.called_value``): a GAN
generator handed in as ``G``, a module-level ``generator`` built by the script, ``self.netG`` of
a plain (non-module) wrapper class, ``model.module.generation(n)`` of a wrapped model. The
function never backpropagates and its output reaches only numbers, numpy or prints. Where only
the name says "model" (``G``, ``generator``), the code itself must detach the output
(``.detach()``, ``.data``) on its way there: the detach says the output carries a graph; a
module-level ``seg_model = torch.load(path)`` is a model by what it is built from. A
``test_*`` method of a model's or trainer's class is evaluation code (``test_suites.py``); the
functions a test runner collects stay quiet, and so do the methods a module's ``forward`` runs
(a router whose scores serve only ``topk`` indices is training code: ``part_of_forward``). An
output passed through a submodule of the class, whatever builds it (``self.head =
hydra.utils.instantiate(cfg.head)``), is followed on (``callers._submodule_call``).

A model's own generating method (``self.encode(x)``) whose output is only saved is found
wherever it is called (the file gate knows such methods: ``callers.MODEL_VERBS``).

Look-alikes stay quiet: values not shown to be modules nor named so (a cost function, a
transform, a weight function, a distribution's ``sample``; a parameter run on a loader's
batches but named for what it does with the model's output, ``metric(y, out)``,
``criterion(out, y)``), the same calls without a detach (a callback returning numbers), an
output returned to the caller, a function that trains (mmengine's
``optimizer.update_params(loss)`` included), calls under ``no_grad``, a tensor's
own methods (``x.float().detach()``), a method of the class (``self.helper(x)``), an imported
function, a local function bound in the function,
and a value's method whose name says nothing of a model (``scaler.inverse(x).detach()``).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "parameter_called_and_detached_to_numpy": '''
        import numpy as np
        import torch


        def generate_samples(params, G, n, batch_size):
            out = np.empty((0, params["x_dim"]))
            m = 0
            while m < n:
                z = torch.randn(batch_size, params["z_dim"])
                fake = G(z)  # expect: TML501
                fake = fake.cpu().data.numpy()
                out = np.concatenate((out, fake), axis=0)
                m += batch_size
            return out
    ''',
    "module_level_generator_detached": '''
        import torch
        import torch.nn as nn
        from PIL import Image


        class Generator(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(8, 16)

            def forward(self, z, labels):
                return self.net(z) + labels


        generator = Generator().to("cpu")
        generator.eval()


        def generate_eye(label):
            noise = torch.randn(1, 8)
            img = generator(noise, label)  # expect: TML501
            arr = img.detach().squeeze().numpy()
            return Image.fromarray(arr)
    ''',
    "module_level_loaded_model_in_a_callback": '''
        import torch
        import torchvision.transforms as T

        seg_model = torch.load("seg.pt")
        seg_model.eval()
        transform = T.Compose([T.ToTensor()])


        def stream_callback(frame, state):
            y = seg_model(frame)  # expect: TML501
            state["speech"] = y.argmax().item() > 0
            x = transform(frame)
            print(x.detach().numpy())
    ''',
    "wrapper_whose_method_turns_autograd_off_stays_quiet": '''
        import torch


        class PitchInfer:
            def __init__(self, path):
                self.model = torch.load(path)

            def infer(self, wav):
                import torch

                with torch.no_grad():
                    return self.model(wav)


        class Provider:
            def __init__(self, path):
                self.model = PitchInfer(path)

            def compute(self, x):
                return self.model.infer(torch.from_numpy(x)).squeeze().detach().cpu().numpy()
    ''',
    "self_attribute_of_plain_class_sampling_method": '''
        import numpy as np
        import torch


        class WGAN:
            def __init__(self, generator):
                self.netG = generator

            def sample(self, n):
                parts = []
                for _ in range(n // 100):
                    batch = self.netG.sample(n=100)  # expect: TML501
                    parts.append(batch.detach().numpy())
                return np.concatenate(parts)
    ''',
    "wrapped_model_generation": '''
        import torch


        def predict(model, n_gen, cond, plot):
            samples = model.module.generation(n_gen, c=cond)  # expect: TML501
            plot(samples.detach().cpu())
    ''',
    "test_named_methods_of_a_model_class_are_evaluation": '''
        import torch
        import torch.nn.functional as F


        class SpointModel:
            def __init__(self, model):
                self.model = model

            def test_st(self, x, y):
                self.model.eval()
                pred = self.model(x)  # expect: TML501
                return F.mse_loss(pred, y)
    ''',
    "test_method_a_training_caller_trains_on_stays_quiet": '''
        import torch


        class Trainer:
            def __init__(self, model, data):
                self.model = model
                self.data = data

            def train(self, optimizer, epochs):
                for epoch in range(epochs):
                    self.model.train()
                    embedding = self.test()
                    loss = embedding.pow(2).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

            def test(self):
                self.model.eval()
                z = self.model(self.data)
                return z

            def validate(self):
                self.model.eval()
                z = self.model(self.data)  # expect: TML501
                return z

            def fit(self, optimizer):
                loss = self.model(self.data).mean()
                loss.backward()
                optimizer.step()
                print(self.validate().mean().item())
    ''',
    "test_suite_functions_stay_quiet": '''
        import unittest

        import torch


        def test_model_forward(model, x):
            model.eval()
            out = model(x)
            print(out.detach().numpy())
            return out


        class TestModel:
            def test_forward(self, model, x):
                model.eval()
                out = model(x)
                return out


        class ModelCheck(unittest.TestCase):
            def test_forward(self, model=None, x=None):
                model.eval()
                out = model(x)
                return out
    ''',
    "router_run_by_the_forward_stays_quiet": '''
        import torch
        import torch.nn as nn


        class BlockSparse(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.gate = nn.Linear(d, 1)
                self.proj = nn.Linear(d, d)

            def _select_blocks(self, x, k):
                scores = self.gate(x).squeeze(-1)
                return scores.topk(k, dim=-1).indices

            def _sparse(self, x):
                idx = self._select_blocks(x, 2)
                return torch.gather(x, 1, idx.unsqueeze(-1).expand(-1, -1, x.shape[-1]))

            def forward(self, x):
                return self.proj(self._sparse(x))

            def inspect(self, x):
                scores = self.gate(x)  # expect: TML501
                print(scores.topk(2, dim=1).indices.tolist())


        from neuralpkg.core.base import BaseAttention


        class FusionAttention(BaseAttention):
            def __init__(self, d):
                super().__init__()
                self.lora_attn_gate = nn.Linear(d, 1)

            def _select_blocks(self, q):
                q_gate = self.lora_attn_gate(q).squeeze(-1)
                return torch.topk(q_gate, 2, dim=-1).indices

            def forward(self, q):
                return q[:, self._select_blocks(q)]
    ''',
    "output_through_a_submodule_built_by_a_factory": '''
        import hydra
        import torch
        import torch.nn as nn


        class Emotion(nn.Module):
            def __init__(self, cfg):
                super().__init__()
                self.encoder = nn.Linear(8, 8)
                self.head = hydra.utils.instantiate(cfg.head)

            def forward(self, wav, length):
                return self.encoder(wav), length

            def get_probs(self, wav, length):
                encoded, _ = self.forward(wav, length)  # expect: TML501
                logits = self.head(encoded.mean(-1))
                return torch.softmax(logits, dim=-1).detach().tolist()
    ''',
    "no_detach_stays_quiet": '''
        import numpy as np


        def evaluate(score_fn, xs):
            scores = [float(score_fn(x)) for x in xs]
            return np.mean(scores)


        def run(callback, x):
            value = callback(x)
            print(value.item())
    ''',
    "returned_output_stays_quiet": '''
        def sample(G, z):
            fake = G(z)
            return fake.detach()
    ''',
    "training_function_stays_quiet": '''
        def train_step(G, D, opt, z):
            fake = G(z)
            print(fake.detach().mean().item())
            loss = -D(fake).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


        class DataFree:
            def __init__(self, generator, student):
                self.generator = generator
                self.student = student

            def train_student(self, data, optimizer):
                fake = self.generator(data).detach()
                loss = self.student(fake).mean()
                optimizer.update_params(loss)  # (mmengine: backward and step)
                return loss
    ''',
    "a_parameter_run_on_a_loaders_batches_whatever_its_name": '''
        import torch


        def openset_scores(dataloader_test, netC):
            scores = []
            for images, labels in dataloader_test:
                logits = netC(images)  # expect: TML501
                scores.extend(logits.data.max(1)[0].cpu().numpy())
            return scores


        def features(classifier, loader):
            found = [classifier(x).detach().cpu().numpy() for x, _ in loader]  # expect: TML501
            return found


        def smoothed(weight_fn, loader):
            # not detached: a function's output is not known to carry a graph
            return [weight_fn(x).cpu().numpy() for x, _ in loader]


        def evaluate_batches(self_forward, batches, metric, criterion):
            total = 0
            for x, y in batches:
                out = self_forward(x)  # expect: TML501
                total += metric(y, out).data[0] + criterion(out, y).detach().item()
            return total


        def scaled(scale_fn, batch):
            # no loader: one call of a callable handed in
            return scale_fn(batch).detach().numpy()
    ''',
    # SpaMosaic's infer_emb: one model per modality, each put in eval mode and run by its key
    "an_item_of_the_models_container": '''
        import torch
        import torch.nn as nn


        class Framework:
            def __init__(self, mods):
                self.mod_model = nn.ModuleDict({k: nn.Linear(8, 8) for k in mods})

            def infer_emb(self, graphs):
                out = {}
                for k in self.mod_model:
                    self.mod_model[k].eval()
                    z = self.mod_model[k](graphs[k])  # expect: TML501
                    out[k] = z.detach().cpu().numpy()
                return out

            def fit(self, graphs, optimizer):
                for k in self.mod_model:
                    loss = self.mod_model[k](graphs[k]).pow(2).mean()
                    loss.backward()
                    optimizer.step()
    ''',
    "values_that_are_not_models_stay_quiet": '''
        import torch


        class Assigner:
            def __init__(self, cls_cost, transform):
                self.cls_cost = cls_cost
                self.transform = transform

            def assign(self, pred, gt):
                cost = self.cls_cost(pred, gt)
                print(cost.detach().cpu().numpy())

            def process(self, img):
                x = self.transform(img)
                print(x.detach().numpy())


        def fit(weight_fn, distribution, x):
            print(weight_fn(x).detach().numpy())
            print(distribution.sample().detach().numpy())
    ''',
    "own_generating_method_whose_output_is_only_saved": '''
        import numpy as np
        import torch
        import torch.nn as nn


        class AutoencoderKL(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(8, 8)

            def encode(self, x):
                return self.encoder(x)

            def visualize_latent(self, x):
                latent = self.encode(x)  # expect: TML501
                np.save("latent.npy", latent.cpu().detach().numpy())
    ''',
    "under_no_grad_stays_quiet": '''
        import torch


        def generate(G, z):
            with torch.no_grad():
                fake = G(z)
            return fake.detach().cpu().numpy().tolist()


        @torch.no_grad()
        def show(G, z):
            print(G(z).detach().cpu().numpy())
    ''',
    "tensor_methods_stay_quiet": '''
        def to_numpy(x, scaler):
            y = x.float()
            print(y.detach().numpy())
            z = scaler.inverse(x)
            print(z.detach().numpy())
    ''',
    "class_methods_imports_and_locals_stay_quiet": '''
        import torch
        from somewhere import make_noise


        class Sampler:
            def __init__(self, net):
                self.net = net

            def helper(self, x):
                return x * 2

            def show(self, x):
                print(self.helper(x).detach().numpy())
                print(make_noise(x).detach().numpy())


        def plot(x):
            local = lambda t: t * 2
            print(local(x).detach().numpy())
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("tml501_detached_values"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


# sharingan's memory tokens, in a package: a module's method that writes what its layers compute
# into its own parameter's ``.data`` is a state update, whose callers (a streaming engine run
# under ``torch.no_grad()`` elsewhere) decide about autograd; a method whose output only becomes
# numpy stays reported
STATE_UPDATE = '''
import torch
import torch.nn as nn


class MemoryTokens(nn.Module):
    def __init__(self, num_tokens=8, dim=64):
        super().__init__()
        self.memory = nn.Parameter(torch.randn(num_tokens, dim) * 0.02)
        self.query_proj = nn.Linear(dim, dim)
        self.key_proj = nn.Linear(dim, dim)
        self.frame_count = 0

    def update(self, frame: torch.Tensor) -> None:
        if frame.dim() == 1:
            frame = frame.unsqueeze(0)
        queries = self.query_proj(self.memory)
        keys = self.key_proj(frame)
        new = queries * keys.mean(0)
        self.memory.data = new.data
        self.frame_count += 1

    def snapshot(self, frame: torch.Tensor):
        if frame.dim() == 1:
            frame = frame.unsqueeze(0)
        return self.key_proj(frame).detach().cpu().numpy()  # expect: TML501
'''


def test_a_state_update_into_the_modules_own_parameter_is_left_to_its_callers(tmp_path):
    package = tmp_path / "memory"
    package.mkdir()
    found = lint_cases(package, {"__init__": "from memory.tokens import MemoryTokens\n", "tokens": STATE_UPDATE}, "TML501")
    assert set(found["tokens"]) == marked(STATE_UPDATE) and not found["__init__"]
