"""Examples of TML704 (ZeroGradKeepsGradients): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid

LOOP = (
    "import torch\n\nfor x, y in loader:\n    optimizer.zero_grad({arg})\n"
    "    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
)

VALID = (
    LOOP.format(arg=""),
    LOOP.format(arg="set_to_none=True"),
    LOOP.format(arg="True"),
    # decided elsewhere
    LOOP.format(arg="set_to_none=args.keep_grads"),
    "import torch\n\ndef step(optimizer, **kw):\n    optimizer.zero_grad(**kw)\n",
    # another method that takes a False flag
    "import torch\n\nfor x in loader:\n    optimizer.step(False)\n    model.train(False)\n",
)

INVALID = (
    Invalid(
        LOOP.format(arg="set_to_none=False"),
        fixed=LOOP.format(arg=""),
        line=4,
        column=5,
    ),
    Invalid(LOOP.format(arg="False"), fixed=LOOP.format(arg=""), line=4),
    # the model's zero_grad, in a Lightning-style hook
    Invalid(
        "import torch\nimport lightning as L\n\nclass Model(L.LightningModule):\n"
        "    def on_before_zero_grad(self, optimizer):\n        self.zero_grad(set_to_none=False)\n",
        fixed="import torch\nimport lightning as L\n\nclass Model(L.LightningModule):\n"
        "    def on_before_zero_grad(self, optimizer):\n        self.zero_grad()\n",
        line=6,
    ),
    # a kwargs dict built beside it: reported, no fix
    Invalid(
        "import torch\n\nzero_kwargs = {\"set_to_none\": False}\nfor x, y in loader:\n"
        "    optimizer.zero_grad(**zero_kwargs)\n    model(x).mean().backward()\n    optimizer.step()\n",
        line=5,
    ),
)
