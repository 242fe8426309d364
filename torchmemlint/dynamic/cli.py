"""``torchmemlint profile`` and ``torchmemlint --dynamic``: run the model, verify the findings.

Both import and run the user's code, so they run only when asked.  torch is
imported inside the commands, never when this module is imported: the
static linter and ``torchmemlint --help`` work without it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import warnings
from types import ModuleType
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import click

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on older Pythons only
    import tomli as tomllib

from torchmemlint.config import ConfigError, Settings, resolve_settings, split_selectors
from torchmemlint.findings import Finding

EXIT_ERROR = 2
DTYPES = ("float32", "bfloat16", "float16")
NEEDS_TORCH = "%s needs torch: pip install torch (or './torchmemlint[dynamic]' from the clone's directory)"
NEEDS_MATPLOTLIB = "--plot needs matplotlib: pip install matplotlib (or './torchmemlint[plot]' from the clone's directory)"


def fail(message: str) -> click.exceptions.Exit:
    click.echo("torchmemlint: error: %s" % message, err=True)
    return click.exceptions.Exit(EXIT_ERROR)


def parse_input_shape(text: str) -> List[Any]:
    """``8,3,224,224`` -> [8, 3, 224, 224]; a last item may name a dtype: ``8,128,int64``."""
    parts = [part.strip() for part in text.split(",")]
    dims: List[Any] = []
    for position, part in enumerate(parts):
        if part.isdigit():
            dims.append(int(part))
        elif position == len(parts) - 1 and part.isidentifier() and dims:
            dims.append(part)
        else:
            raise fail("--input-shape must be comma-separated sizes like 8,3,224,224, got %r" % text)
    return dims


def parse_init_args(text: Optional[str]) -> Any:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as error:
        raise fail("--init-args is not valid JSON: %s" % error)
    if not isinstance(value, (dict, list)):
        raise fail("--init-args must be a JSON object (keyword arguments) or array (positional ones)")
    return value


def import_dynamic(command: str) -> Tuple[ModuleType, ModuleType]:
    """The verify and report modules; a missing torch is a one-line error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. torch's "Failed to initialize NumPy" at import
        try:
            import torch  # noqa: F401
        except ImportError:
            raise fail(NEEDS_TORCH % command)
        from torchmemlint.dynamic import report, verify
    return verify, report


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise fail(NEEDS_MATPLOTLIB)


def _target_file(target: str) -> Optional[str]:
    """The file of a ``path/file.py:Name`` target (checked here, before torch
    is imported), None for ``package.module:Name``."""
    location, colon, name = target.rpartition(":")
    if not colon or not location or not name:
        raise fail("target must look like path/file.py:Name or package.module:Name, got %r" % target)
    if not (location.endswith(".py") or "/" in location or os.sep in location):
        return None
    if not os.path.isfile(location):
        raise fail("target not found: no file %s" % location)
    return location


@click.command()
@click.argument("target")
@click.option(
    "--input-shape", "input_shapes", multiple=True, metavar="SHAPE",
    help="Input batch shape, e.g. 8,3,224,224 (repeat for several inputs; "
    "may end with a dtype: 8,128,int64). Or --inputs.",
)
# -- inputs and models as people write them (docs/dynamic.md, "Inputs and models") --
@click.option("--inputs", "inputs_spec", metavar="FILE.py:FUNCTION",
              help="A function given batch_size (and device, dtype) that returns the model's inputs: "
              "a tensor, a tuple of args, a dict of kwargs or (args, kwargs). Instead of --input-shape.")
@click.option("--batch-size", type=int, metavar="N", help="The batch size --inputs is called with.")
@click.option("--model-config", metavar="NAME|FILE.json",
              help="Build a Hugging Face model from this config with from_config (no download): a model "
              "type (gpt2, bert, llama), a config.json, or a name in the local cache; --init-args "
              "(a JSON object) overrides its attributes.")
@click.option("--snapshot", "snapshot_path", type=click.Path(dir_okay=False), metavar="FILE.pickle",
              help="Write the step's memory snapshot in the format of PyTorch's memory_viz "
              "(torch.cuda.memory._snapshot()).")
