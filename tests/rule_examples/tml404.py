"""Examples of TML404 (CheckpointRandomWithoutRngState): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


_MLP = (
    "import torch.nn as nn\n"
    "{imports}\n"
    "class Mlp(nn.Module):\n"
    "    def __init__(self, d):\n"
    "        super().__init__()\n"
    "        self.layers = nn.Sequential(nn.Linear(d, d), nn.GELU(), {drop})\n"
    "\n"
    "    def forward(self, x):\n"
    "        return {call}\n"
)

VALID = (
    _MLP.format(
        imports="from torch.utils.checkpoint import checkpoint",
        drop="nn.Dropout(0.1)",
        call="checkpoint(self.layers, x, use_reentrant=False)",
    ),
    _MLP.format(
        imports="from torch.utils.checkpoint import checkpoint",
        drop="nn.Linear(d, d)",
        call="checkpoint(self.layers, x, use_reentrant=False, preserve_rng_state=False)",
    ),
    _MLP.format(
        imports="from torch.utils.checkpoint import checkpoint",
        drop="nn.Dropout(p=0.0)",
        call="checkpoint(self.layers, x, use_reentrant=False, preserve_rng_state=False)",
    ),
    _MLP.format(
        imports="import deepspeed",
        drop="nn.Dropout(0.1)",
        call="deepspeed.checkpointing.checkpoint(self.layers, x, preserve_rng_state=False)",
    ),
    _MLP.format(
        imports="from torch.utils.checkpoint import checkpoint",
        drop="nn.Dropout(0.1)",
        call="checkpoint(self.layers, x, use_reentrant=False, preserve_rng_state=keep_rng)",
    ),
    # timm's checkpoint_seq takes no such keyword (a TypeError at run time, not this rule).
    _MLP.format(
        imports="from timm.models import checkpoint_seq",
        drop="nn.Dropout(0.1)",
        call="checkpoint_seq(self.layers, x, preserve_rng_state=False)",
    ),
    _MLP.format(
        imports="def checkpoint(function, *args, **kwargs):\n    return function(*args)",
        drop="nn.Dropout(0.1)",
        call="checkpoint(self.layers, x, preserve_rng_state=False)",
    ),
)

INVALID = (
    Invalid(
        _MLP.format(
            imports="import torch",
            drop="nn.Dropout(0.1), nn.Linear(d, d)",
            call="torch.utils.checkpoint.checkpoint_sequential(\n"
            "            self.layers, 4, x, use_reentrant=False, preserve_rng_state=False)",
        ),
        fixed=_MLP.format(
            imports="import torch",
            drop="nn.Dropout(0.1), nn.Linear(d, d)",
            call="torch.utils.checkpoint.checkpoint_sequential(\n"
            "            self.layers, 4, x, use_reentrant=False)",
        ),
        line=10,
    ),
    Invalid(
        _MLP.format(
            imports="from torch.utils.checkpoint import checkpoint",
            drop="nn.Dropout(0.1)",
            call="checkpoint(self.layers, x, use_reentrant=False, preserve_rng_state=False)",
        ),
        fixed=_MLP.format(
            imports="from torch.utils.checkpoint import checkpoint",
            drop="nn.Dropout(0.1)",
            call="checkpoint(self.layers, x, use_reentrant=False)",
        ),
        line=9,
        column=64,
    ),
    Invalid(
        _MLP.format(
            imports="import torch.utils.checkpoint as cp",
            drop="nn.Dropout(0.1)",
            call="cp.checkpoint(self.layers, x, preserve_rng_state=False, use_reentrant=False)",
        ),
        fixed=_MLP.format(
            imports="import torch.utils.checkpoint as cp",
            drop="nn.Dropout(0.1)",
            call="cp.checkpoint(self.layers, x, use_reentrant=False)",
        ),
    ),
    Invalid(
        "import torch\nimport torch.nn.functional as F\n"
        "from torch.utils.checkpoint import checkpoint as ckpt\n"
        "def drop_path(x):\n"
        "    keep = x.new_empty(x.shape[0], 1).bernoulli_(0.9)\n"
        "    return x * keep\n"
        "y = ckpt(\n    drop_path,\n    x,\n    use_reentrant=False,\n"
        "    preserve_rng_state=False,\n)\n",
        fixed="import torch\nimport torch.nn.functional as F\n"
        "from torch.utils.checkpoint import checkpoint as ckpt\n"
        "def drop_path(x):\n"
        "    keep = x.new_empty(x.shape[0], 1).bernoulli_(0.9)\n"
        "    return x * keep\n"
        "y = ckpt(\n    drop_path,\n    x,\n    use_reentrant=False,\n)\n",
    ),
    Invalid(
        "import torch.nn.functional as F\nfrom torch.utils.checkpoint import checkpoint\n"
        "y = checkpoint(lambda t: F.dropout(F.relu(t), 0.1), x, use_reentrant=False, "
        "preserve_rng_state=False)\n",
        fixed="import torch.nn.functional as F\nfrom torch.utils.checkpoint import checkpoint\n"
        "y = checkpoint(lambda t: F.dropout(F.relu(t), 0.1), x, use_reentrant=False)\n",
    ),
    Invalid(
        _MLP.format(
            imports="from timm.models import checkpoint",
            drop="nn.Dropout(0.1)",
            call="checkpoint(self.layers, x, preserve_rng_state=False)",
        ),
        fixed=_MLP.format(
            imports="from timm.models import checkpoint",
            drop="nn.Dropout(0.1)",
            call="checkpoint(self.layers, x)",
        ),
    ),
    Invalid(
        "import torch.nn as nn\n"
        "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper\n"
        "mlp = checkpoint_wrapper(\n"
        "    nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1)), preserve_rng_state=False\n)\n",
        fixed="import torch.nn as nn\n"
        "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper\n"
        "mlp = checkpoint_wrapper(\n"
        "    nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1))\n)\n",
    ),
)
