"""Examples of TML603 (CheckpointFunctionWithoutRng): VALID code gives no finding, INVALID code gives one."""

from torchmemlint.rules.base import Invalid

# latent-diffusion's / guided-diffusion's CheckpointFunction, shortened
CHECKPOINT_FUNCTION = "import torch\n\n\nclass CheckpointFunction(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, run_function, length, *args):\n        ctx.run_function = run_function\n        ctx.input_tensors = list(args[:length])\n        with torch.no_grad():\n            return ctx.run_function(*ctx.input_tensors)\n\n    @staticmethod\n    def backward(ctx, *output_grads):\n        with torch.enable_grad():\n            outputs = ctx.run_function(*ctx.input_tensors)\n        return (None, None) + torch.autograd.grad(outputs, ctx.input_tensors, output_grads)\n"

VALID = (
    # the RNG state is saved in forward and restored around the recomputation
    CHECKPOINT_FUNCTION.replace(
        "        ctx.run_function = run_function\n",
        "        ctx.run_function = run_function\n        ctx.rng = torch.get_rng_state()\n",
    ).replace(
        "        with torch.enable_grad():\n",
        "        with torch.random.fork_rng():\n            torch.set_rng_state(ctx.rng)\n"
        "            with torch.enable_grad():\n",
    ).replace("            outputs = ctx.run_function", "                outputs = ctx.run_function"),
    # a custom Function that does not rerun what it was given
    "import torch\n\n\nclass Clamp(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x, fn):\n        ctx.save_for_backward(x)\n        return fn(x)\n\n"
    "    @staticmethod\n    def backward(ctx, grad):\n        (x,) = ctx.saved_tensors\n"
    "        return grad * (x > 0), None\n",
    # diffusers' ring attention: backward calls a separate backward op, it reruns nothing
    "import torch\n\n\nclass Ring(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, q, k, v, forward_op, backward_op):\n        ctx.forward_op = forward_op\n"
    "        ctx.backward_op = backward_op\n        return forward_op(ctx, q, k, v)\n\n"
    "    @staticmethod\n    def backward(ctx, grad):\n        return ctx.backward_op(ctx, grad) + (None, None)\n",
    # the same shape of class, not an autograd.Function
    CHECKPOINT_FUNCTION.replace("(torch.autograd.Function)", "(object)"),
)

INVALID = (
    Invalid(CHECKPOINT_FUNCTION, line=4, column=7),
    # imported as Function
    Invalid(
        CHECKPOINT_FUNCTION.replace("import torch\n", "import torch\nfrom torch.autograd import Function\n")
        .replace("(torch.autograd.Function)", "(Function)")
    ),
)