@click.option("--init-args", metavar="JSON", help="Constructor arguments: a JSON object or array.")
@click.option("--dtype", type=click.Choice(DTYPES), default="float32", show_default=True,
              help="dtype of the model and of floating inputs.")
@click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto", show_default=True,
              help="cuda measures the allocator; cpu estimates with fake tensors (nothing allocated).")
@click.option("--estimate-for", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True,
              help="With --device cpu: the device whose kernels the estimate runs (cuda: its attention "
              "and dropout kernels are emulated; cpu: the CPU's own).")
@click.option("--real-tensors", is_flag=True,
              help="With --device cpu: run the step on real CPU tensors (allocates the memory, computes; "
              "CPU kernels), to check the estimate.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--select", multiple=True, metavar="CODES", help="Findings to verify (as the linter's --select)."
)
@click.option("--ignore", multiple=True, metavar="CODES", help="Findings not to verify.")
@click.option("--config", "config_path", type=click.Path(), help="Read settings from this file.")
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@click.option("--no-verify", is_flag=True, help="Only measure; do not verify findings.")
@click.option("--checkpoint-advice", is_flag=True,
              help="Measure checkpoint placements even without a deep-stack finding.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), metavar="FILE.png",
              help="Plot memory over the step (needs matplotlib).")
@click.option("--budget", metavar="SIZE",
              help="Will it fit? Check the step against 8GiB, 8GB, 8000MiB or cuda:0 (free memory).")
@click.option("--optimizer", type=click.Choice(["adam", "adamw", "sgd", "none"]),
              help="Optimizer state counted by --budget [default: adam]; sgd: with momentum.")
@click.option("--reserve", metavar="SIZE",
              help="With --budget: memory to set aside for what the estimate cannot see "
              "(the CUDA context, other processes).")
@click.option("--max-batch", is_flag=True,
              help="With --budget: find the largest batch that fits, by measuring.")
@click.option("--timeout", type=float, metavar="SECONDS",
              help="Give up (exit 2) when importing, building and measuring take longer than this.")
@click.option("--parallel", type=click.Choice(["ddp", "fsdp"]),
              help="Estimate one rank of DDP or FSDP2 (fully_shard) training, on a fake process group.")
@click.option("--world-size", type=int, metavar="N", help="With --parallel: the number of ranks.")
@click.option("--fsdp-wrap", metavar="CLASSES",
              help="With --parallel fsdp: fully_shard every module of these classes (comma-separated) "
              "instead of every module held in an nn.ModuleList; the root always.")
@click.option("--param-dtype", type=click.Choice(DTYPES),
              help="With --parallel fsdp: MixedPrecisionPolicy(param_dtype=...).")
@click.option("--reduce-dtype", type=click.Choice(DTYPES),
              help="With --parallel fsdp: MixedPrecisionPolicy(reduce_dtype=...).")
@click.option("--no-reshard-after-forward", is_flag=True,
              help="With --parallel fsdp: fully_shard(reshard_after_forward=False).")
@click.option("--gradient-as-bucket-view", is_flag=True,
              help="With --parallel ddp: DistributedDataParallel(gradient_as_bucket_view=True).")
