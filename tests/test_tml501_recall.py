"""TML501 outside evaluation-named code, through the CLI: sampling loops whose model output
ends as indices (``multinomial``, ``argmax``, ``topk`` indices) written into a returned tensor,
generator outputs passed through a helper of the file before ``.detach()``, a sampler of a
class whose base does not turn autograd off, outputs that only become a comparison's bool
tensor (`logits >= t`, as `logits.ge(t)`), and one finding per model call, the calls under
one ``torch.no_grad()`` sharing its fix. Each reported form has look-alikes that must stay quiet."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"

GPT = HEAD + """class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(8, 8)

    def forward(self, idx):
        return self.head(idx)

"""

# the ``else`` of a flag on by default that no call of the file turns off never runs by default;
# turned off by a construction, it does (``AGENT`` then a ``build`` body)
AGENT = GPT + """class Agent:
    def __init__(self, double=True):
        self.double = double
        self.target_net = GPT()

    def targets(self, loader):
        kept = []
        for states in loader:
            if self.double:
                with torch.no_grad():
                    values = self.target_net(states)
            else:
                values = self.target_net(states).max(1)[0].detach()
            kept.append(values.cpu().numpy())
        return kept


def build():
"""

# past an early return while a submodule built only behind a flag off by default is None: runs
# only when a caller turns the flag on (``SLOTS`` then a ``build`` body)
SLOTS = GPT + """class Slots(nn.Module):
    def __init__(self, dim, birth_death=False):
        super().__init__()
        self.attn = GPT()
        if birth_death:
            self.life_gate = nn.Sequential(nn.Linear(dim, 1), nn.Sigmoid())
        else:
            self.life_gate = None

    def forward(self, x):
        return self.attn(x)

    def alive_mask(self, x):
        if self.life_gate is None:
            return torch.ones(x.shape[0], dtype=torch.bool)
        gate = self.life_gate(self.attn(x)).squeeze(-1)
        return gate > 0.5


def build():
"""

# name -> (source, number of TML501 findings)
AGENT_STEPS = """class Agent:
    def __init__(self):
        self.policy_network = nn.Sequential(nn.Linear(8, 4), nn.Softmax(dim=-1))

{body}"""

HOLDER = """class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = GPT()

    def forward(self, x):
        return self.encoder(x)

    def encode(self, x):
        return self.encoder(x)

    def size_of(self, x):
        return x.shape[0] * 8


class Fusion:
    def __init__(self):
        self.autoencoder = AutoEncoder()

    def convert_to_latent(self, images):
{switch}        latent = self.autoencoder.{method}(images)
        return [images, latent.detach()]
"""

TAGGER = """class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = GPT()

    def forward(self, x):
        return self.model(x)

    def predict_batches(self, loader):
        out = []
        for x in loader:
            out.append(self.model(x))
        return out

{caller}"""

HELPER = """def get_model(path):
{get}

def visualize(path, loader, dump):
    model = get_model(path)
    for data in loader:
{run}        dump(data)
"""

# ctdGAN's form: a plain class trains its classifier in ``fit`` (freezing it or not) and
# samples with its generator (``FROZEN.format(freeze=...)``: what ``fit`` does to gradients)
FROZEN = """class Synthesizer:
    def __init__(self):
        self.gen = GPT()
        self.clf = GPT()

    def fit(self, data):
{freeze}        self.clf.eval()

    def sample(self, z, steps):
        rows = []
        for _ in range(steps):
            fake = self.gen(z)
            rows.append(fake.detach().cpu().numpy())
        return rows
"""

CASES = {
    # -- 1. sampling: the output only becomes indices --------------------------------------
    "nanogpt_generate_method": (GPT + """    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            logits = self(idx)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx
""", 1),
    "sample_written_by_index": (HEAD + """def sample(model, start, steps):
    out = torch.zeros(start.size(0), steps, dtype=torch.long)
    tokens = start
    for i in range(steps):
        probs = model(tokens).softmax(-1)
        out[:, i] = torch.multinomial(probs[:, -1], 1).squeeze(-1)
    return out
""", 1),
    "greedy_decode_argmax_cat": (HEAD + """def greedy_decode(model, src, max_len, start_symbol):
    memory = model.encode(src)
    ys = torch.full((1, 1), start_symbol, dtype=torch.long)
    for _ in range(max_len - 1):
        out = model.decode(memory, ys)
        prob = model.generator(out[:, -1])
        next_word = torch.argmax(prob, dim=1, keepdim=True)
        ys = torch.cat([ys, next_word], dim=1)
    return ys
