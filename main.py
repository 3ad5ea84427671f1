"""Entry point: python main.py [--config=configs/<name>.py] [--config.train.steps=N] [--workdir=DIR]
                              [--mode=pretrain|sft|convert|sample|rollout|rl|eval|serve] [--dry_run]
       python main.py --mode=agent --params=DIR --repo=PATH "a request" [--apply]

With no flags: trains the default small preset on local code text on CPU for a few minutes,
printing held-out loss, with checkpoints under workdir/default (re-running resumes).
Multi-host: pass --coordinator_address/--num_processes/--process_id, or --distributed to let
jax.distributed.initialize() read them from the environment (TPU pods, SLURM).
"""

import os
import sys

if __name__ == "__main__":
    # Before anything allocates: glibc reads the huge-page tunable only at process start.
    from train.malloc_env import reexec_with_hugepages

    reexec_with_hugepages()

from absl import app, flags, logging  # noqa: E402
from ml_collections import config_flags  # noqa: E402


def _config_file_arg() -> str:
    return ([a.split("=", 1)[1] for a in sys.argv if a.startswith("--config=")] or ["?"])[-1]


def _not_a_config(e: Exception) -> str | None:
    """The one-line reason a --config file is not a config (not Python, no get_config), or None."""
    if isinstance(e, SyntaxError):
        return (
            f"--config={_config_file_arg()} is not a config file (a Python file defining "
            f"get_config(), e.g. configs/default.py): {e.msg} at line {e.lineno}"
        )
    if "has no attribute 'get_config" in str(e) or "defined twice" in str(e):
        return (
            f"--config={_config_file_arg()} is not a config file: it defines no get_config() "
            "(see configs/default.py)"
        )
    return None


def _config_error(e: Exception) -> None:
    """A bad --config file or override (unknown key, wrong type, missing file, a file that is not
    a config) in one line."""
    message = _not_a_config(e) or " ".join(
        str(e).replace("\\n", " ").replace("\\", "").split()
    ).strip(chr(39))
    if "Attempted" in message:  # ml_collections lists every path it tried; the first line says it
        message = message.split("Attempted")[0].strip()
    overrides = " ".join(a for a in sys.argv[1:] if a.startswith("--config"))
    print(f"config error: {message} (flags: {overrides})", file=sys.stderr)
    sys.exit(2)


# ml_collections loads the default config file and applies --config.* overrides right here, at
# definition time, so errors in them surface at import.
try:
    _CONFIG = config_flags.DEFINE_config_file(
        "config", "configs/default.py", "Run config (a .py preset)."
    )
except (AttributeError, KeyError, TypeError, ValueError, OSError, SyntaxError, flags.Error) as e:
    _config_error(e)
_WORKDIR = flags.DEFINE_string("workdir", "workdir/default", "Checkpoints, TensorBoard events.")
_MODE = flags.DEFINE_enum(
    "mode",
    "pretrain",
    ["pretrain", "sft", "convert", "sample", "rollout", "rl", "eval", "serve", "agent"],
    "What to run.",
)
_PROMPT = flags.DEFINE_string("prompt", "", "--mode=sample: the text to complete.")
_PARAMS = flags.DEFINE_string(
    "params",
    "",
    "--mode=sample/rollout/eval: exported params dir (sample: default exports the newest "
    "checkpoint "
    "under --workdir; rollout: default a random-init smoke model; eval: default the newest "
    "<workdir>/export/params_*).",
)
_PORT = flags.DEFINE_integer(
    "port", 0, "--mode=serve: HTTP port (0 = serve.port of configs/serve.py)."
)
_REPO = flags.DEFINE_string("repo", "", "--mode=agent: the repository folder to work on.")
_APPLY = flags.DEFINE_bool("apply", False, "--mode=agent: write the change into --repo.")
_REJECT = flags.DEFINE_bool("reject", False, "--mode=agent: log the change as rejected.")
_ENDPOINT = flags.DEFINE_string(
    "endpoint", "", "--mode=agent: an OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1)."
)
_SCRIPTED = flags.DEFINE_string(
    "scripted", "", "--mode=agent: a JSON list of tool calls played as the policy (tests)."
)
_MAX_NEW = flags.DEFINE_integer("max_new_tokens", 128, "--mode=sample: tokens to generate.")
_TEMPERATURE = flags.DEFINE_float("temperature", 0.0, "--mode=sample: 0 = greedy.")
_DRY_RUN = flags.DEFINE_bool(
    "dry_run", False, "Print sizes, FLOPs and per-device bytes; allocate nothing."
)
_DISTRIBUTED = flags.DEFINE_bool(
    "distributed", False, "jax.distributed.initialize() from the environment."
)
_COORDINATOR = flags.DEFINE_string("coordinator_address", None, "host:port of process 0.")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Number of processes (hosts).")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "This process's index.")