def profile(
    target: str,
    input_shapes: Tuple[str, ...],
    init_args: Optional[str],
    dtype: str,
    device: str,
    estimate_for: str,
    real_tensors: bool,
    output_format: str,
    select: Tuple[str, ...],
    ignore: Tuple[str, ...],
    config_path: Optional[str],
    isolated: bool,
    no_verify: bool,
    checkpoint_advice: bool,
    plot_path: Optional[str],
    budget: Optional[str],
    optimizer: Optional[str],
    reserve: Optional[str],
    max_batch: bool,
    timeout: Optional[float],
    inputs_spec: Optional[str] = None,
    batch_size: Optional[int] = None,
    model_config: Optional[str] = None,
    snapshot_path: Optional[str] = None,
    **parallel: Any,
) -> None:
    """Run one training step of TARGET and verify the linter's findings in it.

    TARGET is path/to/file.py:Name or package.module:Name, a module class, a
    factory or a module instance.  This imports and runs that code.  Each
    finding's fix is applied in memory, measured and checked for numerics:
    confirmed, refuted, unsafe or not verified.
    """
    target_file = _target_file(target)
    shapes = [parse_input_shape(text) for text in input_shapes]
    _check_inputs_options(shapes, inputs_spec, batch_size)
    arguments = _model_arguments(parse_init_args(init_args), model_config)
    budget_options = _budget_request(budget, optimizer, reserve, max_batch)
    if real_tensors and device == "cuda":
        raise fail("--real-tensors measures on the CPU; it cannot be used with --device cuda")
    if config_path is not None and not os.path.isfile(config_path):
        raise fail("--config: no such file: %s" % config_path)
    overrides = {
        "select": split_selectors(select) if select else None,
        "ignore": split_selectors(ignore) if ignore else None,
    }
    try:
        start = os.path.dirname(os.path.abspath(target_file)) if target_file else os.getcwd()
        settings = resolve_settings(config_path, isolated, start, overrides)
    except ConfigError as error:
        raise fail(str(error))
    verify, report = import_dynamic("torchmemlint profile")
    if plot_path is not None:
        _require_matplotlib()
    from torchmemlint.dynamic.errors import USER_EXITS, DynamicError, ProfileTimeout, user_exit

    if timeout is not None and timeout <= 0:
        raise fail("--timeout must be a positive number of seconds, got %g" % timeout)
    parallel_options = _parallel_options(parallel, device, real_tensors)
    if parallel_options is not None:
        _profile_parallel(target, shapes, arguments, dtype, estimate_for, parallel_options, budget_options,
                          timeout, output_format, plot_path, report)
        return
    _show_progress(target, inputs_spec)
    try:
        with time_limit(timeout, target):
            budget_bytes = budget_options.resolve() if budget_options else None
            inputs = _load_inputs(inputs_spec, batch_size, shapes)
            from torchmemlint.dynamic.lines import StepObserver

            observer = StepObserver()
            result = verify.run_profile(
                target, inputs, arguments, dtype, device, settings,
                verify=not no_verify, checkpoint_advice=checkpoint_advice,
                estimate_for=estimate_for, real_tensors=real_tensors, observer=observer,
            )
            report.add_step_sections(result, observer, settings)
            budget_fields = _add_budget(result, budget_options, budget_bytes, arguments, settings,
                                        verified=not no_verify)
    except DynamicError as error:
        raise fail(str(error))
    except ProfileTimeout as error:
        raise fail("%s: %s" % (target, error))
    except USER_EXITS as error:  # raised where no narrower handler caught it
        raise fail(str(user_exit(error, "profiling %s" % target)))
    finally:
        _hide_progress()
    if snapshot_path is not None:
        _write_snapshot(result, snapshot_path)
    if plot_path is not None:
        _save_plot(result, plot_path)
    if output_format == "json":
        payload = report.format_json([result])
        if budget_fields:  # budget_bytes, fits, fixes_that_fit, max_batch at the top level
            payload = json.dumps({**json.loads(payload), **budget_fields}, indent=2) + "\n"
        click.echo(payload, nl=False)
    else:
        click.echo(report.format_text(result), nl=False)


# -- --inputs, --model-config, --snapshot, progress -------------------------------------------

def _check_inputs_options(shapes: List[Any], inputs_spec: Optional[str], batch_size: Optional[int]) -> None:
    if inputs_spec is None:
        if not shapes:
            raise fail("profile needs --input-shape SHAPE, or --inputs FILE.py:FUNCTION with --batch-size N")
        if batch_size is not None:
            raise fail("--batch-size is for --inputs; with --input-shape the batch is the first dimension")
        return
    if shapes:
        raise fail("--inputs and --input-shape cannot be used together: the function makes the inputs")
    if batch_size is None:
        raise fail("--inputs needs --batch-size N: the batch size the function is called with")
    if batch_size <= 0:
        raise fail("--batch-size must be positive, got %d" % batch_size)
    location, colon, name = inputs_spec.rpartition(":")
    if not colon or not location or not name:
        raise fail("--inputs must look like path/file.py:FUNCTION or module:FUNCTION, got %r" % inputs_spec)
    if (location.endswith(".py") or "/" in location or os.sep in location) and not os.path.isfile(location):
        raise fail("--inputs: no file %s" % location)