""", 3),  # encode, decode and generator: each call its own finding
    "topk_indices_attribute": (HEAD + """def decode_tokens(net, x, steps):
    tokens = []
    for _ in range(steps):
        logits = net(x)
        tokens.append(torch.topk(logits.softmax(-1), k=1, dim=-1).indices)
    return torch.cat(tokens, dim=1)
""", 1),
    "topk_subscript_one": (HEAD + """def beam_step(model, x):
    scores = F.log_softmax(model(x), dim=-1)
    best = scores.topk(4, dim=-1)[1]
    return best
""", 1),
    "method_multinomial_self_model": (HEAD + """class Sampler:
    def __init__(self, vocab):
        self.model = nn.Sequential(nn.Embedding(vocab, 16), nn.Linear(16, vocab))

    def run(self, tokens, n):
        for _ in range(n):
            probs = self.model(tokens)[:, -1].softmax(dim=-1)
            tokens = torch.cat([tokens, probs.multinomial(1)], dim=1)
        return tokens
""", 1),
    # look-alikes: the logits are returned too; decorated; trained through (REINFORCE);
    # `max(1)[1]` ends the graph but says nothing by itself; `torch.max(a, b)[1]` is a row
    "returns_logits_too": (HEAD + """def sample(model, tokens, n):
    for _ in range(n):
        logits = model(tokens)[:, -1]
        tokens = torch.cat([tokens, torch.multinomial(logits.softmax(-1), 1)], dim=1)
    return tokens, logits
""", 0),
    "generate_under_no_grad": (GPT + """    @torch.no_grad()
    def generate(self, idx, n):
        for _ in range(n):
            probs = F.softmax(self(idx)[:, -1, :], dim=-1)
            idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
        return idx
""", 0),
    "reinforce_trains": (HEAD + """def episode(policy, states, optimizer):
    probs = policy(states).softmax(-1)
    actions = torch.multinomial(probs, 1)
    loss = -torch.log(probs.gather(1, actions)).sum()
    loss.backward()
    optimizer.step()
    return actions
""", 0),
    "max_indices_alone": (HEAD + """def pick(model, x):
    return model(x).max(1)[1]
""", 0),
    "elementwise_max_row": (HEAD + """def pick(model, x, floor):
    out = torch.max(model(x), floor)[1]
    return out
""", 0),
    "frozen_codebook_indices": (HEAD + """class Codebook(nn.Module):
    def __init__(self, freeze=True):
        super().__init__()
        self.blocks = nn.Conv2d(3, 8, 1)
        if freeze:
            for param in self.parameters():
                param.requires_grad = False

    def get_codebook_indices(self, pixel_values):
        return torch.argmax(self.blocks(pixel_values), axis=1)
""", 0),
    "codebook_indices": (HEAD + """class Codebook(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Conv2d(3, 8, 1)

    def get_codebook_indices(self, pixel_values):
        return torch.multinomial(self.blocks(pixel_values).flatten(1).softmax(-1), 1)
""", 1),
    "forward_calls_self_not_reported": (GPT + """    def step(self, idx):
        return self(idx)
""", 0),
    # a module class's own method running its forward for a numpy result (a landmark detector's
    # `get_landmarks`): `self` is the class's own module, not one a caller lends it
    "own_forward_to_numpy": (GPT + """    def get_landmarks(self, img):
        inp = torch.from_numpy(img.transpose((2, 0, 1))).float()
        inp.div_(255.0).unsqueeze_(0)
        outputs, _ = self.forward(inp)
        out = outputs[-1][:, :-1, :, :]
        heatmaps = out.detach().cpu().numpy()
        return heatmaps.reshape(-1, 2)
""", 1),
    "own_call_to_argmax": (GPT + """    def predict_classes(self, x):
        out = self(x)
        return torch.argmax(out, dim=1)
""", 1),
    # look-alikes: the output returned; the caller turns autograd off; a static method's
    # first parameter is a model lent by its caller
    "own_forward_returned": (GPT + """    def heatmaps(self, x):
        outputs, _ = self.forward(x)
        return outputs[-1]
""", 0),
    "own_forward_under_callers_no_grad": (GPT + """    def get_landmarks(self, img):
        out = self.forward(torch.from_numpy(img).float())
        return out.detach().cpu().numpy()


def detect(fan, img):
    with torch.no_grad():
        return fan.get_landmarks(img)
""", 0),
    "static_method_lent_model": (GPT + """    @staticmethod
    def run(model, x):
        return model(x).detach().cpu().numpy()
""", 0),
    # -- 2. through a helper of the file --------------------------------------------------
    "ctgan_apply_activate": (HEAD + """class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, z):
        return self.fc(z)


