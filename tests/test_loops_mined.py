"""Loop (TML5xx) and distributed (TML7xx) rules on reduced copies of real code: the forms
mined from public training and evaluation code, each with the look-alikes that must stay
quiet. Every case is linted through the engine (``lint_source``, its text gates included)
with all the TML5xx and TML7xx rules on, and must give exactly the rows listed."""

from __future__ import annotations

from typing import Dict, List, Tuple

import pytest

from torchmemlint.config import Settings
from torchmemlint.engine import lint_source
from torchmemlint.rules import all_rules

CODES = frozenset(code for code in all_rules() if code.startswith(("TML5", "TML7")))

# name -> (source, {code: rows reported})
CASES: Dict[str, Tuple[str, Dict[str, List[int]]]] = {
    # transformers' generate() runs under its own no_grad (quiet); a generate() the file defines
    # does not (reported), both in a loop over a loader after eval()
    "generate_after_eval_over_loader": ("""import torch
import torch.nn as nn
from transformers import AutoModelForCausalLM


class Predictor:
    def __init__(self, name):
        self.model = AutoModelForCausalLM.from_pretrained(name)

    def predict(self, loader):
        self.model.eval()
        outputs = []
        for batch in loader:
            outputs.extend(self.model.generate(batch["input_ids"]).tolist())
        return outputs
""", {}),
    "own_generate_after_eval_over_loader": ("""import torch
import torch.nn as nn


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(8, 8)

    def forward(self, x):
        return self.head(x)

    def generate(self, x):
        return self(x).argmax(-1)


def decode_all(model, loader):
    model.eval()
    outputs = []
    for batch in loader:
        outputs.extend(model.generate(batch).tolist())
    return outputs
""", {"TML501": [21]}),
    # -- a module's own accessors return modules, not outputs ----------------------------------
    # transformers' FSDP plan: submodules collected with their names (quiet), beside a model's
    # method run on each batch and kept in tuples (reported)
    "submodules_collected_by_name": ("""import torch


def split(model, plan):
    keep, reshard = [], []
    for name, style in plan.items():
        if style == "keep":
            keep.append((name, model.get_submodule(name)))
        else:
            reshard.append((name, model.get_submodule(name)))
    return keep, reshard


def collect(model, loader):
    outs = []
    for x in loader:
        outs.append((x, model.encode(x)))
    return outs
""", {"TML502": [17]}),
    # -- files that never name torch: helpers of a training project ------------------------
    # a training helper module with no import at all sums the loss tensor it backpropagates
    "training_helper_without_imports": ("""device = 'cuda'
def train_1_epoch(num, dataloader, model, optimizer, lr, loss_fn):
    total_loss = 0
    for id, (X, y) in enumerate(dataloader):
        model.train()
        X = X.to(device)
        pred = model(X)
        loss = loss_fn(pred, y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss / len(dataloader)
    return total_loss
""", {"TML502": [12]}),
    # an evaluation helper that imports only tqdm
    "validation_helper_importing_tqdm": ("""from tqdm import tqdm

def validate(valid_loader, model, criterion, device):
    model.eval()
    running_loss = 0
    for x, y_true in tqdm(valid_loader, desc='Validating'):
        y_pred = model(x.to(device))
        loss = criterion(y_pred, y_true.to(device))
        running_loss += loss.item() * x.size(0)
    return model, running_loss / len(valid_loader.dataset)
""", {"TML501": [7]}),
    # accelerate's keyword holder in a package's `__init__.py`
    "accelerate_kwargs_in_an_init": ("""__all__ = ["data", "models"]

from accelerate import Accelerator, DistributedDataParallelKwargs

ddp_args = DistributedDataParallelKwargs(find_unused_parameters=True)
accelerator = Accelerator(kwargs_handlers=[ddp_args])
""", {"TML701": [5]}),
    # look-alike: the same loop in a Paddle file is Paddle's (its own autograd and no_grad)
    "paddle_evaluation": ("""import paddle

def validate(valid_loader, model, criterion):
    model.eval()
    running_loss = 0
    for x, y_true in valid_loader:
        y_pred = model(x)
        running_loss += criterion(y_pred, y_true).item()
    return running_loss
""", {}),
    # look-alike: a JAX/Flax training loop that sums a loss
    "jax_training_sum": ("""import jax
import optax

def train(state, loader, loss_fn):
    total_loss = 0
    for x, y in loader:
        loss, grads = jax.value_and_grad(loss_fn)(state.params, x, y)
        state = state.apply_gradients(grads=grads)
        total_loss += loss
    return total_loss
""", {}),
    # look-alikes: files that never name torch nor ask a module what torch code asks: another
    # library's `model` (fontTools' VariationModel plotted over a grid; a scikit-learn
    # cross-validation) collected in a loop
    "fonttools_variation_model": ("""def _plotModelFromMasters2D(model, masterValues, fig, **kwargs):
    axis = model.axisOrder[0]
    import numpy as np

    X = np.arange(0, 1, 0.01)
    Y = []
    for x in X:
        loc = {axis: x}
        v = model.interpolateFromMasters(loc, masterValues)
        Y.append(v)
    fig.add_subplot(111).plot(X, Y, "-", **kwargs)
""", {}),
    "sklearn_cross_validation": ("""import numpy as np
from sklearn.model_selection import KFold


def evaluate(model, X, y, folds=5):
    preds = []
    for train_idx, val_idx in KFold(folds).split(X):
        model.fit(X[train_idx], y[train_idx])
        preds.append(model.predict(X[val_idx]))
    return np.concatenate(preds)
""", {}),
    # look-alike: the helper without torch, its evaluation under a context of the caller
    # (a borrowed `trainer.valid_step`, which fairseq runs without autograd)
    "borrowed_valid_step_without_torch": ("""class Evaluator:
    def __init__(self, args, dataloader):
        self.dataloader = dataloader

    def evaluate(self, trainer):
        itr = self.dataloader.next_epoch_itr(shuffle=False)
        subset_losses = []
        for sample in itr:
            loss = trainer.valid_step(sample)
            subset_losses.append(loss)
        return sum(subset_losses) / (len(subset_losses) or 1)
""", {}),
    # look-alike: a helper without torch that keeps numbers
    "training_helper_item": ("""def train(epoch, criterion, model, optimizer, loader):
    total_loss = 0.0
    model.train()
    for data, target in loader:
        optimizer.zero_grad()
        loss = criterion(model(data), target)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    return total_loss / len(loader.dataset)
""", {}),
    # -- greedy decoding: indices carry no graph ---------------------------------------------
    # a decoder unwrapped from DDP (`model = model.module`), its logits penalised in place, the
    # indices of `torch.max` joined to the tokens and fed back: the model calls are reported
    # (their outputs only become indices), the joined tokens are not a model output
    "greedy_decode_unwrapped_ddp": ("""import torch
import torch.nn.functional as F


def greedy_decode(spectrum, model, device, bos=0, eos=2, max_len=70, repetition_penalty=None):
    if type(model) == torch.nn.parallel.DistributedDataParallel:
        model = model.module
    else:
        model = model
    ys = torch.ones(spectrum.shape[0], 1, device=device, dtype=torch.long).fill_(bos)
    memory = model.encode(spectrum)
    output = torch.zeros(spectrum.shape[0], max_len, device=device)
    for i in range(max_len - 1):
        out = model.decode(memory, ys)
        logits = model.generator(out[:, -1])
        if repetition_penalty is not None:
            for tok in list(set(ys[0].tolist())):
                logits[:, tok] /= repetition_penalty
        prob = F.softmax(logits, dim=-1)
        _, next_word = torch.max(prob, dim=-1)
        ys = torch.cat([ys, next_word.unsqueeze(1)], dim=1)
        for j in range(len(ys)):
            if ys[j][-1] == eos and not output[j].all():
                output[j] = ys[j]
    return [get_smiles(y) for y in output]
""", {"TML501": [11, 14, 15]}),
    # the same loop without the penalty: the indices flow back into the model every step (the
    # sink follower met them again, recursively, until Python's recursion limit), and reach no
    # number: nothing says the output was only wanted for them
    "greedy_decode_indices_fed_back": ("""import torch
import torch.nn.functional as F


def greedy_decode(spectrum, model, device, bos=0, eos=2, max_len=70):
    ys = torch.ones(spectrum.shape[0], 1, device=device, dtype=torch.long).fill_(bos)
    memory = model.encode(spectrum)
    output = torch.zeros(spectrum.shape[0], max_len, device=device)
    for i in range(max_len - 1):
        out = model.decode(memory, ys)
        out = out['decoder_output']
        logits = model.generator(out[:, -1])
        prob = F.softmax(logits, dim=-1)
        _, next_word = torch.max(prob, dim=-1)
        ys = torch.cat([ys, next_word.unsqueeze(1)], dim=1)
        for j in range(len(ys)):
            if ys[j][-1] == eos and not output[j].all():
                output[j] = ys[j]
    return output
""", {}),
    # look-alike: the values of `topk` keep the graph; joined every step, they are reported
    # (a free function of a pasted minGPT `generate`, the model a parameter)
    "topk_values_joined": ("""import torch
from torch.nn import functional as F


def generate0(model, idx, device, max_new_tokens, block_size, do_sample=False):
    words_probability = torch.ones(idx.shape).float().to(device)
    for _ in range(max_new_tokens):
        idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
        logits, _ = model(idx_cond)
        probs = F.softmax(logits[:, -1, :], dim=-1)
        if do_sample:
            idx_next = torch.multinomial(probs, num_samples=1)
        else:
            _, idx_next = torch.topk(probs, k=1, dim=-1)
        idx = torch.cat((idx, idx_next), dim=1)
        probability, _ = torch.topk(probs, k=1, dim=-1)
        words_probability = torch.cat((words_probability, probability), dim=1)
    return idx, words_probability
""", {"TML502": [17]}),
    # -- containers: a tuple, list or dict holds the tensors it is built from ----------------
    # a training epoch that keeps `(out, y)` of every batch (and the same under `no_grad` in
    # the validation epoch: quiet); `pred, target = model(x), y` binds each name to its own
    # element: the targets kept beside are not outputs
    "training_epoch_keeps_output_pairs": ("""import torch

class Train:
    def __init__(self, model, train_loader, val_loader, optimizer, criterion):
        self.model = model
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.optimizer = optimizer
        self.criterion = criterion

    def train_epoch(self):
        self.model.train()
        total_loss = 0
        epoch_output = []
        targets = []
        for x, y in self.train_loader:
            out, target = self.model(x), y.float()
            loss = self.criterion(out, target)
            epoch_output.append((out, target))
            targets.append(target)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            total_loss += loss.item()
        return total_loss / len(self.train_loader), epoch_output, targets

    def val_epoch(self):
        self.model.eval()
        epoch_output = []
        with torch.no_grad():
            for x, y in self.val_loader:
                out = self.model(x)
                epoch_output.append((out, y))
        return epoch_output
""", {"TML502": [19]}),
    # a GAN's generator loss, backpropagated per sub-generator, rebound after the loop to the
    # numpy mean of their `.item()`s: the history keeps floats (the raw tensor appended inside
    # the loop is still reported)
    "gan_loss_rebound_to_a_numpy_mean": ("""import numpy as np
import torch


def train_gan(generator, discriminator, criterion, optimizer_g, noise, trick, epochs, k, history):
    for epoch in range(epochs):
        losses = {}
        for i in range(k):
            fake_outputs = discriminator(generator(noise))
            generator_loss = criterion(fake_outputs, trick)
            generator_loss.backward()
            optimizer_g.step()
            losses[i] = generator_loss.item()
            history['raw'].append(generator_loss)
        generator_loss = np.mean([losses[i] for i in range(k)])
        history['generator_loss'].append(generator_loss)
""", {"TML502": [14]}),
    # a cross-validation method of a wrapper class whose own `train(model, datamodule, ...)`
    # is not `nn.Module.train(mode)`: `self` is no model, and what its `predict`/`evaluate`
    # return is not a model output; a module's `self.train(False)` still makes `self` one
    # a method of the model (`predict`, defined in another file) run on every batch of an
    # inference loader after `.eval()`: its forward records a graph; so it does over a range
    # of rows after `.eval()` (`analysis/feeds.evaluated_method`: the function evaluates). Under
    # no_grad, after switching back to train, or a module's own method (`load_state_dict`): quiet
    "eval_model_method_over_a_loader": ("""from collections import defaultdict
import torch


class DeepFeatureExtractor:
    def transform(self, X):
        self.tabular_model.model.eval()
        loader = self.tabular_model.datamodule.prepare_inference_dataloader(X)
        found = defaultdict(list)
        for batch in loader:
            if self.task == "ssl":
                ret_value = {"features": self.tabular_model.model.predict(batch, ret_model_output=True)}
            else:
                _, ret_value = self.tabular_model.model.predict(batch, ret_model_output=True)
            for k in self.extract_keys:
                found[k].append(ret_value[k].detach().cpu())
        return found

    def transform_no_grad(self, X):
        self.tabular_model.model.eval()
        found = []
        with torch.no_grad():
            for batch in self.tabular_model.datamodule.prepare_inference_dataloader(X):
                found.append(self.tabular_model.model.predict(batch))
        return found

    def transform_rows(self, rows):
        self.tabular_model.model.eval()
        return [self.tabular_model.model.predict(rows[i]).detach() for i in range(3)]

    def refit(self, loader):
        self.model.eval()
        self.model.train()
        for batch in loader:
            loss = self.model.predict(batch)
            loss.backward()

    def restore(self, checkpoints_loader):
        self.model.eval()
        for state in checkpoints_loader:
            self.model.load_state_dict(state)
""", {"TML501": [12, 14, 29]}),
    # the model a method is given, run on every batch of an inference loader, after its only
    # caller put it in eval mode (`model.eval()` then `self._generate_predictions(model, ...)`):
    # TML501 at the model's methods. A caller under no_grad, or callers that disagree (one
    # trains): no TML501 (the list of outputs kept is TML502's)
    "model_put_in_eval_by_the_caller": ("""import torch
from collections import defaultdict


class TabularModel:
    def _generate_predictions(self, model, inference_dataloader, n_samples, is_probabilistic):
        point_predictions = []
        logits = defaultdict(list)
        for batch in inference_dataloader:
            if is_probabilistic:
                samples, ret_value = model.sample(batch, n_samples, ret_model_output=True)
                y_hat = torch.mean(samples, dim=-1)
            else:
                y_hat, ret_value = model.predict(batch, ret_model_output=True)
            for k, v in ret_value.items():
                logits[k].append(v.detach().cpu())
            point_predictions.append(y_hat.detach().cpu())
        return torch.cat(point_predictions, dim=0), logits

    def _predict(self, test, n_samples=100):
        model = self.model
        model.eval()
        loader = self.datamodule.prepare_inference_dataloader(test)
        return self._generate_predictions(model, loader, n_samples, self.is_probabilistic)

    def _scores(self, model, loader):
        return [model.predict(batch).detach() for batch in loader]

    def evaluate_scores(self, loader):
        self.model.eval()
        with torch.no_grad():
            return self._scores(self.model, loader)

    def _embed(self, model, loader):
        out = []
        for batch in loader:
            out.append(model.embed(batch))
        return out

    def embed_train(self, loader):
        self.model.train()
        return self._embed(self.model, loader)

    def embed_eval(self, loader):
        self.model.eval()
        return self._embed(self.model, loader)
""", {"TML501": [11, 14], "TML502": [37]}),
    "cross_validation_own_train_method": ("""import torch


class TabularModel:
    def train(self, model, datamodule, handle_oom=True):
        model.fit(datamodule)

    def predict(self, df):
        return df

    def evaluate(self, df):
        return [{"loss": 0.0}]

    def cross_validate(self, folds, model, datamodule):
        oof_preds, cv_metrics = [], []
        for train_df, val_df in folds:
            self.train(model, datamodule, handle_oom=False)
            preds = self.predict(val_df)
            oof_preds.append(preds)
            result = self.evaluate(val_df)
            cv_metrics.append(result[0]["loss"])
        return cv_metrics, oof_preds


class Trainer(torch.nn.Module):
    def run(self, loader):
        self.train(False)
        outputs = []
        for x in loader:
            outputs.append(self(x))
        return outputs
""", {"TML502": [30], "TML501": [30]}),
    # a pipeline's `model` is a property unwrapping its DDP; its evaluation-named method runs
    # it between `self.eval()` and `self.train()` and returns the outputs and losses: a
    # property named like a model reads like the attribute it returns (reported); a plain
    # method `model(...)` and a property returning a wrapper object stay quiet
    "property_model_in_eval_method": ("""import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def module_wrapper(ddp_or_model):
    if isinstance(ddp_or_model, DDP):
        return ddp_or_model.module
    return ddp_or_model


class Pipeline(nn.Module):
    @property
    def model(self):
        return module_wrapper(self._model)

    @model.setter
    def model(self, value):
        self._model = value

    def get_eval_loss_dict(self, step):
        self.eval()
        ray_bundle, batch = self.datamanager.next_eval(step)
        model_outputs = self.model(ray_bundle, batch)
        metrics_dict = self.model.get_metrics_dict(model_outputs, batch)
        loss_dict = self.model.get_loss_dict(model_outputs, batch, metrics_dict)
        self.train()
        return model_outputs, loss_dict, metrics_dict
""", {"TML501": [24]}),
    "method_named_model_in_eval_method": ("""import torch
from torch import nn


class Pipeline(nn.Module):
    def model(self, rays, batch):
        return self.renderer.render(rays, batch)

    def get_eval_loss_dict(self, step):
        self.eval()
        ray_bundle, batch = self.datamanager.next_eval(step)
        model_outputs = self.model(ray_bundle, batch)
        self.train()
        return model_outputs
""", {}),
    "property_model_returns_wrapper": ("""import torch
from torch import nn
from detectors import YOLO


class Runner:
    @property
    def model(self):
        return YOLO(self.weights)

    def evaluate(self, images):
        return [self.model(image) for image in images]
""", {}),
}


def _found(source: str) -> Dict[str, List[int]]:
    found: Dict[str, List[int]] = {}
    for finding in lint_source(source, "mined.py", Settings(), CODES):
        found.setdefault(finding.code, []).append(finding.location.row)
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_mined_forms(name):
    source, expected = CASES[name]
    assert _found(source) == expected