def _model_arguments(init_args: Any, model_config: Optional[str]) -> Any:
    """--init-args, or with --model-config the configuration (--init-args: its overrides)."""
    if model_config is None:
        return init_args
    if init_args is not None and not isinstance(init_args, dict):
        raise fail("with --model-config, --init-args must be a JSON object of configuration attributes")
    from torchmemlint.dynamic.model_config import ModelConfig

    return ModelConfig(model_config, dict(init_args or {}))


def _load_inputs(inputs_spec: Optional[str], batch_size: Optional[int], shapes: List[Any]) -> Any:
    if inputs_spec is None:
        return shapes
    from torchmemlint.dynamic.inputs import load_inputs_function

    return load_inputs_function(inputs_spec, batch_size or 0)


def _show_progress(target: str, inputs_spec: Optional[str]) -> None:
    """On a terminal: say that the user's code is imported and run, then show progress."""
    if not _stderr_is_terminal():
        return
    code = target + (" and %s" % inputs_spec if inputs_spec else "")
    click.echo("torchmemlint: profile imports and runs %s (your code)" % code, err=True)
    try:
        from torchmemlint.dynamic import progress

        progress.enable(sys.stderr)
    except ImportError:  # tqdm missing: no progress display
        pass


def _hide_progress() -> None:
    from torchmemlint.dynamic import progress

    progress.disable()


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _write_snapshot(result: Any, path: str) -> None:
    from torchmemlint.dynamic.snapshot import write_snapshot

    try:
        write_snapshot(result, path)
    except OSError as error:
        raise fail("--snapshot: cannot write %s: %s" % (path, error.strerror or error))


@contextlib.contextmanager
def time_limit(seconds: Optional[float], target: str = "") -> Iterator[None]:
    """Raise ``ProfileTimeout`` in the main thread after ``seconds`` (SIGALRM; Unix), in the
    model's own code; where no model code is running, end the process with the same one-line
    error and exit 2 (see below)."""
    if seconds is None:
        yield
        return
    from torchmemlint.dynamic.errors import ProfileTimeout

    if not hasattr(signal, "setitimer"):
        raise fail("--timeout needs SIGALRM, which this platform does not have")

    # The handler runs at the next bytecode of the main thread, which is mostly torch's Python
    # code called back from C++ (its dispatcher, fake tensors, torchmemlint's trackers): an
    # exception raised there can end in C++'s std::terminate ("terminate called after throwing
    # an instance of 'python_error'", the process aborted) instead of reaching us. So the
    # timeout is raised in the model's own code: in the frame the alarm lands in when that is
    # the model's, else from a trace function set on the nearest model frame below it, at the
    # next line that frame runs. Where no model code is on the stack (the alarm lands while
    # torch, sympy or the dynamic mode's own modules are being imported, which on a loaded
    # machine can take longer than a short --timeout), or where that next line never comes (a
    # second alarm 2 s later), nothing can be raised safely: the process then prints the same
    # one-line error and exits 2 at once (nothing of the run is kept: it is being given up).
    library = _library_directories()
    pending = [False]

    def timeout(*_: Any) -> None:
        raise ProfileTimeout(seconds)

    def give_up() -> None:
        message = "%s: %s" % (target, ProfileTimeout(seconds)) if target else str(ProfileTimeout(seconds))
        try:
            progress = sys.modules.get("torchmemlint.dynamic.progress")  # no import in a handler
            if progress is not None:
                progress.disable()
            sys.stdout.flush()
            sys.stderr.write("torchmemlint: error: %s\n" % message)
            sys.stderr.flush()
        finally:
            os._exit(EXIT_ERROR)

    def on_alarm(signum: int, frame: Any) -> None:
        if pending[0] or frame is None:
            give_up()
        user = frame
        while user is not None and user.f_code.co_filename.startswith(library):
            user = user.f_back
        if user is None:
            give_up()
        if user is frame:
            raise ProfileTimeout(seconds)
        pending[0] = True
        user.f_trace_lines = True
        user.f_trace = timeout
        sys.settrace(lambda *_: None)  # line events reach a frame's f_trace only while tracing
        signal.setitimer(signal.ITIMER_REAL, 2.0)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if pending[0]:
            sys.settrace(None)