def _init_distributed():
    import jax

    # Only affects the CPU backend (cross-process collectives for CPU runs); harmless elsewhere.
    # Asking jax.default_backend() here would start the backend before initialize(), which fails.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if _COORDINATOR.value or _NUM_PROCESSES.value:
        jax.distributed.initialize(
            coordinator_address=_COORDINATOR.value,
            num_processes=_NUM_PROCESSES.value,
            process_id=_PROCESS_ID.value,
        )
    elif _DISTRIBUTED.value:
        jax.distributed.initialize()


def _run(config, request: str = ""):
    """The chosen mode; user-facing failures raise ConfigError / InputError (one line each)."""
    from model.errors import ConfigError, InputError
    from train import convert
    from train.config_check import check_run_config

    check_run_config(config)  # every mode's engines read decode_dtype
    if _DRY_RUN.value:
        from train import dry_run

        print(dry_run.report(config))
        print(dry_run.table(config))  # the run's own mesh first, then candidate layouts
        if "rl" in config:  # the samplers' own mesh and the weight pushes
            print(dry_run.sampler_report(config))
        return
    workdir = _WORKDIR.value
    if os.path.exists(workdir) and not os.path.isdir(workdir):
        raise InputError(
            f"--workdir={workdir} is a file; it must name a directory (made if missing)"
        )
    _init_distributed()
    if _MODE.value == "rl" and "realtime" in config:  # configs/realtime.py: one feedback cycle
        from eval import promotion
        from rl.serve import realtime

        try:
            check = promotion.gate_check(config.realtime.gates)
        except ValueError as e:
            raise ConfigError(f"realtime.gates: {e}") from None
        realtime.main(config, _WORKDIR.value, evaluate=promotion.suite_metrics, check=check)
    elif _MODE.value == "rl":  # configs/rl.py: the same trainer with the RL loss and batch source
        from rl.learning import loop as rl_loop

        rl_loop.main(config, _WORKDIR.value)
    elif _MODE.value in ("pretrain", "sft"):
        from train import trainer

        # SFT is the same loop; its data has a loss mask and it starts
        # from --config.init_params_from.
        trainer.train(config, _WORKDIR.value)
    elif _MODE.value == "convert":
        print(convert.export_latest(config, _WORKDIR.value))
    elif _MODE.value == "rollout":  # configs/rollout.py
        from rl.sampling.rollout_main import run_rollouts

        run_rollouts(config, _WORKDIR.value, _PARAMS.value)
    elif _MODE.value == "serve":  # configs/serve.py (its defaults when --config has no serve block)
        from configs import serve as serve_config
        from rl.serve.server import serve

        config = config if "serve" in config else serve_config.get_config()
        serve(config, _PARAMS.value, _WORKDIR.value, _PORT.value)
    elif _MODE.value == "agent":  # configs/agent.py (its defaults when --config has no agent block)
        from configs import agent as agent_config
        from rl.serve import agent

        config = config if "agent" in config else agent_config.get_config()
        agent.main(
            config,
            request,
            repo=_REPO.value,
            workdir=workdir,
            params=_PARAMS.value,
            endpoint=_ENDPOINT.value,
            scripted=_SCRIPTED.value,
            apply=_APPLY.value,
            reject=_REJECT.value,
        )
    elif _MODE.value == "eval":  # configs/eval.py
        from eval.run import cli

        cli(config, _WORKDIR.value, _PARAMS.value)
    elif _MODE.value == "sample":
        from eval.sample import sample_cli, show

        params_dir = _PARAMS.value or convert.export_latest(config, _WORKDIR.value)
        try:
            text = sample_cli(
                params_dir,
                _PROMPT.value,
                max_new_tokens=_MAX_NEW.value,
                temperature=_TEMPERATURE.value,
                decode_dtype=config.decode_dtype,
            )
        except (FileNotFoundError, ValueError) as e:  # a params dir that is not an export
            raise InputError(f"--params={params_dir}: {' '.join(str(e).split())}") from None
        print(show(_PROMPT.value, text))


def main(argv):
    if len(argv) > 1 and _MODE.value != "agent":  # the agent's request is the one positional
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    from model.errors import ConfigError, InputError
    from model.hf import CheckpointError
    from rl.envs import SandboxUnavailable
    from train.trainer import NonFiniteLossError

    config = _CONFIG.value
    try:
        config.to_dict()  # a config file that failed to load raises here (ml_collections defers it)
    except OSError:
        _config_error(
            OSError(
                f"cannot load config file {_config_file_arg()} (missing, or get_config() failed)"
            )
        )
    try:
        _run(config, " ".join(argv[1:]))
    except (ConfigError, CheckpointError) as e:
        print(f"config error: {e}", file=sys.stderr)
        sys.exit(2)
    except (InputError, SandboxUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except NonFiniteLossError as e:
        print(f"training stopped: {e}", file=sys.stderr)
        sys.exit(3)


def _parse_flags(argv):
    try:
        return flags.FLAGS(argv)
    except (
        AttributeError,
        KeyError,
        TypeError,
        ValueError,
        OSError,
        SyntaxError,
        flags.Error,
    ) as e:
        _config_error(e)


if __name__ == "__main__":
    logging.set_verbosity(logging.WARNING)
    app.run(main, flags_parser=_parse_flags)