class Synthesizer:
    def __init__(self):
        self._generator = Generator()

    def _apply_activate(self, data):
        parts = [torch.tanh(data[:, :4]), F.gumbel_softmax(data[:, 4:], tau=0.2)]
        return torch.cat(parts, dim=1)

    def sample(self, n):
        z = torch.randn(n, 8)
        fake = self._generator(z)
        fakeact = self._apply_activate(fake)
        return fakeact.detach().cpu().numpy()
""", 1),
    "module_level_postprocess": (HEAD + """from torchvision.utils import save_image


class G(nn.Module):
    def forward(self, z):
        return z


def to_image(x, low=-1.0):
    x = (x - low) / 2
    return x.clamp(0, 1)


def sample_images(z, path):
    imgs = to_image(generator(z), low=-1.0)
    save_image(imgs, path)


generator = G()
""", 1),
    "helper_that_consumes": (HEAD + """class Synth:
    def __init__(self):
        self.net = nn.Linear(4, 4)

    def _report(self, out):
        print(out.mean().item())

    def check(self, x):
        out = self.net(x)
        self._report(out)
""", 1),
    "ctgan_helper_loops_and_static_helper": (HEAD + """class Synthesizer:
    def __init__(self, spans):
        self._generator = nn.Linear(8, 8)
        self.spans = spans

    @staticmethod
    def _gumbel(logits, tau=1.0):
        for _ in range(10):
            transformed = F.gumbel_softmax(logits, tau=tau)
            if not torch.isnan(transformed).any():
                return transformed
        raise ValueError("nan")

    def _apply_activate(self, data):
        data_t = []
        st = 0
        for kind, dim in self.spans:
            if kind == "tanh":
                data_t.append(torch.tanh(data[:, st:st + dim]))
            else:
                data_t.append(self._gumbel(data[:, st:st + dim], tau=0.2))
            st += dim
        return torch.cat(data_t, dim=1)

    def sample(self, n, steps):
        data = []
        for _ in range(steps):
            fake = self._generator(torch.randn(n, 8))
            fakeact = self._apply_activate(fake)
            data.append(fakeact.detach().cpu().numpy())
        return data
""", 1),
    # look-alikes: a helper that keeps its argument, or hands it to an unknown function;
    # a static helper that keeps it; the list holding the output returned or kept on self
    "static_helper_keeps": (HEAD + """from somewhere import keep


class Synthesizer:
    def __init__(self):
        self._generator = nn.Linear(8, 8)

    @staticmethod
    def _activate(logits):
        keep(logits)
        return torch.tanh(logits)

    def sample(self, n):
        fake = self._activate(self._generator(torch.randn(n, 8)))
        return fake.detach().cpu().numpy()
""", 0),
    "list_of_outputs_returned": (HEAD + """def sample(generator, zs):
    outs = []
    for z in zs:
        outs.append(generator(z))
        outs.append(z)
    return outs


generator = nn.Linear(8, 8)
""", 0),
    "list_of_outputs_kept_on_self": (HEAD + """class Synth:
    def __init__(self):
        self.net = nn.Linear(8, 8)

    def sample(self, zs):
        outs = []
        for z in zs:
            outs.append(self.net(z))
            outs.append(z)
        self.last = outs
        print(len(outs))
""", 0),
    "helper_stores_argument": (HEAD + """class Synth:
    def __init__(self):
        self._generator = nn.Linear(8, 8)

    def _apply_activate(self, data):
        self.last = data
        return torch.tanh(data)

    def sample(self, n):
        fake = self._apply_activate(self._generator(torch.randn(n, 8)))
        return fake.detach().cpu().numpy()
""", 0),
    "helper_passes_on": (HEAD + """from somewhere import keep


def activate(data):
    keep(data)
    return torch.tanh(data)


def sample(generator, z):
    fake = activate(generator(z))
    return fake.detach().numpy()


generator = nn.Linear(8, 8)
""", 0),
    "helper_by_star_args": (HEAD + """def activate(*parts):
    return torch.cat(parts)


def sample(generator, z):
    fake = activate(*[generator(z)])
    return fake.detach().numpy()


generator = nn.Linear(8, 8)
""", 0),
    # -- 2b. Lightning: the module a training hook of a callback is given -------------------
    "lightning_callback_logs_images": ("""import torch
import pytorch_lightning as pl
from pytorch_lightning import Callback
from torchvision.utils import make_grid