def _library_directories() -> Tuple[str, ...]:
    """Where torch's, the standard library's and torchmemlint's Python code lives (for
    ``time_limit``: torchmemlint's tensor trackers run inside torch's dispatcher)."""
    import sysconfig

    import torch

    directories = [
        os.path.dirname(torch.__file__) + os.sep,
        sysconfig.get_paths()["stdlib"] + os.sep,
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,  # torchmemlint
        "<",  # code without a file: torch's generated functions, frozen modules
    ]
    return tuple(directories)


def _budget_request(
    budget: Optional[str], optimizer: Optional[str], reserve: Optional[str], max_batch: bool
) -> Any:
    """The checked budget options (before torch is imported), or None without --budget."""
    from torchmemlint.dynamic.budget import budget_request
    from torchmemlint.dynamic.errors import DynamicError

    try:
        return budget_request(budget, optimizer, reserve, max_batch)
    except DynamicError as error:
        raise fail(str(error))


def _add_budget(
    result: Any, options: Any, budget: Any, init_args: Any, settings: Settings, verified: bool
) -> Dict:
    """Check the profiled step against the budget: a report section; the JSON fields."""
    if options is None:
        return {}
    from torchmemlint.dynamic.budget import check_profile, json_fields

    check = check_profile(result, options, budget, init_args, settings, verified)
    result.add_section("budget", "Will it fit? (--budget)", check.text_lines(), check.to_dict())
    return json_fields(check)


def _parallel_options(options: Dict[str, Any], device: str, real_tensors: bool) -> Any:
    """``--parallel`` and its options, checked (None without ``--parallel``)."""
    strategy, world_size = options.get("parallel"), options.get("world_size")
    if strategy is None:
        given = [name for name, value in options.items() if value not in (None, False)]
        if given:
            raise fail("--%s needs --parallel" % given[0].replace("_", "-"))
        return None
    if world_size is None:
        raise fail("--parallel needs --world-size N")
    if device == "cuda" or real_tensors:
        raise fail("--parallel estimates one rank on fake tensors: use --device cpu (or auto)")
    from torchmemlint.dynamic.errors import DynamicError
    from torchmemlint.dynamic.parallel import ParallelOptions, check_options

    wrap = options.get("fsdp_wrap")
    chosen = ParallelOptions(
        strategy, world_size,
        wrap=tuple(name.strip() for name in wrap.split(",") if name.strip()) if wrap else None,
        reshard_after_forward=not options.get("no_reshard_after_forward"),
        param_dtype=options.get("param_dtype"), reduce_dtype=options.get("reduce_dtype"),
        gradient_as_bucket_view=bool(options.get("gradient_as_bucket_view")),
    )
    try:
        check_options(chosen)
    except DynamicError as error:
        raise fail(str(error))
    return chosen


def _save_plot(result: Any, plot_path: str) -> None:
    from torchmemlint.dynamic.plot import save as save_plot

    try:
        save_plot(result, plot_path)
    except OSError as error:
        raise fail("--plot: cannot write %s: %s" % (plot_path, error.strerror or error))


def _profile_parallel(
    target: str, shapes: Any, arguments: Any, dtype: str, estimate_for: str, options: Any,
    budget_options: Any, timeout: Optional[float], output_format: str, plot_path: Optional[str], report: Any,
) -> None:
    """``profile --parallel``: one rank's estimate (docs/distributed.md), printed as ``profile`` prints."""
    from torchmemlint.dynamic.errors import USER_EXITS, DynamicError, ProfileTimeout, user_exit
    from torchmemlint.dynamic.parallel import run_parallel_profile

    try:
        with time_limit(timeout, target):
            budget_bytes = budget_options.resolve() if budget_options else None
            result, budget_fields = run_parallel_profile(
                target, shapes, arguments, dtype, estimate_for, options, budget_options, budget_bytes)
    except DynamicError as error:
        raise fail(str(error))
    except ProfileTimeout as error:
        raise fail("%s: %s" % (target, error))
    except USER_EXITS as error:
        raise fail(str(user_exit(error, "profiling %s" % target)))
    if plot_path is not None:
        _save_plot(result, plot_path)
    if output_format == "json":
        payload = json.loads(report.format_json([result]))
        click.echo(json.dumps({**payload, **budget_fields}, indent=2) + "\n", nl=False)
    else:
        click.echo(report.format_text(result), nl=False)


