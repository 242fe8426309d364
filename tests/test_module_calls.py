"""TML501/TML502 on model calls known by what the called value is (``analysis.module_calls``),
through the CLI: a detector's encoder handed in and annotated as a module or a tensor function,
a submodule a class switches to evaluation elsewhere, a Sequential of a model's first layers
built in a loop, a part of a loaded checkpoint's model run over a data set, a model moved to a
device then scored with a metric object, another object's model, an in-place temperature on
sampled logits, and losses unpacked from a loss function's tuple. Every reported form has
look-alikes that must stay quiet (no_grad / inference_mode, a caller under no_grad or one that
trains, backward in the function, input gradients, a script's top-level code calling a
module's method under no_grad (or after `torch.set_grad_enabled(False)`) or training on it, module-class methods that are part of the
module's forward (also as a library base class runs them: scvi-tools' ``inference``), callables that are not modules, tests).

Each case marks the line of every expected finding with ``# <-``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAD = (
    "from typing import Callable, Optional\n\nimport numpy as np\nimport torch\nimport torch.nn as nn\n"
    "import torch.nn.functional as F\nfrom torch import Tensor\nfrom torch.utils.data import DataLoader\n\n\n"
)

DETECTOR = HEAD + """class Detector:
    def __init__(self, encoder: Optional[Callable[[Tensor], Tensor]], k: int = 5):
        self.encoder = encoder
        self.k = k

    def score(self, z):
        return z.detach().cpu().norm(dim=1)

"""

# name -> source; the expected findings are the lines marked `# <-` (TML501 unless the mark
# says `# <- TML502`)
# a language model's sampling method (the `{mark}` line is its own forward, run per token)
GEN = """class TinyLM(nn.Module):
    def __init__(self, vocab=50, dim=16, seq_len=8):
        super().__init__()
        self.seq_len = seq_len
        self.embeddings = nn.Parameter(torch.randn(vocab, dim))
        self.output_W = nn.Parameter(torch.randn(dim, vocab))

    def forward(self, idx):
        return self.embeddings[idx] @ self.output_W

    def generate(self, prefix, max_tokens=20):
        idx = torch.tensor(prefix, dtype=torch.long)
        for _ in range(max_tokens):
            logits = self.forward(idx[-self.seq_len:]){mark}
            probs = torch.softmax(logits[-1], dim=-1)
            token = torch.multinomial(probs, 1).item()
            idx = torch.cat([idx, torch.tensor([token])])
        return idx.cpu().numpy()


"""

CASES = {
    # -- reported ---------------------------------------------------------------------------
    "detector_tensor_callable": DETECTOR + """    def predict(self, x):
        if self.encoder is None:
            raise ValueError("no encoder")
        z = self.encoder(x)  # <-
        return self.score(z)
""",
    "detector_module_annotation": HEAD + """class OutlierScorer:
    def __init__(self, backbone: nn.Module, head: "nn.Module" = None):
        self.backbone = backbone

    def predict(self, images):
        feats = self.backbone(images)  # <-
        return feats.pow(2).sum(dim=1)
""",
    "submodule_switched_elsewhere": HEAD + """class Embedder:
    def __init__(self, extractor, device):
        self.extractor = extractor
        self.device = device

    def prepare(self):
        self.extractor.eval()
        self.extractor.to(self.device)

    def infer(self, batch):
        return self.extractor(batch.to(self.device)).mean(dim=1)  # <-
""",
    "attribute_built_from_file_class": HEAD + """class Featurizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 4)

    def forward(self, x):
        return self.proj(x)


class Pipeline:
    def __init__(self):
        self.featurizer = Featurizer()

    def inference(self, x):
        feats = self.featurizer(x)  # <-
        return feats.cpu()
""",
    "prefix_sequential_in_loop": HEAD + """from torch.nn import Sequential


class LayerwiseScores:
    def __init__(self, model):
        self.model = model

    def predict(self, x):
        zs = []
        for depth in range(len(self.model)):
            prefix = Sequential(*list(self.model)[: depth + 1])
            z = prefix(x)  # <-
            zs.append(z.flatten(1).mean(dim=1))
        return zs