class ImageLogger(Callback):
    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs, batch, batch_idx):
        if trainer.global_step % 100 == 0:
            hr, lr = batch
            fake = pl_module(lr)
            grid = torch.cat((make_grid(fake[:4]), make_grid(hr[:4])), -1)
            trainer.logger.experiment.add_image("sr", grid, global_step=trainer.global_step)
""", 1),
    "lightning_module_annotated_function": ("""import lightning.pytorch as pl
from torchvision.utils import save_image


def log_samples(lit: pl.LightningModule, z, path):
    save_image(lit(z), path)
""", 1),
    # look-alikes: a validation hook (Lightning runs it without autograd), a method of a
    # class that is not a callback (its caller decides), the output kept on the callback
    "lightning_validation_hook": ("""import pytorch_lightning as pl
from pytorch_lightning import Callback


class ImageLogger(Callback):
    def on_validation_batch_end(self, trainer, pl_module: pl.LightningModule, outputs, batch, batch_idx):
        trainer.logger.experiment.add_image("sr", pl_module(batch[1])[0])
""", 0),
    "not_a_callback": ("""import pytorch_lightning as pl


class ImageLogger:
    def on_train_batch_end(self, trainer, pl_module: pl.LightningModule, outputs, batch, batch_idx):
        trainer.logger.experiment.add_image("sr", pl_module(batch[1])[0])
""", 0),
    "lightning_callback_keeps_output": ("""import pytorch_lightning as pl
from pytorch_lightning import Callback


class Keeper(Callback):
    def on_train_batch_end(self, trainer, pl_module: pl.LightningModule, outputs, batch, batch_idx):
        self.last = pl_module(batch[1])
        trainer.logger.experiment.add_image("sr", self.last[0])
""", 0),
    # -- 3. a model from a base class: only a base that runs without autograd exempts -------
    "foreign_base_sampler": ("""import torch
from .base import BaseVAE


class Sampler(BaseVAE):
    def sample(self, n):
        z = torch.randn(n, 16)
        return self.model.decoder(z)[:, :3].detach()
""", 1),
    "local_base_builds_and_evals": ("""import torch
import torch.nn as nn


class Base:
    def __init__(self):
        self.model = nn.Sequential(nn.Linear(16, 16))
        self.model.eval()


class Sampler(Base):
    def sample(self, n):
        z = torch.randn(n, 16)
        return self.model(z)[:, :3].detach()
""", 1),
    "transformers_pipeline": ("""import torch
from transformers import Pipeline


class ScorePipeline(Pipeline):
    def postprocess_scores(self, x):
        print(self.model(x).logits.argmax(-1).tolist())
""", 0),
    "relative_pipeline_through_local_base": ("""import torch
from .base import ChunkPipeline


class Text2TextPipeline(ChunkPipeline):
    pass


class SummaryPipeline(Text2TextPipeline):
    def log_scores(self, x):
        print(self.model(x).logits.argmax(-1).tolist())
""", 0),
    "no_grad_caller_in_class": ("""import torch
from .base import BaseVAE


class Sampler(BaseVAE):
    @torch.no_grad()
    def __call__(self, n):
        return self.sample(n)

    def sample(self, n):
        return self.model.decoder(torch.randn(n, 16)).detach()
""", 0),
    # -- comparisons: `logits >= t` is a bool tensor, as `logits.ge(t)` is --------------------
    # what transformers' ``AutoTokenizer.from_pretrained`` loads is a tokenizer, not a module;
    # the model ``AutoModel.from_pretrained`` loads is one
    "else_of_a_flag_on_by_default": (AGENT + "    return Agent()\n", 0),
    # a part of the model run on the output of a reported model call (a CRF decoding the
    # emissions, the model's own loss): one finding, the model call's
    "parts_of_a_reported_output": (HEAD + """def dev(model, dev_loader, head_mask):
    model.eval()
    for inputs, masks, tags in dev_loader:
        feats = model(inputs, masks, head_mask)
        path_score, best_path = model.crf(feats, masks)
        loss = model.loss(feats, masks, tags)
        print(loss.item(), best_path)
    model.train()
""", 1),
    # look-alike: a part run on the batch itself is a model call of its own
    "part_of_the_batch": (HEAD + """def dev(model, dev_loader):
    model.eval()
    for inputs, masks in dev_loader:
        feats = model(inputs, masks)
        codes = model.encode(inputs)
        print(feats.argmax(-1).tolist(), codes.argmax(-1).tolist())
    model.train()