# -- torchmemlint --dynamic PATH... -----------------------------------------------------------

def profile_entries(settings: Settings) -> List[Dict[str, Any]]:
    """The ``[tool.torchmemlint.profile]`` table (or array of tables), checked,
    targets made relative to the configuration file's directory."""
    if settings.config_path is None:
        raise fail(
            "--dynamic needs a [tool.torchmemlint.profile] table (target, input-shape) in pyproject.toml"
        )
    with open(settings.config_path, "rb") as handle:
        data = tomllib.load(handle)
    tool = data.get("tool", {})
    if os.path.basename(settings.config_path) == "pyproject.toml":
        table = tool.get("torchmemlint", {})
    else:  # a torchmemlint.toml may have top-level keys, as load_settings reads it
        table = tool.get("torchmemlint", data)
    raw = table.get("profile")
    if raw is None:
        raise fail("--dynamic needs a [tool.torchmemlint.profile] table (target, input-shape) in %s"
                   % settings.config_path)
    entries = raw if isinstance(raw, list) else [raw]
    checked = []
    for entry in entries:
        checked.append(_profile_entry(entry, settings))
    return checked


def _profile_entry(entry: Any, settings: Settings) -> Dict[str, Any]:
    where = "%s: [tool.torchmemlint.profile]" % settings.config_path
    if not isinstance(entry, dict):
        raise fail("%s must be a table" % where)
    unknown = set(entry) - {"target", "init-args", "input-shape", "dtype", "device", "estimate-for",
                            "inputs", "batch-size", "model-config"}
    if unknown:
        raise fail("%s: unknown key %r" % (where, sorted(unknown)[0]))
    target = entry.get("target")
    if not isinstance(target, str) or ":" not in target:
        raise fail("%s: 'target' must be a string like path/file.py:Name" % where)
    location, _, name = target.rpartition(":")
    if (location.endswith(".py") or "/" in location) and not os.path.isabs(location):
        target = "%s:%s" % (os.path.join(settings.root, location), name)
    inputs = _entry_inputs(entry, settings, where)
    shapes = entry.get("input-shape")
    if isinstance(shapes, list) and shapes and all(isinstance(d, (int, str)) for d in shapes):
        shapes = [shapes]
    if inputs is None and not (
            isinstance(shapes, list) and shapes and all(isinstance(s, list) and s for s in shapes)):
        raise fail("%s: 'input-shape' must be a list of sizes, or a list of such lists "
                   "(or give 'inputs' and 'batch-size')" % where)
    init_args = entry.get("init-args")
    if init_args is not None and not isinstance(init_args, (dict, list)):
        raise fail("%s: 'init-args' must be a table or an array" % where)
    model_config = entry.get("model-config")
    if model_config is not None:
        if not isinstance(model_config, str):
            raise fail("%s: 'model-config' must be a string" % where)
        if model_config.endswith(".json") and not os.path.isabs(model_config):
            model_config = os.path.join(settings.root, model_config)
        init_args = _model_arguments(init_args, model_config)
    dtype = entry.get("dtype", "float32")
    if dtype not in DTYPES:
        raise fail("%s: 'dtype' must be one of %s" % (where, ", ".join(DTYPES)))
    device = entry.get("device", "auto")
    if device not in ("auto", "cuda", "cpu"):
        raise fail("%s: 'device' must be auto, cuda or cpu" % where)
    estimate_for = entry.get("estimate-for", "cuda")
    if estimate_for not in ("cuda", "cpu"):
        raise fail("%s: 'estimate-for' must be cuda or cpu" % where)
    return {
        "target": target, "input_shapes": shapes, "init_args": init_args, "dtype": dtype, "device": device,
        "estimate_for": estimate_for, "inputs": inputs,
    }


