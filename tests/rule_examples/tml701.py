"""Examples of TML701 (DdpWithoutGradientAsBucketView): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid

HEAD = (
    "import os\n\nimport torch\nimport torch.distributed as dist\n"
    "from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
    "local_rank = int(os.environ[\"LOCAL_RANK\"])\n"
)

VALID = (
    HEAD + "model = DDP(model, device_ids=[local_rank], gradient_as_bucket_view=True)\n",
    # decided elsewhere: a variable, a **kwargs the file does not show
    HEAD + "model = DDP(model, device_ids=[local_rank], gradient_as_bucket_view=args.bucket_view)\n",
    HEAD + "def wrap(model, **ddp_kwargs):\n    return DDP(model, **ddp_kwargs)\n",
    # a kwargs dict that sets it
    HEAD + "ddp_kwargs = dict(device_ids=[local_rank], gradient_as_bucket_view=True)\n"
    "model = DDP(model, **ddp_kwargs)\n",
    # a kwargs dict changed after it was built: unknown
    HEAD + "ddp_kwargs = {\"device_ids\": [local_rank]}\nddp_kwargs[\"gradient_as_bucket_view\"] = True\n"
    "model = DDP(model, **ddp_kwargs)\n",
    # a local class that happens to be called DDP; DataParallel (no buckets)
    "import torch\n\nclass DDP:\n    def __init__(self, model):\n        self.model = model\n\nmodel = DDP(model)\n",
    "import torch\n\nmodel = torch.nn.DataParallel(model)\n",
    # FSDP has no such buckets
    "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n\nmodel = FSDP(model)\n",
    # accelerate's kwargs handler that sets it
    "import torch\nfrom accelerate import Accelerator, DistributedDataParallelKwargs\n\n"
    "handler = DistributedDataParallelKwargs(gradient_as_bucket_view=True)\n"
    "accelerator = Accelerator(kwargs_handlers=[handler])\n",
    # Lightning's strategy given the flag; a string strategy (nothing to read)
    "import torch\nfrom lightning.pytorch.strategies import DDPStrategy\n\n"
    "trainer = L.Trainer(strategy=DDPStrategy(gradient_as_bucket_view=True), devices=8)\n",
    "import torch\nimport lightning as L\n\ntrainer = L.Trainer(strategy=\"ddp\", devices=8)\n",
)

INVALID = (
    Invalid(
        HEAD + "model = DDP(model, device_ids=[local_rank])\n",
        fixed=HEAD + "model = DDP(model, device_ids=[local_rank], gradient_as_bucket_view=True)\n",
        line=8,
        column=9,
    ),
    # the full path, explicitly False
    Invalid(
        "import torch\n\nmodel = torch.nn.parallel.DistributedDataParallel(\n    model, device_ids=[rank],\n"
        "    gradient_as_bucket_view=False,\n)\n",
        fixed="import torch\n\nmodel = torch.nn.parallel.DistributedDataParallel(\n    model, device_ids=[rank],\n"
        "    gradient_as_bucket_view=True,\n)\n",
        line=3,
    ),
    # nn alias, inside a setup function
    Invalid(
        "import torch.nn as nn\n\n\ndef setup(model, rank):\n"
        "    return nn.parallel.DistributedDataParallel(model.to(rank), device_ids=[rank])\n",
        fixed="import torch.nn as nn\n\n\ndef setup(model, rank):\n"
        "    return nn.parallel.DistributedDataParallel(model.to(rank), device_ids=[rank], "
        "gradient_as_bucket_view=True)\n",
        line=5,
    ),
    # a kwargs dict built beside the call
    Invalid(
        HEAD + "ddp_kwargs = dict(device_ids=[local_rank], find_unused_parameters=False)\n"
        "model = DDP(model, **ddp_kwargs)\n",
        fixed=HEAD + "ddp_kwargs = dict(device_ids=[local_rank], find_unused_parameters=False)\n"
        "model = DDP(model, **ddp_kwargs, gradient_as_bucket_view=True)\n",
        line=9,
    ),
    # accelerate builds the DDP from these
    Invalid(
        "import torch\nfrom accelerate import Accelerator\nfrom accelerate.utils import DistributedDataParallelKwargs\n\n"
        "handler = DistributedDataParallelKwargs(find_unused_parameters=True)\n"
        "accelerator = Accelerator(kwargs_handlers=[handler])\n",
        fixed="import torch\nfrom accelerate import Accelerator\nfrom accelerate.utils import DistributedDataParallelKwargs\n\n"
        "handler = DistributedDataParallelKwargs(find_unused_parameters=True, gradient_as_bucket_view=True)\n"
        "accelerator = Accelerator(kwargs_handlers=[handler])\n",
        line=5,
    ),
    # Lightning passes DDPStrategy's keywords on to DDP
    Invalid(
        "import torch\nimport lightning as L\nfrom lightning.pytorch.strategies import DDPStrategy\n\n"
        "trainer = L.Trainer(strategy=DDPStrategy(find_unused_parameters=False), devices=8)\n",
        fixed="import torch\nimport lightning as L\nfrom lightning.pytorch.strategies import DDPStrategy\n\n"
        "trainer = L.Trainer(strategy=DDPStrategy(find_unused_parameters=False, gradient_as_bucket_view=True), "
        "devices=8)\n",
        line=5,
    ),
)
