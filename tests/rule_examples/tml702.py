"""Examples of TML702 (LoadWithoutMapLocation): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid

TORCHRUN = "import os\n\nimport torch\n\nlocal_rank = int(os.environ[\"LOCAL_RANK\"])\n"
DIST = "import torch\nimport torch.distributed as dist\n\ndist.init_process_group(\"nccl\")\n"

VALID = (
    TORCHRUN + "state = torch.load(\"checkpoint.pt\", map_location=\"cpu\")\n",
    TORCHRUN + "state = torch.load(\"checkpoint.pt\", map_location=f\"cuda:{local_rank}\")\n",
    # map_location by position
    DIST + "state = torch.load(path, \"cpu\")\n",
    # a single-device script: the saving device is this one
    "import torch\n\nmodel.load_state_dict(torch.load(\"checkpoint.pt\"))\n",
    # DataParallel is one process
    "import torch\n\nmodel = torch.nn.DataParallel(model)\nstate = torch.load(\"checkpoint.pt\")\n",
    # a **kwargs the file does not show; a dict that sets it
    DIST + "def restore(path, **load_kwargs):\n    return torch.load(path, **load_kwargs)\n",
    DIST + "kw = {\"map_location\": \"cpu\", \"weights_only\": True}\nstate = torch.load(path, **kw)\n",
    # another `load` (numpy, a local function)
    DIST + "import numpy as np\n\nstate = np.load(\"stats.npy\")\n",
    DIST + "def load(path):\n    return path\n\nstate = load(\"checkpoint.pt\")\n",
)

INVALID = (
    Invalid(
        TORCHRUN + "state = torch.load(\"checkpoint.pt\")\n",
        fixed=TORCHRUN + "state = torch.load(\"checkpoint.pt\", map_location=\"cpu\")\n",
        line=6,
        column=9,
    ),
    # DDP imported; inside a resume function, with weights_only
    Invalid(
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n\n"
        "def resume(model, path):\n    model.load_state_dict(torch.load(path, weights_only=True))\n"
        "    return DDP(model, gradient_as_bucket_view=True)\n",
        fixed="import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n\n"
        "def resume(model, path):\n    model.load_state_dict(torch.load(path, weights_only=True, map_location=\"cpu\"))\n"
        "    return DDP(model, gradient_as_bucket_view=True)\n",
        line=6,
    ),
    # accelerate script; `from torch import load`
    Invalid(
        "from accelerate import Accelerator\nfrom torch import load\n\naccelerator = Accelerator()\n"
        "model.load_state_dict(load(args.resume))\n",
        fixed="from accelerate import Accelerator\nfrom torch import load\n\naccelerator = Accelerator()\n"
        "model.load_state_dict(load(args.resume, map_location=\"cpu\"))\n",
        line=5,
    ),
    # FSDP script, a kwargs dict without map_location: no fix through the spread
    Invalid(
        "import torch\nfrom torch.distributed.fsdp import fully_shard\n\n"
        "kw = dict(weights_only=True)\nstate = torch.load(path, **kw)\n",
        line=5,
    ),
)