def _entry_inputs(entry: Dict[str, Any], settings: Settings, where: str) -> Optional[Tuple[str, int]]:
    """A profile table's ``inputs`` (made relative to the configuration file) and ``batch-size``."""
    spec, batch = entry.get("inputs"), entry.get("batch-size")
    if spec is None:
        if batch is not None:
            raise fail("%s: 'batch-size' is for 'inputs'" % where)
        return None
    if entry.get("input-shape") is not None:
        raise fail("%s: give 'inputs' or 'input-shape', not both" % where)
    if not isinstance(spec, str) or ":" not in spec:
        raise fail("%s: 'inputs' must be a string like path/file.py:FUNCTION" % where)
    if not isinstance(batch, int) or isinstance(batch, bool) or batch <= 0:
        raise fail("%s: 'inputs' needs 'batch-size', a positive integer" % where)
    location, _, name = spec.rpartition(":")
    if (location.endswith(".py") or "/" in location) and not os.path.isabs(location):
        spec = "%s:%s" % (os.path.join(settings.root, location), name)
    return spec, batch


def dynamic_report(
    settings: Settings, findings: Sequence[Finding], output_format: str, lint_report: str
) -> str:
    """``torchmemlint --dynamic``: the lint report followed by a profile of each
    configured target that carries findings (JSON: one object with both)."""
    if output_format not in ("text", "json"):
        raise fail("--dynamic supports --output-format text or json")
    entries = profile_entries(settings)
    verify, report = import_dynamic("torchmemlint --dynamic")
    from torchmemlint.dynamic import source
    from torchmemlint.dynamic.errors import DynamicError

    results = []
    skipped = []
    failed: List[Tuple[str, str]] = []  # (target, error): reported, the others still profiled
    for entry in entries:
        try:
            target = source.read_target_source(entry["target"])
            in_file = [
                f for f in findings
                if f.code.startswith("TML") and os.path.abspath(f.filename) == os.path.abspath(target.path)
            ]
            if not source.findings_in_target(target, in_file):
                skipped.append(entry["target"])
                continue
            click.echo("torchmemlint: --dynamic imports and runs %s" % entry["target"], err=True)
            inputs = entry["input_shapes"]
            if entry["inputs"] is not None:
                inputs = _load_inputs(entry["inputs"][0], entry["inputs"][1], [])
            from torchmemlint.dynamic.lines import StepObserver

            observer = StepObserver()
            profiled = verify.run_profile(
                entry["target"], inputs, entry["init_args"], entry["dtype"],
                entry["device"], settings, estimate_for=entry["estimate_for"], observer=observer,
            )
            report.add_step_sections(profiled, observer, settings)
            results.append(profiled)
        except DynamicError as error:
            click.echo("torchmemlint: error: %s: %s" % (entry["target"], error), err=True)
            failed.append((entry["target"], str(error)))
    if output_format == "json":
        data: Dict[str, Any] = {
            "findings": json.loads(lint_report),
            "profiles": [r.to_dict() for r in results],
            "not_profiled": skipped,
        }
        if failed:
            data["errors"] = [{"target": target, "error": error} for target, error in failed]
        return DynamicReport(json.dumps(data, indent=2) + "\n", failed)
    parts = [lint_report]
    parts += ["\n" + report.format_text(r) for r in results]
    parts += ["\nNot profiled (no findings inside): %s\n" % target for target in skipped]
    parts += ["\nNot profiled (error): %s: %s\n" % item for item in failed]
    return DynamicReport("".join(parts), failed)


class DynamicReport(str):
    """The ``--dynamic`` report; ``failed`` lists the targets whose profile raised (the
    command then exits 2 after printing the report of the others)."""

    failed: List[Tuple[str, str]]

    def __new__(cls, text: str, failed: List[Tuple[str, str]]) -> "DynamicReport":
        report = super().__new__(cls, text)
        report.failed = list(failed)
        return report
