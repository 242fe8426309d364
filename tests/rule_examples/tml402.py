"""Examples of TML402 (SingleOpCheckpoint): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


_MODEL = (
    "import torch.nn as nn\n"
    "{imports}\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.conv1 = nn.Conv2d(3, 8, 3)\n"
    "        self.block = nn.Sequential(nn.Conv2d(8, 8, 3), nn.ReLU())\n"
    "\n"
    "    def forward(self, x):\n"
    "        return {call}\n"
)

VALID = (
    _MODEL.format(
        imports="from torch.utils.checkpoint import checkpoint",
        call="checkpoint(self.block, x, use_reentrant=False)",
    ),
    _MODEL.format(
        imports="import torch.nn.functional as F\n"
        "from torch.utils.checkpoint import checkpoint",
        call="checkpoint(lambda t: F.relu(self.conv1(t)), x, use_reentrant=False)",
    ),
    _MODEL.format(
        imports="def checkpoint(function, *args):\n    return function(*args)",
        call="checkpoint(self.conv1, x)",
    ),
    # Module wrappers around more than one layer, or not around a torch layer.
    "import torch.nn as nn\n"
    "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper\n"
    "block = checkpoint_wrapper(nn.Sequential(nn.Conv2d(3, 3, 1), nn.ReLU(), nn.Conv2d(3, 3, 1)))\n",
    "def checkpoint_wrapper(module):\n    return module\nimport torch.nn as nn\n"
    "conv = checkpoint_wrapper(nn.Conv2d(3, 3, 1))\n",
    # timm's checkpoint_seq over single layers is not reported (each element is a segment).
    "import torch.nn as nn\nfrom timm.models import checkpoint_seq\n"
    "y = checkpoint_seq(nn.Sequential(nn.Conv2d(3, 3, 1), nn.Conv2d(3, 3, 1)), x)\n",
    # A max pool also keeps int64 indices for backward, which checkpointing does drop.
    "import torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n"
    "y = checkpoint(nn.MaxPool2d(2), x, use_reentrant=False)\n",
    # A local class that happens to be called Conv2d.
    "from torch.utils.checkpoint import checkpoint\n"
    "class Conv2d:\n    pass\n"
    "y = checkpoint(Conv2d(), x, use_reentrant=False)\n",
)

INVALID = (
    Invalid(
        _MODEL.format(
            imports="import torch.utils.checkpoint as cp",
            call="cp.checkpoint(self.conv1, x, use_reentrant=False)",
        ),
        fixed=_MODEL.format(
            imports="import torch.utils.checkpoint as cp", call="self.conv1(x)"
        ),
        line=10,
        column=16,
    ),
    Invalid(
        _MODEL.format(
            imports="from torch.utils.checkpoint import checkpoint as ckpt",
            call="ckpt(self.conv1, x, use_reentrant=True)",
        ),
        fixed=_MODEL.format(
            imports="from torch.utils.checkpoint import checkpoint as ckpt",
            call="self.conv1(x)",
        ),
    ),
    Invalid(
        "import torch\nimport torch.nn.functional as F\n"
        "y = torch.utils.checkpoint.checkpoint(lambda t: F.gelu(t, approximate='tanh'), x)\n",
        fixed="import torch\nimport torch.nn.functional as F\n"
        "y = F.gelu(x, approximate='tanh')\n",
    ),
    Invalid(
        "from torch import nn\nfrom torch.utils.checkpoint import checkpoint\n"
        "y = checkpoint(nn.Linear(4, 4), x, use_reentrant=False)\n",
        fixed="from torch import nn\nfrom torch.utils.checkpoint import checkpoint\n"
        "y = nn.Linear(4, 4)(x)\n",
    ),
    Invalid(
        "import torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.convs = nn.ModuleList([nn.Conv2d(8, 8, 3) for _ in range(4)])\n"
        "\n"
        "    def forward(self, x):\n"
        "        for conv in self.convs:\n"
        "            x = checkpoint(conv, x, use_reentrant=False)\n"
        "        return x\n",
        fixed="import torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.convs = nn.ModuleList([nn.Conv2d(8, 8, 3) for _ in range(4)])\n"
        "\n"
        "    def forward(self, x):\n"
        "        for conv in self.convs:\n"
        "            x = conv(x)\n"
        "        return x\n",
    ),
    Invalid(
        "import torch.nn.functional as F\nfrom torch.utils.checkpoint import checkpoint\n"
        "y = checkpoint(F.relu, x, context_fn=make_contexts, use_reentrant=False)\n",
    ),
    Invalid(
        "import torch.nn.functional as F\nfrom torch.utils.checkpoint import checkpoint\n"
        "def f(x):\n"
        "    return checkpoint(\n        F.relu,\n        x,\n"
        "        use_reentrant=False,\n    )\n",
        fixed="import torch.nn.functional as F\nfrom torch.utils.checkpoint import checkpoint\n"
        "def f(x):\n"
        "    return F.relu(\n        x,\n    )\n",
    ),
    Invalid(
        _MODEL.format(
            imports="import deepspeed", call="deepspeed.checkpointing.checkpoint(self.conv1, x)"
        ),
        fixed=_MODEL.format(imports="import deepspeed", call="self.conv1(x)"),
    ),
    Invalid(
        _MODEL.format(
            imports="from timm.models._manipulate import checkpoint",
            call="checkpoint(self.conv1, x, use_reentrant=False)",
        ),
        fixed=_MODEL.format(
            imports="from timm.models._manipulate import checkpoint", call="self.conv1(x)"
        ),
    ),
    Invalid(
        "import torch.nn as nn\n"
        "from torch.distributed.algorithms._checkpoint import checkpoint_wrapper as cw\n"
        "stem = cw.checkpoint_wrapper(nn.Conv2d(3, 8, 3))\n",
        fixed="import torch.nn as nn\n"
        "from torch.distributed.algorithms._checkpoint import checkpoint_wrapper as cw\n"
        "stem = nn.Conv2d(3, 8, 3)\n",
    ),
)