""", 2),
    # a local bound to a part of a model reached through attributes (upit's
    # `model = learn.model.G_B.to(device)`): a module, run here only to save its outputs
    "part_of_a_learners_model": (HEAD + """import torchvision


def get_preds(learn, test_dl, convert_to="B", device="cuda"):
    if convert_to == "B": model = learn.model.G_B.to(device)
    else:               model = learn.model.G_A.to(device)
    for i, (fn, im) in enumerate(test_dl):
        preds = (model(im.to(device)) / 2 + 0.5)
        for j in range(len(fn)):
            torchvision.utils.save_image(preds[j], fn[j])
""", 1),
    # look-alikes: the same part trained; a name bound once to something else too
    "part_of_a_learners_model_trained": (HEAD + """def fit(learn, dl, opt, device="cuda"):
    model = learn.model.G_B.to(device)
    for im, target in dl:
        loss = F.mse_loss(model(im.to(device)), target)
        loss.backward()
        opt.step()
""", 0),
    "part_or_something_else": (HEAD + """import torchvision


def get_preds(learn, test_dl, load):
    model = learn.model.G_B
    if load:
        model = load(model)
    for i, (fn, im) in enumerate(test_dl):
        torchvision.utils.save_image(model(im), fn[0])
""", 0),
    "past_an_early_return_of_a_gate_built_behind_a_flag": (SLOTS + "    return Slots(8)\n", 0),
    "past_an_early_return_a_construction_turns_on": (SLOTS + "    return Slots(8, birth_death=True)\n", 2),
    "else_of_a_flag_a_construction_turns_off": (AGENT + "    return Agent(double=False)\n", 1),
    "tokenizer_from_pretrained": ("""def tokenize_examples(tok, examples, seq):
    items = []
    for ex in examples:
        prompt, full = ex["prompt"], ex["prompt"] + ex["answer"]
        p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        f_ids = tok(full, add_special_tokens=False)["input_ids"]
        p_len = len(p_ids) if f_ids[:len(p_ids)] == p_ids else min(len(p_ids), len(f_ids) - 1)
        f_ids = f_ids[:seq]
        sup = [i >= p_len for i in range(len(f_ids))]
        if not any(sup):
            continue
        labels = [t if s_ else -100 for t, s_ in zip(f_ids, sup)]
        items.append((f_ids, labels))
    return items


def embed(model, batches):
    kept = []
    for batch in batches:
        kept.append(model(batch).last_hidden_state.detach().cpu().numpy())
    return kept


def main(args, examples):
    from transformers import AutoModel, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModel.from_pretrained(args.model)
    model.eval()
    items = tokenize_examples(tok, examples, args.seq)
    return items, embed(model, items)
""", 1),
    # a loss (a class named ``...Loss``) records a graph only from its inputs: here made under
    # no_grad; the model call that makes them is the one judged
    "loss_of_no_grad_outputs": (GPT + """class MaskedLogCoshLoss(nn.Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, a, b):
        return torch.log(torch.cosh(a - b))


class Detector:
    def __init__(self, model):
        self.model = model
        self.loss = MaskedLogCoshLoss(reduction="none")
        self.scorer = GPT()

    def anomaly_score(self, x):
        with torch.no_grad():
            res = self.model(x)
        loss = self.loss(res, x)
        return (loss > 0.5).long()

    def score_with_autograd(self, x):
        res = self.scorer(x)
        loss = self.loss(res, x)
        return (loss > 0.5).long()
""", 1),
    # a construction whose local name shadows the class raises UnboundLocalError: no model runs
    "local_shadows_the_class": (GPT + """def sample(n):
    GPT = GPT()
    out = GPT(torch.randn(n, 8))
    return out.detach().cpu().numpy()


def sample_named(n):
    model = GPT()
    out = model(torch.randn(n, 8))
    return out.detach().cpu().numpy()
""", 1),
    "route_by_comparison_method": (HEAD + """class Router(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)
        self.threshold = 0.5

    def forward(self, x):
        return self.fc(x)

    def route_fine(self, x):
        logits = self.fc(x)
        return torch.sigmoid(logits) >= self.threshold
""", 1),
    "route_by_comparison_function": (HEAD + """def keep_mask(scorer: nn.Module, x, margin):
    scores = scorer(x)
    return scores.sigmoid() > margin
""", 1),
    "route_ge_method_same_finding": (HEAD + """def keep_mask(scorer: nn.Module, x, margin):
    scores = scorer(x)
    return scores.sigmoid().ge(margin)
""", 1),
    "comparison_with_none_says_nothing": (HEAD + """def maybe(scorer: nn.Module, x):
    scores = scorer(x)
    missing = scores is None
    return scores, missing
