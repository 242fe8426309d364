"""Examples of TML703 (EmptyCacheInTrainingLoop, off by default): VALID code gives no finding, INVALID code gives one."""

from torchmemlint.rules.base import Invalid

VALID = (
    # once, between phases
    "import torch\n\nfor x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n"
    "    optimizer.step()\ntorch.cuda.empty_cache()\nevaluate(model)\n",
    # in an evaluation loop (no backward, no step)
    "import torch\n\nwith torch.no_grad():\n    for x in loader:\n        preds.append(model(x).cpu())\n"
    "        torch.cuda.empty_cache()\n",
    # a loop over models to benchmark, not a training loop
    "import torch\n\nfor name in names:\n    measure(name)\n    torch.cuda.empty_cache()\n",
    # a local function called empty_cache
    "import torch\n\ndef empty_cache():\n    cache.clear()\n\nfor x, y in loader:\n"
    "    loss = model(x).mean()\n    loss.backward()\n    empty_cache()\n",
    # a Lightning hook that runs once per epoch
    "import torch\nimport lightning as L\n\nclass Model(L.LightningModule):\n"
    "    def on_train_epoch_end(self):\n        torch.cuda.empty_cache()\n",
)

INVALID = (
    Invalid(
        "import torch\n\nfor x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n"
        "    optimizer.step()\n    optimizer.zero_grad()\n    torch.cuda.empty_cache()\n",
        line=8,
        column=5,
    ),
    # nested epoch/batch loops in a function, accelerate's backward, an alias
    Invalid(
        "from torch import cuda\n\n\ndef train(accelerator, model, loader, opt, epochs):\n"
        "    for epoch in range(epochs):\n        for batch in loader:\n"
        "            loss = model(**batch).loss\n            accelerator.backward(loss)\n"
        "            opt.step()\n            opt.zero_grad()\n            if step % 10 == 0:\n"
        "                cuda.empty_cache()\n",
        line=12,
    ),
    # a Lightning-style per-step hook
    Invalid(
        "import torch\nimport lightning as L\n\nclass Model(L.LightningModule):\n"
        "    def training_step(self, batch, batch_idx):\n        loss = self.net(batch).mean()\n"
        "        torch.cuda.empty_cache()\n        return loss\n",
        line=7,
    ),
)