""",
    "inplace_temperature_then_sampling": HEAD + """class Coder(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def sample(self, src, steps, temperature=1.0):
        tokens = torch.zeros(1, steps + 1, dtype=torch.long)
        memory = self.encoder(src)  # <-
        for i in range(1, steps + 1):
            logits, _ = self.decoder(tokens[:, :i], memory)  # <- (each model call is its own finding)
            logits = logits[:, -1]
            logits /= temperature
            tokens[:, i] = torch.multinomial(F.softmax(logits, dim=-1), 1).squeeze(-1)
        return tokens.tolist()
""",
    # SPACE's load_SPACE_model: the model rebound to itself switched (`model = model.eval()`),
    # then a method of its class that returns a submodule's output
    "rebound_to_itself_switched": HEAD + """class Graph(nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def encode(self, x, edge_index):
        return self.encoder(x, edge_index), None


def load_embeddings(encoder, data, path):
    model = Graph(encoder=encoder)
    model.load_state_dict(torch.load(path))
    model = model.eval()
    z_nodes, attn_w = model.encode(data.x, data.edge_index)  # <-
    return z_nodes.cpu().detach().numpy()
""",
    "loaded_checkpoint_part_over_a_data_set": HEAD + """def export_codes(path, images):
    state = torch.load(path, map_location="cpu")
    autoencoder = state["network"]
    analysis = autoencoder.analysis_transform
    codes = []
    for image in images:
        y = analysis(torch.from_numpy(image)[None])  # <-
        codes.append(np.rint(y.cpu().detach().numpy()))
    return codes
""",
    "model_moved_then_metric_object": HEAD + """def report_experts(experts, datasets, Accuracy):
    for expert, data in zip(experts, datasets):
        net = expert.network
        net.to("cuda")
        acc = Accuracy()
        for x, y in DataLoader(data, batch_size=64):
            y_hat = net(x.cuda())  # <-
            acc.update(y_hat, y.cuda())
        print(acc.compute())
        net.to("cpu")
""",
    "model_parameter_metric_update": HEAD + """def check(model, data, metric):
    for x, y in DataLoader(data, batch_size=128):
        metric.update(model(x), y)  # <-
    return metric.result()
""",
    "another_objects_model": HEAD + """class PlotCallback:
    def plot_batch(self):
        preds = self.trainer.model(*self.trainer.inputs)  # <-
        values = preds.detach().cpu().numpy()
        return values
""",
    "eval_switch_is_not_enough": HEAD + """class Scorer:
    def __init__(self, encoder: nn.Module):
        self.encoder = encoder

    def predict(self, x):
        self.encoder.eval()
        return self.encoder(x).argmax(dim=1)  # <-
""",
    "method_returning_a_submodule_output": HEAD + """class VAE(nn.Module):
    def __init__(self, latent):
        super().__init__()
        self.latent = latent
        self.decoder = nn.Linear(latent, 784)

    def forward(self, z):
        return self.decoder(z)

    def generate(self, n):
        z = torch.randn(n, self.latent)
        images = self.decoder(z)
        if n == 1:
            images = images.squeeze(0)
        return images


def show(model, plt, n=10):
    samples = model.generate(n)  # <-
    plt.imshow(samples.detach().cpu().numpy()[0].reshape(28, 28))
""",
    "method_of_a_model_built_here": HEAD + """class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 16)

    def forward(self, z):
        return self.body(z)

    def sample(self, n):
        return self.body(torch.randn(n, 4))


class Plain:
    def sample(self, n):
        return torch.randn(n, 4)


def main(path):
    model = Decoder().to("cpu")
    other = Plain()
    drawn = other.sample(3)
    print(drawn.numpy())
    images = model.sample(8)  # <-
    np.save(path, images.detach().numpy())
""",
    "unpacked_loss_beside_the_backwarded_one": HEAD + """def optimise_design(design, loss_fn, steps, optimizer):
    trace = []
    for _ in range(steps):
        total_loss, design_loss = loss_fn(design)
        total_loss.backward(retain_graph=True)
        trace.append(design_loss)  # <- TML502
        optimizer.step()
    return trace
""",
    "unpacked_backwarded_loss_over_a_loader": HEAD + """def fit(loader, criterion, optimizer):
    losses = []
    for batch in loader:
        loss, stats = criterion(batch)
        loss.backward()
        losses.append(loss)  # <- TML502
        optimizer.step()
    return torch.stack(losses)
""",
    # -- quiet ------------------------------------------------------------------------------
    "detector_no_grad_decorator": DETECTOR + """    @torch.no_grad()
    def predict(self, x):
        return self.score(self.encoder(x))
""",
    "detector_inference_mode": DETECTOR + """    def predict(self, x):
        with torch.inference_mode():
            z = self.encoder(x)
        return self.score(z)
""",
    "detector_caller_under_no_grad": DETECTOR + """    def predict(self, x):
        return self.score(self.encoder(x))


def run(detector, loader):
    with torch.no_grad():
        return [detector.predict(x) for x in loader]
""",
    "detector_caller_trains": HEAD + """class Head:
    def __init__(self, encoder: nn.Module):
        self.encoder = encoder

    def predict(self, x):
        return self.encoder(x)


def train(head, loader, optimizer):
    for x, y in loader:
        loss = F.mse_loss(head.predict(x), y)
        loss.backward()
        optimizer.step()
""",
    "detector_backward_in_function": DETECTOR + """    def predict(self, x, optimizer):
        z = self.encoder(x)
        z.norm().backward()
        optimizer.step()
        return self.score(z)
""",
    "detector_trains_through_a_helper": HEAD + """class Adapter:
    def __init__(self, encoder: nn.Module, optimizer):
        self.encoder = encoder
        self.optimizer = optimizer

    def _entropy_step(self, logits):
        loss = -(logits.softmax(1) * logits.log_softmax(1)).sum(1).mean()
        self._apply(loss)

    def _apply(self, loss):
        loss.backward()
        self.optimizer.step()

    def predict(self, x):
        logits = self.encoder(x)
        self._entropy_step(logits)
        return logits.detach().argmax(dim=1)
""",
    "model_trains_through_a_helper": HEAD + """def adapt(model, x, optimizer):
    model(x).pow(2).mean().backward()
    optimizer.step()


def predict(model, loader, optimizer):
    preds = []
    for x in loader:
        adapt(model, x, optimizer)
        preds.append(model(x).argmax(dim=1))
    return preds
""",
    "detector_input_gradients": DETECTOR + """    def predict(self, x):
        x = x.clone().requires_grad_()
        z = self.encoder(x)
        return self.score(z)
""",
    "module_method_part_of_forward": HEAD + """class Segmenter(nn.Module):
    def __init__(self):
        super().__init__()
        self.class_predictor = nn.Linear(16, 4)
        self.mask_head = nn.Linear(16, 16)

    def predict(self, tokens):
        return self.class_predictor(tokens), self.mask_head(tokens)

    def forward(self, tokens):
        logits, masks = self.predict(tokens)
        return logits.softmax(-1) * masks.sum(-1, keepdim=True)
""",
    # learning3d's PRNet: model-named parts (``self.emb_nn``, ``self.temp_net``) in an
    # evaluation-named method that the module's own methods run
    "module_method_with_model_named_parts": HEAD + """class PRNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb_nn = nn.Linear(16, 16)
        self.temp_net = nn.Linear(16, 1)

    def predict_embedding(self, src):
        embedding = self.emb_nn(src)
        return embedding, self.temp_net(embedding)

    def spam(self, src):
        embedding, temperature = self.predict_embedding(src)
        return embedding * temperature

    def forward(self, src):
        return self.spam(src)
""",
    # scvi-tools' module interface: ``BaseModuleClass.forward`` runs ``inference`` in training
    "library_base_runs_inference": HEAD + """from scvi.module.base import BaseModuleClass


class VAE(BaseModuleClass):
    def __init__(self):
        super().__init__()
        self.z_encoder = nn.Linear(16, 8)
        self.decoder = nn.Linear(8, 16)

    def inference(self, x):
        qz = self.z_encoder(x)
        return {"qz": qz, "z": qz.tanh()}

    def generative(self, z):
        return {"px": self.decoder(z)}
""",
    "other_library_base_inference": HEAD + """from mylib.base import ModuleBase


class VAE(ModuleBase):
    def __init__(self):
        super().__init__()
        self.z_encoder = nn.Linear(16, 8)

    def inference(self, x):
        qz = self.z_encoder(x)  # <-
        return {"qz": qz, "z": qz.tanh()}
""",
    "module_class_public_predict": HEAD + """class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.GRU(8, 8, batch_first=True)
        self.tagger = nn.Linear(8, 3)

    def forward(self, x):
        return self.tagger(self.encoder(x)[0])

    def predict(self, x):
        hidden, _ = self.encoder(x)
        return self.tagger(hidden).sigmoid()
""",
    "methods_under_no_grad_or_returning_numbers": HEAD + """class VAE(nn.Module):
    def __init__(self, latent):
        super().__init__()
        self.latent = latent
        self.decoder = nn.Linear(latent, 784)

    @torch.no_grad()
    def generate(self, n):
        return self.decoder(torch.randn(n, self.latent))

    def codes(self, x):
        return self.decoder(x).argmax(dim=1).tolist()  # <- (here, not in `show`)


def show(model, plt, x, n=10):
    samples = model.generate(n)
    plt.imshow(samples.cpu().numpy()[0].reshape(28, 28))
    print(model.codes(x))
""",
    "plain_callable_attribute": HEAD + """class Cleaner:
    def __init__(self, transform, tokenizer: Callable[[str], Tensor]):
        self.transform = transform
        self.tokenizer = tokenizer

    def predict(self, x, text):
        ids = self.tokenizer(text)
        return self.transform(x), ids
""",
    "test_function_runs_a_layer": HEAD + """def test_layer_shapes():
    layer = nn.Linear(4, 2)
    out = layer(torch.ones(3, 4))
    print(out.detach().shape)
""",
    "metric_update_but_cache_update": HEAD + """def collect(model, data, cache):
    for x, _ in DataLoader(data, batch_size=8):
        cache.update({"out": model(x)})
    return cache
""",
    "unpacked_stats_appended": HEAD + """def fit(loader, criterion, optimizer):
    history = []
    for batch in loader:
        loss, stats = criterion(batch)
        loss.backward()
        history.append(stats)
        optimizer.step()
    return history
""",
    "unpacked_loss_item_appended": HEAD + """def optimise_design(design, loss_fn, steps, optimizer):
    trace = []
    for _ in range(steps):
        total_loss, design_loss = loss_fn(design)
        total_loss.backward()
        trace.append(design_loss.detach())
        optimizer.step()
    return trace
""",
    # a module's sampling method whose only caller is the file's `__main__` demo, with autograd on
    # and no training there (lunsformter's `generate`): the method is the evaluation code
    "generate_called_by_script": HEAD + GEN.replace("{mark}", "  # <-") + """if __name__ == "__main__":
    model = TinyLM()
    print(model.generate([1, 2, 3], max_tokens=5))
""",
    # the same demo under no_grad: quiet; top-level code that trains on the method: quiet
    "generate_called_by_script_no_grad": HEAD + GEN.replace("{mark}", "") + """if __name__ == "__main__":
    model = TinyLM()
    with torch.no_grad():
        print(model.generate([1, 2, 3], max_tokens=5))
""",
    # `log_prob`, `log_softmax`: logarithms, not logging (transkun's ContinuousBernoulli loss)
    "distribution_log_prob_returned": HEAD + """class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.pred = nn.Linear(8, 4)

    def log_prob(self, x, y):
        logits = self.pred(x)
        dist = torch.distributions.ContinuousBernoulli(logits=logits)
        return dist.log_prob(y).sum(-1)

    def nll(self, x, y):
        return -self.pred(x).log_softmax(-1).gather(-1, y[:, None]).mean()
""",
    # the same outputs logged: a logger's method (`log_metrics`) is an end
    "outputs_logged": HEAD + """def evaluate(model, loader, logger):
    model.eval()
    for x, y in loader:
        out = model(x)  # <-
        logger.log_metrics({"loss": F.cross_entropy(out, y).item()})
""",
    "generate_called_by_script_grad_disabled": HEAD + GEN.replace("{mark}", "") + """torch.set_grad_enabled(False)
model = TinyLM()
print(model.generate([1, 2, 3], max_tokens=5))
""",
    # `separator.freeze()` (open-unmix; Lightning's `freeze()`): every parameter stops requiring
    # grad, so no graph is recorded: quiet, as after `requires_grad_(False)`
    "frozen_before_the_call": HEAD + """def separate_and_evaluate(track, model_path, mus, device="cpu"):
    separator = torch.load(model_path)
    separator.freeze()
    separator.to(device)
    estimates = separator(torch.as_tensor(track.audio, device=device))
    mus.save_estimates(estimates.cpu().detach().numpy(), track)
""",
    "not_frozen_before_the_call": HEAD + """def separate_and_evaluate(track, model_path, mus, device="cpu"):
    separator = torch.load(model_path)
    separator.eval()
    separator.to(device)
    estimates = separator(torch.as_tensor(track.audio, device=device))  # <-
    mus.save_estimates(estimates.cpu().detach().numpy(), track)
""",
    "generate_called_by_training_script": HEAD + GEN.replace("{mark}", "") + """model = TinyLM()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
tokens = model.generate([1, 2, 3], max_tokens=5)
loss = model(torch.tensor(tokens)).logsumexp(-1).mean()
loss.backward()
optimizer.step()
""",
}


def _expected(source: str) -> set:
    found = set()
    for number, line in enumerate(source.splitlines(), start=1):
        if "# <-" in line:
            found.add(("TML502" if "TML502" in line else "TML501", number))
    return found


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    root: Path = tmp_path_factory.mktemp("module_calls")
    for name, code in CASES.items():
        (root / f"{name}.py").write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--select", "TML501,TML502", "--output-format",
         "json", "--no-cache", "--isolated", str(root)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    result: dict = {}
    for item in json.loads(proc.stdout):
        result.setdefault(Path(item["filename"]).stem, set()).add((item["code"], item["location"]["row"]))
    return result


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_model_calls_known_by_value(found, name):
    assert found.get(name, set()) == _expected(CASES[name])


def test_every_case_says_what_it_expects():
    reported = [name for name, code in CASES.items() if _expected(code)]
    assert len(reported) == 21 and len(CASES) - len(reported) == 22