""", 0),
    "comparison_beside_a_returned_output": (HEAD + """def keep(scorer: nn.Module, x, margin):
    scores = scorer(x)
    mask = scores > margin
    return scores[mask]
""", 0),
    # -- an evaluation method of a module class called only by another evaluation method with
    # autograd on (parsnip's ``predict`` -> ``predict_dataset``): nobody decides for it; called
    # by a method under ``no_grad`` (or by ``forward``), the caller decides
    "eval_method_called_by_open_evaluation": (GPT + TAGGER.format(caller="""    def predict(self, loader):
        return self.predict_batches(loader)
"""), 1),
    "eval_method_called_under_no_grad": (GPT + TAGGER.format(caller="""    @torch.no_grad()
    def predict(self, loader):
        return self.predict_batches(loader)
"""), 0),
    "eval_method_called_by_a_training_method": (GPT + TAGGER.format(caller="""    def fit_step(self, loader, opt):
        loss = sum(p.float().sum() for p in self.predict_batches(loader))
        loss.backward()
        opt.step()
"""), 0),
    # -- a training step that computes its loss but never backpropagates it (causaltorch's
    # ``_learn_policy_gradient`` stubs): the missing backward is the bug, not autograd; a
    # function so named that computes no loss, and validation code computing a loss, stay reported
    "training_step_missing_its_backward": (HEAD + AGENT_STEPS.format(body="""    def _learn_policy_gradient(self, states, actions, rewards):
        log_probs = torch.log(self.policy_network(states).gather(1, actions))
        policy_loss = -(log_probs.squeeze() * rewards).mean()
        return {"policy_loss": policy_loss.item()}
"""), 0),
    "training_named_without_a_loss": (HEAD + AGENT_STEPS.format(body="""    def update_statistics(self, states, stats):
        stats["mean_q"] = self.policy_network(states).mean().item()
"""), 1),
    "validation_computing_a_loss": (HEAD + """def validate(net, loader):
    total = 0.0
    for x, y in loader:
        val_loss = F.mse_loss(net(x), y)
        total += val_loss.item()
    return total
""", 1),
    # -- a method of a module the class holds, after its ``eval()`` (fusilli's
    # ``convert_to_latent``: ``self.autoencoder.eval(); self.autoencoder.encode_image(x)``)
    "held_module_method_after_eval": (GPT + HOLDER.format(method="encode", switch="        self.autoencoder.eval()\n"), 1),
    "held_module_method_without_eval": (GPT + HOLDER.format(method="encode", switch=""), 1),  # (only `.detach()` reached)
    "held_module_method_not_an_output": (GPT + HOLDER.format(method="size_of", switch="        self.autoencoder.eval()\n"), 0),
    # -- a helper of the file returns the model in evaluation mode (ThreeDJCG's visualize
    # scripts: ``model = get_model(args)``, the helper ending ``model.eval(); return model``)
    "helper_returns_model_in_eval": (GPT + HELPER.format(get="""    model = GPT()
    model.load_state_dict(torch.load(path))
    model.eval()
    return model
""", run="        data = model(data)\n"), 1),
    "helper_returns_model_eval_call": (GPT + HELPER.format(get="""    model = GPT()
    return model.eval()
""", run="        data = model(data)\n"), 1),
    # (a helper that may leave the model in training mode: no "after its eval()" finding; the
    # helper returns a module it builds, so the output reaching only `dump` is judged as after
    # `model = GPT()`: analysis/module_builders.py, test_helper_mode_not_read_as_eval below)
    "helper_switches_only_in_a_branch": (GPT + HELPER.format(get="""    model = GPT()
    if path:
        model.eval()
    return model
""", run="        data = model(data)\n"), 1),
    "helper_puts_it_back_in_training": (GPT + HELPER.format(get="""    model = GPT()
    model.eval()
    model.train()
    return model
""", run="        data = model(data)\n"), 1),
    "helper_eval_model_under_no_grad": (GPT + HELPER.format(get="""    model = GPT()
    model.eval()
    return model
""", run="        with torch.no_grad():\n            data = model(data)\n"), 0),
    # -- frozen weights: a class that freezes one module still records the graph of another;
    # one that freezes the module it samples with (or turns gradients on unread) stays quiet
    "frozen_classifier_generator_sampled": (GPT + FROZEN.format(freeze="""        for p in self.clf.parameters():
            p.requires_grad = False
"""), 1),
    "frozen_named_parameters_of_generator": (GPT + FROZEN.format(freeze="""        for _, p in self.gen.named_parameters():
            p.requires_grad = False
