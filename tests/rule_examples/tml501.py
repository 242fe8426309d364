"""Examples of TML501 (EvalWithoutNoGrad): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    "import torch\n\n@torch.no_grad()\ndef evaluate(model, loader):\n"
    "    return [model(x).argmax(1) for x in loader]\n",
    "import torch\n\ndef evaluate(model, loader):\n    model.eval()\n"
    "    with torch.inference_mode():\n        for x in loader:\n            model(x)\n",
    # training code: eval() for frozen batch-norm, then backward
    "import torch\n\ndef fit(model, loader, opt):\n    model.eval()\n    for x, y in loader:\n"
    "        loss = torch.nn.functional.mse_loss(model(x), y)\n        loss.backward()\n"
    "        opt.step()\n",
    # put back in training mode before the call
    "import torch\n\nmodel.eval()\nexport(model)\nmodel.train()\nout = model(x)\n",
    # Lightning runs validation_step (and what it calls) without autograd
    "import torch\n\nclass Lit:\n    def validation_step(self, batch, idx):\n"
    "        return self.predict_batch(batch)\n\n    def predict_batch(self, x):\n"
    "        return self.model(x)\n",
    # the caller turns autograd off
    "import torch\n\ndef _predict_batch(model, x):\n    return model(x)\n\n"
    "@torch.no_grad()\ndef run(model, loader):\n"
    "    return [_predict_batch(model, x) for x in loader]\n",
    # pytest tests are not evaluation loops
    "import torch\n\ndef test_shape(model):\n"
    "    assert model(torch.ones(1, 3)).shape == (1, 2)\n",
    # Issue 12: a project decorator defined in the file that applies torch.inference_mode
    # (ultralytics `smart_inference_mode`), on the function and on what it calls.
    "import torch\n\ndef smart_inference_mode():\n    def decorate(fn):\n"
    "        return torch.inference_mode()(fn)\n    return decorate\n\n"
    "class Validator:\n    @smart_inference_mode()\n    def __call__(self, model, loader):\n"
    "        model.eval()\n        for batch in loader:\n            preds = model(batch)\n\n"
    "    def inference(self, im):\n        return self.model(im)\n\n"
    "    @smart_inference_mode()\n    def stream_inference(self, source):\n"
    "        for im in source:\n            yield self.inference(im)\n",
    # ... imported: its name says so.
    "import torch\nfrom ultralytics.utils.torch_utils import smart_inference_mode\n\n"
    "@smart_inference_mode()\ndef validate(model, loader):\n    model.eval()\n"
    "    for x in loader:\n        print(model(x))\n",
    "import torch\nfrom .utils import no_grad_if_eval\n\n@no_grad_if_eval\ndef evaluate(net, loader):\n"
    "    return [net(x) for x in loader]\n",
    # A project context manager (monai `eval_mode` enters torch.no_grad()).
    "import torch\nfrom monai.networks.utils import eval_mode\n\nclass LRFinder:\n"
    "    def _validate(self, val_iter):\n        with eval_mode(self.model):\n"
    "            for inputs, labels in val_iter:\n                outputs = self.model(inputs)\n",
    # A context kept in a variable, chosen by a conditional expression.
    "import torch\nfrom contextlib import nullcontext\n\ndef evaluate(model, loader, train):\n"
    "    ctx = torch.no_grad() if not train else nullcontext()\n    with ctx:\n"
    "        for x in loader:\n            print(model(x))\n",
    "import contextlib\nimport torch\n\ndef evaluate(model, loader, amp):\n"
    "    grad_ctx = torch.inference_mode if amp else contextlib.nullcontext\n"
    "    with grad_ctx():\n        for x in loader:\n            print(model(x))\n",
    # `self.model` is a wrapper object (ultralytics YOLO), not a module known in the file.
    "import torch\nfrom ultralytics import YOLO\n\nclass Inference:\n    def __init__(self):\n"
    "        self.model = None\n\n    def load(self, path):\n        self.model = YOLO(path)\n\n"
    "    def predict(self, frames):\n        for f in frames:\n"
    "            yield self.model(f, conf=0.25)\n",
    # Issue 12, straight-line look-alikes: put back in training mode after the call, autograd
    # off around it, the output dropped (a warm-up), not named like a module, a test,
    # a backward in the function.
    "import torch\n\ndef sample(model, z):\n    model.eval()\n    out = model(z)\n"
    "    model.train()\n    return out\n",
    "import torch\n\ndef sample(model, z):\n    model.eval()\n    with torch.no_grad():\n"
    "        out = model(z)\n    return out\n",
    "import torch\n\ndef warm_up(model, x):\n    model.eval()\n    model(x)\n",
    "import torch\n\ndef run(evaluator, batch):\n    evaluator.eval()\n"
    "    return evaluator(batch)\n",
    "import torch\n\ndef test_forward(model, x):\n    model.eval()\n    out = model(x)\n"
    "    assert out.shape == x.shape\n",
    "import torch\n\ndef saliency(model, x):\n    model.eval()\n    out = model(x)\n"
    "    out.max().backward()\n    return x.grad\n",
    # Issue 12 false positives: a runner's method that takes the network as an argument and
    # calls it once (monai `Inferer._run_inference`): its callers decide about autograd.
    "import torch\n\nclass Inferer:\n    def _run_inference(self, network, patch):\n"
    "        if self.preprocessing:\n            patch = self.preprocessing(patch)\n"
    "        return network(patch)\n",
    # A class whose base comes from another file, which never assigns `self.model` nor calls
    # eval/backward: the base runs it (transformers' pipelines, `_forward` under `no_grad`).
    "import torch\nfrom .base import Pipeline\n\nclass TableQA(Pipeline):\n"
    "    def batch_inference(self, **inputs):\n        return self.model(**inputs)\n\n"
    "    def sequential_inference(self, rows):\n        logits = []\n"
    "        for row in rows:\n            logits.append(self.model(row).logits)\n"
    "        return torch.cat(logits)\n",
    # the samples are returned: the caller may train on them
    'import torch\n'
    'from torchvision.utils import save_image\n'
    '\n'
    '\n'
    'def sample(generator, z):\n'
    '    imgs = generator(z)\n'
    '    save_image(imgs.data, "sample.png")\n'
    '    return imgs\n',
    # the output is stored on the object
    'import torch\n'
    '\n'
    '\n'
    'class Logger:\n'
    '    def log_batch(self, model, x):\n'
    '        out = model(x)\n'
    '        print(out.mean().item())\n'
    '        self.last = out\n',
    # under `@torch.inference_mode()`
    'import torch\n'
    'from torchvision.utils import save_image\n'
    '\n'
    '\n'
    '@torch.inference_mode()\n'
    'def sample(generator, z):\n'
    '    save_image(generator(z).data, "sample.png")\n',
    # called only under `torch.no_grad()` by its caller (and its module is a parameter the file never fills with a module)
    'import torch\n'
    '\n'
    '\n'
    'def sample_image(generator, z):\n'
    '    print(generator(z).tolist())\n'
    '\n'
    '\n'
    'def train(generator, loader, opt):\n'
    '    for z in loader:\n'
    '        loss = generator(z).mean()\n'
    '        loss.backward()\n'
    '        opt.step()\n'
    '    with torch.no_grad():\n'
    '        sample_image(generator, z)\n',
    # a caller in the file backpropagates through a forward hook's capture of this forward
    'import torch\n'
    '\n'
    'features = []\n'
    '\n'
    '\n'
    'def grab(module, inputs, output):\n'
    '    features.append(output)\n'
    '\n'
    '\n'
    'def score(model, x):\n'
    '    out = model(x)\n'
    '    print(out.argmax(1).tolist())\n'
    '\n'
    '\n'
    'def explain(model, x):\n'
    '    model.layer4.register_forward_hook(grab)\n'
    '    score(model, x)\n'
    '    features[-1].sum().backward()\n',
    # passed to a helper the file does not define, appended to the caller's list; `print(out.shape)` alone says nothing
    'import torch\n'
    '\n'
    '\n'
    'def run(model, x, outputs):\n'
    '    out = model(x)\n'
    '    print(out.shape)\n'
    '    postprocess(out)\n'
    '    outputs.append(out)\n',
    # a function of the file named like a model (`profile_model`), its rows to pandas
    'import pandas as pd\n'
    'import torch\n'
    '\n'
    '\n'
    'def profile_model(name):\n'
    '    return {"model": name}\n'
    '\n'
    '\n'
    'def main(names):\n'
    '    rows = []\n'
    '    for m in names:\n'
    '        rows.append(profile_model(m))\n'
    '    print(pd.DataFrame(rows))\n',
    # a wrapper object that runs its own inference mode (ultralytics `YOLO`), whatever its name
    'import numpy as np\n'
    'import torch\n'
    'from ultralytics import YOLO\n'
    '\n'
    '\n'
    'class Bench:\n'
    '    def __init__(self, path):\n'
    '        self.model = YOLO(path)\n'
    '\n'
    '    def image_inference(self, image):\n'
    '        results = self.model(image)\n'
    '        print(results[0].plot())\n'
    '\n'
    '    def profile(self, engine, data):\n'
    '        model = YOLO(engine)\n'
    '        times = []\n'
    '        for _ in range(10):\n'
    '            results = model(data)\n'
    '            times.append(results[0].speed["inference"])\n'
    '        return np.mean(times)\n',
    # a torch layer without parameters on a tensor made from numpy: nothing is recorded
    'import numpy as np\n'
    'import torch\n'
    '\n'
    '\n'
    'def features(waveform, max_length):\n'
    '    fbank = torch.from_numpy(np.abs(waveform))\n'
    '    pad_module = torch.nn.ZeroPad2d((0, 0, 0, max_length - fbank.shape[0]))\n'
    '    fbank = pad_module(fbank)\n'
    '    return fbank.numpy()\n',
)

INVALID = (
    Invalid(
        "import torch\n\ndef validate(model, loader):\n    model.eval()\n"
        "    for x in loader:\n        print(model(x))\n",
        fixed="import torch\n\n@torch.no_grad()\ndef validate(model, loader):\n"
        "    model.eval()\n    for x in loader:\n        print(model(x))\n",
        line=6,
        column=15,
    ),
    Invalid(
        "import torch\n\nnet.eval()\ntotal = 0\n# every batch\nfor x, y in loader:\n"
        "    total += (net(x).argmax(1) == y).sum().item()\n",
        fixed="import torch\n\nnet.eval()\ntotal = 0\n# every batch\nwith torch.no_grad():\n"
        "    for x, y in loader:\n        total += (net(x).argmax(1) == y).sum().item()\n",
        line=7,
    ),
    Invalid(
        "import torch\n\nclass Runner:\n    def run(self, batches):\n"
        "        self.model.eval()\n        outs = []\n        for b in batches:\n"
        "            outs.append(self.model(b).softmax(-1).detach().cpu().numpy())\n"
        "        return outs\n",
        fixed="import torch\n\nclass Runner:\n    def run(self, batches):\n"
        "        self.model.eval()\n"
        "        outs = []\n        with torch.no_grad():\n            for b in batches:\n"
        "                outs.append(self.model(b).softmax(-1).detach().cpu().numpy())\n"
        "        return outs\n",
    ),
    # Issue 12 look-alikes that must still be reported: `self.model` built as a module of
    # this file, or by a factory; a context held in a variable that never turns autograd off;
    # a decorator whose name says nothing.
    Invalid(
        "from torch import nn\n\nclass Net(nn.Module):\n    pass\n\nclass Predictor:\n"
        "    def __init__(self):\n        self.model = Net()\n\n"
        "    def predict(self, x):\n        return self.model(x)\n",
        line=11,
    ),
    Invalid(
        "from torch import nn\nfrom models import build_model\n\nclass Predictor:\n    def __init__(self, cfg):\n"
        "        self.model = build_model(cfg)\n\n"
        "    def predict(self, x):\n        return self.model(x)\n",
    ),
    Invalid(
        "from torch import nn\nfrom contextlib import nullcontext\n\ndef evaluate(model, loader, amp):\n"
        "    ctx = nullcontext()\n    with ctx:\n        for x in loader:\n"
        "            print(model(x))\n",
    ),
    Invalid(
        "from torch import nn\nfrom .utils import timed\n\n@timed()\ndef evaluate(model, loader):\n"
        "    return [model(x) for x in loader]\n",
    ),
    # no fix without `import torch`
    Invalid(
        "from torch import nn\n\ndef predict(net, x):\n    return net(x)\n",
        fixed=None,
    ),
    # Issue 12: a straight-line `model.eval(); out = model(x)` / `return model(x)`.
    Invalid(
        "import torch\n\ndef sample(net, z):\n    net.eval()\n    return net(z)\n",
        fixed="import torch\n\ndef sample(net, z):\n    net.eval()\n"
        "    with torch.no_grad():\n        return net(z)\n",
        line=5,
        column=12,
    ),
    Invalid(
        "import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    pass\n\n"
        "def features(x):\n    clf = Net()\n    clf.eval()\n    y = clf(x).flatten(1)\n"
        "    return y\n",
        fixed="import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    pass\n\n"
        "def features(x):\n    clf = Net()\n    clf.eval()\n    with torch.no_grad():\n"
        "        y = clf(x).flatten(1)\n    return y\n",
    ),
    Invalid(
        "import torch\n\nmodel = torch.load('model.pt')\nmodel.eval()\n"
        "out = model(torch.randn(1, 3, 224, 224))\n",
        fixed="import torch\n\nmodel = torch.load('model.pt')\nmodel.eval()\n"
        "with torch.no_grad():\n    out = model(torch.randn(1, 3, 224, 224))\n",
    ),
    # ... but the same helper over a loop is evaluation code of its own,
    Invalid(
        "import torch\n\nclass Runner:\n    def evaluate(self, network, loader):\n"
        "        return [network(x) for x in loader]\n",
        fixed="import torch\n\nclass Runner:\n    @torch.no_grad()\n"
        "    def evaluate(self, network, loader):\n        return [network(x) for x in loader]\n",
    ),
    # a foreign base whose subclass evaluates the model itself is reported,
    Invalid(
        "import torch\nfrom .base import BaseTrainer\n\nclass Trainer(BaseTrainer):\n"
        "    def evaluate(self, loader):\n        self.model.eval()\n"
        "        return [self.model(x) for x in loader]\n",
        fixed="import torch\nfrom .base import BaseTrainer\n\nclass Trainer(BaseTrainer):\n"
        "    @torch.no_grad()\n    def evaluate(self, loader):\n        self.model.eval()\n"
        "        return [self.model(x) for x in loader]\n",
    ),
    # and so is a class of this file's own base.
    Invalid(
        "import torch\n\nclass Base:\n    pass\n\nclass Runner(Base):\n"
        "    def predict(self, loader):\n        return [self.model(x) for x in loader]\n",
        fixed="import torch\n\nclass Base:\n    pass\n\nclass Runner(Base):\n"
        "    @torch.no_grad()\n    def predict(self, loader):\n"
        "        return [self.model(x) for x in loader]\n",
    ),
    # a GAN sampling function: the global `generator = Generator().to(...)` (a module class of the file), its output only saved through `.data`; no `.eval()`, no evaluation name
    Invalid(
        'import torch\n'
        'import torch.nn as nn\n'
        'from torchvision.utils import save_image\n'
        '\n'
        '\n'
        'class Generator(nn.Module):\n'
        '    def __init__(self, latent):\n'
        '        super().__init__()\n'
        '        self.net = nn.Sequential(nn.Linear(latent, 784), nn.Tanh())\n'
        '\n'
        '    def forward(self, z):\n'
        '        return self.net(z).view(-1, 1, 28, 28)\n'
        '\n'
        '\n'
        'generator = Generator(100).to("cpu")\n'
        '\n'
        '\n'
        'def sample_image(n_row, batches_done):\n'
        '    z = torch.randn(n_row ** 2, 100)\n'
        '    gen_imgs = generator(z)\n'
        '    save_image(gen_imgs.data, "images/%d.png" % batches_done, nrow=n_row, normalize=True)\n',
        fixed=(
        'import torch\n'
        'import torch.nn as nn\n'
        'from torchvision.utils import save_image\n'
        '\n'
        '\n'
        'class Generator(nn.Module):\n'
        '    def __init__(self, latent):\n'
        '        super().__init__()\n'
        '        self.net = nn.Sequential(nn.Linear(latent, 784), nn.Tanh())\n'
        '\n'
        '    def forward(self, z):\n'
        '        return self.net(z).view(-1, 1, 28, 28)\n'
        '\n'
        '\n'
        'generator = Generator(100).to("cpu")\n'
        '\n'
        '\n'
        '@torch.no_grad()\n'
        'def sample_image(n_row, batches_done):\n'
        '    z = torch.randn(n_row ** 2, 100)\n'
        '    gen_imgs = generator(z)\n'
        '    save_image(gen_imgs.data, "images/%d.png" % batches_done, nrow=n_row, normalize=True)\n'
        ),
        line=20,
    ),
    # `greedy_decode(model, ...)`: encoder and decoder outputs reach only `.data` indices; what it returns carries no graph
    Invalid(
        'import torch\n'
        '\n'
        '\n'
        'def greedy_decode(model, src, src_mask, max_len, start_symbol):\n'
        '    memory = model.encode(src, src_mask)\n'
        '    ys = torch.zeros(1, 1).fill_(start_symbol).type_as(src.data)\n'
        '    for i in range(max_len - 1):\n'
        '        out = model.decode(memory, src_mask, ys, subsequent_mask(ys.size(1)).type_as(src.data))\n'
        '        prob = model.generator(out[:, -1])\n'
        '        _, next_word = torch.max(prob, dim=1)\n'
        '        next_word = next_word.data[0]\n'
        '        ys = torch.cat([ys, torch.zeros(1, 1).type_as(src.data).fill_(next_word)], dim=1)\n'
        '    return ys\n',
        fixed=(
        'import torch\n'
        '\n'
        '\n'
        '@torch.no_grad()\n'
        'def greedy_decode(model, src, src_mask, max_len, start_symbol):\n'
        '    memory = model.encode(src, src_mask)\n'
        '    ys = torch.zeros(1, 1).fill_(start_symbol).type_as(src.data)\n'
        '    for i in range(max_len - 1):\n'
        '        out = model.decode(memory, src_mask, ys, subsequent_mask(ys.size(1)).type_as(src.data))\n'
        '        prob = model.generator(out[:, -1])\n'
        '        _, next_word = torch.max(prob, dim=1)\n'
        '        next_word = next_word.data[0]\n'
        '        ys = torch.cat([ys, torch.zeros(1, 1).type_as(src.data).fill_(next_word)], dim=1)\n'
        '    return ys\n'
        ),
        line=5,
    ),
    # scores appended to a local list that becomes numpy, the rest logged
    Invalid(
        'import numpy as np\n'
        'import torch\n'
        '\n'
        '\n'
        'def collect_scores(net, loader, writer):\n'
        '    scores = []\n'
        '    for i, (x, y) in enumerate(loader):\n'
        '        logits = net(x)\n'
        '        scores.append(logits.softmax(1)[:, 1])\n'
        '        writer.add_scalar("max", logits.max(), i)\n'
        '    return np.concatenate([s.detach().cpu().numpy() for s in scores])\n',
        fixed=(
        'import numpy as np\n'
        'import torch\n'
        '\n'
        '\n'
        '@torch.no_grad()\n'
        'def collect_scores(net, loader, writer):\n'
        '    scores = []\n'
        '    for i, (x, y) in enumerate(loader):\n'
        '        logits = net(x)\n'
        '        scores.append(logits.softmax(1)[:, 1])\n'
        '        writer.add_scalar("max", logits.max(), i)\n'
        '    return np.concatenate([s.detach().cpu().numpy() for s in scores])\n'
        ),
        line=8,
    ),
    # the generator comes in as a parameter that the training loop of this file fills with a module; the caller backpropagates, but nothing of this function's output reaches it
    Invalid(
        'import torch\n'
        'import torch.nn as nn\n'
        '\n'
        '\n'
        'class Generator(nn.Module):\n'
        '    def __init__(self):\n'
        '        super().__init__()\n'
        '        self.fc = nn.Linear(8, 8)\n'
        '\n'
        '    def forward(self, z):\n'
        '        return self.fc(z)\n'
        '\n'
        '\n'
        'def sample_image(gen, z):\n'
        '    print(gen(z).tolist())\n'
        '\n'
        '\n'
        'generator = Generator()\n'
        'optimizer = torch.optim.Adam(generator.parameters())\n'
        'for z in torch.randn(10, 4, 8):\n'
        '    loss = generator(z).mean()\n'
        '    loss.backward()\n'
        '    optimizer.step()\n'
        '    sample_image(generator, z)\n',
        fixed=(
        'import torch\n'
        'import torch.nn as nn\n'
        '\n'
        '\n'
        'class Generator(nn.Module):\n'
        '    def __init__(self):\n'
        '        super().__init__()\n'
        '        self.fc = nn.Linear(8, 8)\n'
        '\n'
        '    def forward(self, z):\n'
        '        return self.fc(z)\n'
        '\n'
        '\n'
        '@torch.no_grad()\n'
        'def sample_image(gen, z):\n'
        '    print(gen(z).tolist())\n'
        '\n'
        '\n'
        'generator = Generator()\n'
        'optimizer = torch.optim.Adam(generator.parameters())\n'
        'for z in torch.randn(10, 4, 8):\n'
        '    loss = generator(z).mean()\n'
        '    loss.backward()\n'
        '    optimizer.step()\n'
        '    sample_image(generator, z)\n'
        ),
        line=15,
    ),
    # a method of the model that runs its forward (`forward_masks`, `forward_features`) after `.eval()`
    Invalid(
        'import torch\n'
        '\n'
        '\n'
        'def explain(network, loader):\n'
        '    network.eval()\n'
        '    out = []\n'
        '    for x in loader:\n'
        '        masks = network.forward_masks(x)\n'
        '        out.append(masks.cpu().detach().numpy())\n'
        '    return out\n',
        fixed=(
        'import torch\n'
        '\n'
        '\n'
        'def explain(network, loader):\n'
        '    network.eval()\n'
        '    out = []\n'
        '    with torch.no_grad():\n'
        '        for x in loader:\n'
        '            masks = network.forward_masks(x)\n'
        '            out.append(masks.cpu().detach().numpy())\n'
        '    return out\n'
        ),
        line=8,
    ),
    # sample written by index (test_tml501_recall.py)
    Invalid(
        'import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\ndef sample(model, start, steps):\n    out = torch.zeros(start.size(0), steps, dtype=torch.long)\n    tokens = start\n    for i in range(steps):\n        probs = model(tokens).softmax(-1)\n        out[:, i] = torch.multinomial(probs[:, -1], 1).squeeze(-1)\n    return out\n',
        fixed='import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n@torch.no_grad()\ndef sample(model, start, steps):\n    out = torch.zeros(start.size(0), steps, dtype=torch.long)\n    tokens = start\n    for i in range(steps):\n        probs = model(tokens).softmax(-1)\n        out[:, i] = torch.multinomial(probs[:, -1], 1).squeeze(-1)\n    return out\n',
        line=10,
    ),
    # ctgan apply activate (test_tml501_recall.py)
    Invalid(
        'import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Generator(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 8)\n\n    def forward(self, z):\n        return self.fc(z)\n\n\nclass Synthesizer:\n    def __init__(self):\n        self._generator = Generator()\n\n    def _apply_activate(self, data):\n        parts = [torch.tanh(data[:, :4]), F.gumbel_softmax(data[:, 4:], tau=0.2)]\n        return torch.cat(parts, dim=1)\n\n    def sample(self, n):\n        z = torch.randn(n, 8)\n        fake = self._generator(z)\n        fakeact = self._apply_activate(fake)\n        return fakeact.detach().cpu().numpy()\n',
        fixed='import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Generator(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 8)\n\n    def forward(self, z):\n        return self.fc(z)\n\n\nclass Synthesizer:\n    def __init__(self):\n        self._generator = Generator()\n\n    def _apply_activate(self, data):\n        parts = [torch.tanh(data[:, :4]), F.gumbel_softmax(data[:, 4:], tau=0.2)]\n        return torch.cat(parts, dim=1)\n\n    @torch.no_grad()\n    def sample(self, n):\n        z = torch.randn(n, 8)\n        fake = self._generator(z)\n        fakeact = self._apply_activate(fake)\n        return fakeact.detach().cpu().numpy()\n',
        line=25,
    ),
    # foreign base sampler (test_tml501_recall.py)
    Invalid(
        'import torch\nfrom .base import BaseVAE\n\n\nclass Sampler(BaseVAE):\n    def sample(self, n):\n        z = torch.randn(n, 16)\n        return self.model.decoder(z)[:, :3].detach()\n',
        fixed='import torch\nfrom .base import BaseVAE\n\n\nclass Sampler(BaseVAE):\n    @torch.no_grad()\n    def sample(self, n):\n        z = torch.randn(n, 16)\n        return self.model.decoder(z)[:, :3].detach()\n',
        line=8,
    ),
)