"""), 0),
    "generator_frozen_by_requires_grad_": (GPT + FROZEN.format(freeze="""        self.gen.requires_grad_(False)
"""), 0),
    "penalty_input_requires_grad": (GPT + FROZEN.format(freeze="""        mixed = torch.rand(4, 8)
        mixed.requires_grad_(True)
        self.clf(mixed).sum().backward()
"""), 1),
    "enable_grad_in_another_method": (GPT + FROZEN.format(freeze="""        with torch.enable_grad():
            self.clf(torch.rand(4, 8)).sum().backward()
"""), 0),
    "comparison_in_a_training_step": (HEAD + """def step(scorer: nn.Module, x, margin, opt):
    scores = scorer(x)
    loss = (scores - margin).clamp(min=0).mean()
    loss.backward()
    opt.step()
    return (scores > margin).float().mean().item()
""", 0),
    # a model taken from a container whose every item the function switched to eval mode
    "items_switched_in_a_loop": ("""import torch.nn.functional as F


def evaluate_classifier(networks, dataloader, options):
    for net in networks.values():
        net.eval()
    if options.get("mode") == "baseline":
        netC = networks["classifier_k"]
    else:
        netC = networks["classifier_kplusone"]
    correct = total = 0
    for images, labels in dataloader:
        _, predicted = F.softmax(netC(images), dim=1).max(1)
        correct += int((predicted == labels).sum())
        total += len(labels)
    return correct / total


def look_alike(networks, dataloader, optimizer):
    for net in networks.values():
        net.train()
    netC = networks["classifier"]
    for images, labels in dataloader:
        loss = F.cross_entropy(netC(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""", 1),
    # a method of the agent, switched to eval mode, stepped in an evaluation's environment loop
    "agent_method_in_an_evaluation_loop": ("""import numpy as np
import torch


class Trainer:
    def evaluate(self, num_episodes):
        obs = self.test_env.reset()
        returns, episodes = [], 0
        self.agent.eval()
        while episodes < num_episodes:
            action = self.agent.Actor(obs).detach()
            obs, reward, done, info = self.test_env.step(action.cpu().numpy())
            obs = torch.as_tensor(obs)
            returns.append(reward)
            episodes += int(done)
        self.agent.train()
        return float(np.mean(returns))

    def evaluate_unswitched(self, num_episodes):
        obs = self.test_env.reset()
        for _ in range(num_episodes):
            action = self.agent.Actor(obs).detach()
            obs, reward, done, info = self.test_env.step(action.cpu().numpy())

    def rollout(self, steps):
        self.agent.eval()
        obs = self.env.reset()
        for _ in range(steps):
            action = self.agent.Actor(obs)
            obs, reward, done, info = self.env.step(action)
""", 1),
    # a function named for updating whose `losses` list only ever holds counts: `losses = []`
    # computes no loss, so it is no unfinished training step (an octave classifier's `update`)
    "counts_in_a_losses_list": ("""import sys
import torch
from torch import nn


class IterativeTrainer:
    def __init__(self, model: nn.Module, loader):
        self.model: nn.Module = model
        self.loader = loader

    def train(self, optimizer):
        self.model.train(True)
        for batch in self.loader:
            loss = self.model(batch["z"]).mean()
            loss.backward()
            optimizer.step()

    def update(self):
        losses, octave_data = [], []
        for ibatch in range(0, sys.maxsize):
            batch = self.loader.next()
            result = self.model(batch["z"])
            max_idx = torch.argmax(result, dim=1, keepdim=False)
            ncorrect = torch.eq(max_idx, batch["y"]).sum()
            losses.append((ncorrect, result.shape[0]))
            octave_data.extend(max_idx.cpu().tolist())
        return octave_data

    def update_policy(self, criterion):
        losses = []
        for batch in self.loader:
            result = self.model(batch["z"])
            loss = criterion(result, batch["y"])
            losses.append(loss.item())
        return losses
""", 1),
    # the training arm and the prediction arm never run together: the prediction's call is
    # judged as in a function that does not train (a deconvolution package's `predict`)
    "training_in_another_arm": ("""import torch


def adaptive_stage(model, x, optimizer, steps):
    for _ in range(steps):
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
    return model(x).detach().numpy()


def predict(model, test_x, optimizer, adaptive=False):
    if adaptive:
        return adaptive_stage(model, test_x, optimizer, 300)
    else:
        model.eval()
        _, pred = model(test_x)
        return pred.cpu().detach().numpy()


def predict_then_adapt(model, test_x, optimizer):
    model.eval()
    _, pred = model(test_x)
    adaptive_stage(model, test_x, optimizer, 10)
    return pred.cpu().detach().numpy()
""", 1),
}


def _run(tmp_path: Path) -> dict:
    for name, (code, _) in CASES.items():
        (tmp_path / f"{name}.py").write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--select", "TML501", "--output-format",
         "json", "--no-cache", "--isolated", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    found: dict = {}
    for item in json.loads(proc.stdout):
        found.setdefault(Path(item["filename"]).stem, []).append(item)
    return found


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("tml501"))


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_sampling_helpers_and_bases(found, name):
    expected = CASES[name][1]
    messages = [item["message"] for item in found.get(name, [])]
    assert len(messages) == expected, messages


@pytest.mark.slow
@pytest.mark.parametrize("name", ["helper_switches_only_in_a_branch", "helper_puts_it_back_in_training"])
def test_helper_mode_not_read_as_eval(found, name):
    """A helper that may return the model in training mode is no evaluation switch: the finding
    is the one `model = GPT()` in place gets (the output only reaches `dump`), never one after
    the helper's `eval()`."""
    messages = [item["message"] for item in found.get(name, [])]
    assert messages and all("only reaches `dump`" in m and "eval()" not in m for m in messages), messages


@pytest.mark.slow
def test_a_sampling_finding_names_the_indices(found):
    (item,) = found["sample_written_by_index"]
    assert "`torch.multinomial`" in item["message"]
    assert item["location"]["row"] == 10


@pytest.mark.slow
def test_every_model_call_is_a_finding_sharing_its_no_grad_fix(tmp_path):
    (tmp_path / "many.py").write_text(HEAD + """def validate(model, loader):
    model.eval()
    for x in loader:
        a = model(x)
        b = model(x.flip(-1))
        print((a + b).argmax(1).tolist())
    print(model.encode(x).tolist())


def single(model, loader):
    model.eval()
    for x in loader:
        print(model(x).argmax(1).tolist())


def draw(z, fixed):
    fake = generator(z)
    ref = generator(fixed)
    print(fake.detach().mean().item(), ref.detach().mean().item())


generator = nn.Linear(4, 4)
""", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--select", "TML501", "--output-format",
         "json", "--no-cache", "--isolated", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    by_row = {item["location"]["row"]: item["message"] for item in json.loads(proc.stdout)}
    # every call its own finding; the calls under one `torch.no_grad()` say how many it covers
    assert sorted(by_row) == [9, 10, 12, 18, 22, 23], by_row
    for row in (9, 10, 12):
        assert "covers its 3 model calls" in by_row[row], by_row[row]
    assert "model calls" not in by_row[18]
    for row in (22, 23):
        assert "covers its 2 model calls" in by_row[row], by_row[row]
    fixes = {
        row: json.dumps(item["fix"], sort_keys=True)
        for item in json.loads(proc.stdout) for row in [item["location"]["row"]]
    }
    assert fixes[9] == fixes[10] == fixes[12] != fixes[22] == fixes[23]
    assert "null" not in (fixes[9], fixes[22])


@pytest.mark.slow
def test_fix_applies_the_shared_no_grad_once_and_noqa_is_per_call(tmp_path):
    """`--fix` decorates each function once for all its findings (no overlapping edits, nothing
    left), and `# noqa` on one call's line silences that call only."""
    source = HEAD + """def draw(z, fixed):
    fake = generator(z)
    ref = generator(fixed)  # noqa: TML501
    print(fake.detach().mean().item(), ref.detach().mean().item())


def show(z):
    print(generator(z).detach().sum().item(), generator(z + 1).detach().sum().item())


generator = nn.Linear(4, 4)
"""
    path = tmp_path / "draw.py"
    path.write_text(source, encoding="utf-8")
    command = [sys.executable, "-m", "torchmemlint", "check", "--select", "TML501", "--no-cache",
               "--isolated"]
    proc = subprocess.run(command + ["--output-format", "json", str(path)],
                          capture_output=True, text=True, timeout=300)
    rows = sorted((item["location"]["row"], item["location"]["column"])
                  for item in json.loads(proc.stdout))
    assert rows == [(7, 12), (13, 11), (13, 47)], rows
    proc = subprocess.run(command + ["--fix", "--unsafe-fixes", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Fixed 3 findings" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    fixed = path.read_text(encoding="utf-8")
    assert fixed.count("@torch.no_grad()") == 2, fixed
    assert fixed.replace("@torch.no_grad()\n", "") == source
