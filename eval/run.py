"""`main.py --mode=eval`: runs the configured suites on one checkpoint or several (compare), writes
one report per suite (eval/report.py schema), a comparison report and plot, and prints tables.
Each suite's headline metrics and plots also go to TensorBoard beside the reports (<dir>/eval/tb,
at the checkpoint's step: params_<step>)."""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import time

from eval import agentic, humaneval, plot
from eval import report as rp
from rl.envs.agent.summary import summary_config
from train.tensorboard import SummaryWriter

SUITES = ("nll", "humaneval", "agentic", "repos")


def ints(value) -> list[int]:
    """'1,2,4' (or a tuple/int) -> [1, 2, 4]; one-line error otherwise."""
    if isinstance(value, int):
        return [value]
    if isinstance(value, (tuple, list)):
        return [int(v) for v in value]
    try:
        return [int(v) for v in str(value).split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"expected comma-separated integers, got {value!r}") from None


def names(value: str) -> list[str]:
    return [v.strip() for v in str(value).split(",") if v.strip()]


def newest_export(workdir: str) -> str:
    dirs = glob.glob(os.path.join(workdir, "export", "params_*"))
    dirs = [d for d in dirs if re.fullmatch(r"params_\d+", os.path.basename(d))]
    if not dirs:
        raise FileNotFoundError(
            f"no --params given and no {workdir}/export/params_* (run --mode=convert first)"
        )
    return max(dirs, key=lambda d: int(d.rsplit("_", 1)[1]))


def _data_config(config):
    """The run config whose data section names the held-out split."""
    path = config.eval.data_config
    if not path:
        return config
    spec = importlib.util.spec_from_file_location("_eval_data_config", path)
    if spec is None or not os.path.exists(path):
        raise FileNotFoundError(f"eval.data_config: {path} not found")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stage = module.get_config()
    out = config.copy_and_resolve_references()
    out.data = stage.data
    return out


def nll_suite(ckpt, cfg, params, config, tok) -> dict:
    from eval.nll import heldout_nll, resolve_shape

    data_config = _data_config(config)
    e = config.eval.nll
    lengths, batch_size, num_batches = resolve_shape(
        ints(e.context_lengths), e.batch_size, e.batches, data_config.train
    )
    t0 = time.perf_counter()
    metrics, items, tokens = heldout_nll(
        cfg,
        params,
        data_config,
        lengths,
        batch_size=batch_size,
        num_batches=num_batches,
        progress=rp.Progress("nll", len(lengths), every_s=0),
    )
    return _report("nll", ckpt, metrics, items, tokens, t0, config)


def humaneval_suite(ckpt, cfg, params, config, tok) -> dict:
    e = config.eval.humaneval
    problems = humaneval.load_problems(limit=e.limit)
    if e.policy == "canonical":
        complete = humaneval.canonical
    elif e.policy == "model":

        def complete(ps):
            print(f"[humaneval] sampling {e.n_samples} x {len(ps)} completions", flush=True)
            return humaneval.sample_completions(
                cfg,
                params,
                tok,
                ps,
                e.n_samples,
                max_new_tokens=e.max_new_tokens,
                temperature=e.temperature,
                top_p=e.top_p,
                seed=config.eval.seed,
                batch_size=e.batch_size,
                chunks=e.chunks,
                progress_factory=lambda n: rp.Progress("humaneval: sampling", n),
            )
    else:
        raise ValueError(f"eval.humaneval.policy={e.policy!r}: expected 'model' or 'canonical'")
    t0 = time.perf_counter()
    metrics, items, tokens = humaneval.run_suite(
        complete,
        problems,
        ints(e.ks),
        timeout_s=e.timeout_s,
        workers=e.workers,
        progress_factory=lambda n: rp.Progress("humaneval: executing", n),
    )
    metrics["problems"] = len(problems)
    return _report("humaneval", ckpt, metrics, items, tokens, t0, config)


def agentic_suite(ckpt, cfg, params, config, tok) -> dict:
    e = config.eval.agentic
    tasks = agentic.build_tasks(
        e.n_tasks,
        config.eval.seed,
        templates=names(e.templates),
        difficulties=ints(e.difficulties),
        tasks_jsonl=e.tasks_jsonl,
        verify=e.verify,
    )
    return _play_suite("agentic", e, tasks, ckpt, cfg, params, config, tok)


def repos_suite(ckpt, cfg, params, config, tok) -> dict:
    """The held-out real-repository suite (rl/envs/repos: tasks mined from vendored projects),
    played and reported like the agentic suite (per family: repo_bugfix, repo_feature, and with
    eval.repos.families repo_review and repo_devops)."""
    from rl.envs import verify_tasks
    from rl.envs.repos.projects import suite_tasks

    e = config.eval.repos
    tasks = suite_tasks(tuple(names(e.projects)), e.limit)
    if e.families:  # + its code review and DevOps tasks (repo_review, repo_devops)
        from rl.envs.repos.projects import family_tasks

        tasks += family_tasks(tuple(names(e.projects)))
    if e.verify:
        tasks, _ = verify_tasks(tasks)
    if not tasks:
        raise ValueError("repos: no tasks (eval.repos.projects names no vendored project?)")
    return _play_suite("repos", e, tasks, ckpt, cfg, params, config, tok)


def _play_suite(suite: str, e, tasks, ckpt, cfg, params, config, tok) -> dict:
    """Plays `tasks` under the agentic settings `e` (policy, ks, turns, budget, summary)."""
    ks = ints(e.ks)
    env_kwargs = dict(max_turns=e.max_turns)
    if e.max_tokens:  # the context budget (default: the model's positions)
        env_kwargs["max_tokens"] = e.max_tokens

    def make_policy(summary):
        kw = dict(env_kwargs, summary=summary) if summary is not None else env_kwargs
        if e.policy == "oracle":
            return agentic.ScriptedPolicy(tok, tasks, lambda i, s: True, **kw)
        if e.policy == "reader":  # the oracle that reads first (and summarizes when asked)
            return agentic.ScriptedPolicy(tok, tasks, lambda i, s: True, reads=True, **kw)
        if e.policy == "model":
            return agentic.ModelPolicy(
                cfg,
                params,
                tok,
                max_turn_tokens=e.max_turn_tokens,
                temperature=e.temperature,
                top_p=e.top_p,
                seed=config.eval.seed,
                **kw,
            )
        raise ValueError(
            f"eval.agentic.policy={e.policy!r}: expected 'model', 'oracle' or 'reader'"
        )

    n = max(ks)
    t0 = time.perf_counter()
    summary = summary_config(e.summary)
    if summary is None:
        policy = make_policy(None)
        episodes = agentic.run_suite(policy, tasks, n, rp.Progress(suite, len(tasks) * n))
        metrics, items = agentic.summarize(episodes, ks)
        errors = len(policy.errors) if isinstance(policy, agentic.ModelPolicy) else None
    else:  # with and without summaries at the same budget
        metrics, items = agentic.compare_summaries(make_policy, summary, tasks, n, ks)
        errors = None
    metrics["tasks"] = len(tasks)
    if errors is not None:
        metrics["dropped_episodes"] = errors  # scored as failed
    tokens = dict(completion=sum(s["completion_tokens"] for i in items for s in i["samples"]))
    return _report(suite, ckpt, metrics, items, tokens, t0, config)


RUNNERS = dict(nll=nll_suite, humaneval=humaneval_suite, agentic=agentic_suite, repos=repos_suite)


def _report(suite: str, ckpt, metrics, items, tokens, t0: float, config) -> dict:
    """A suite's report (eval/report.py's schema); wall time counted from `t0`."""
    elapsed = time.perf_counter() - t0
    return rp.make_report(
        suite, ckpt, metrics, items, tokens, elapsed, config.eval.seed, _suite_config(config, suite)
    )


def _suite_config(config, suite: str) -> dict:
    e = config.eval
    out = dict(e.get(suite).to_dict()) if suite in e else {}
    out.update(seed=e.seed, tokenizer=config.data.tokenizer)
    if suite == "nll":  # the shape actually evaluated (empty/0 fields are the stage's)
        from eval.nll import resolve_shape

        data_config = _data_config(config)
        n = e.nll
        shape = resolve_shape(ints(n.context_lengths), n.batch_size, n.batches, data_config.train)
        lengths, batch_size, batches = shape
        out.update(context_lengths=",".join(map(str, lengths)), batch_size=batch_size)
        out.update(batches=batches, data=data_config.data.to_dict(), mesh=config.mesh.to_dict())
    return out


def check_isolation() -> str:
    """HumanEval and the agentic suite run model-written code: only in an isolating sandbox
    (bubblewrap), unless the caller opted in (RL_ENVS_ALLOW_UNISOLATED=1); see rl.envs."""
    from rl.envs import require_isolation

    return require_isolation()


def _label(ckpt: str) -> str:
    """Plot legend: 'workdir/sft/export/params_60' -> 'sft/export/params_60'."""
    parts = os.path.normpath(ckpt).split(os.sep)
    return os.sep.join(parts[-3:] if len(parts) >= 3 and parts[-2] == "export" else parts[-2:])


def _report_name(suite: str, name: str) -> str:
    return f"{suite}-{name}" if name else suite


def evaluate_checkpoint(ckpt: str, config, suites, tok, out_root: str, log=print) -> dict:
    """Runs `suites` on one exported params checkpoint; returns {suite: report}."""
    from model.export import load_params

    cfg, params = load_params(ckpt)
    cfg = cfg.replace(decode_dtype=config.decode_dtype)  # the engines' dtype
    reports = {}
    writer = SummaryWriter(os.path.join(out_root, "eval", "tb"))
    step = checkpoint_step(ckpt)
    try:
        for suite in suites:
            log(f"[{suite}] {ckpt}")
            report = RUNNERS[suite](ckpt, cfg, params, config, tok)
            name = _report_name(suite, config.eval.name)
            path = rp.write_report(report, out_root, name)
            numbers = _headline(suite, report["metrics"]).items()
            writer.scalars(step, {f"{name}/{k}": v for k, v in numbers if _is_number(v)})
            if suite == "agentic":
                png = os.path.join(os.path.dirname(path), "score_vs_tokens.png")
                curve = agentic.tokens_curve(report["metrics"], ints(config.eval.agentic.ks))
                plot.score_vs_tokens({_label(ckpt): curve}, png)
                writer.image(step, f"{name}/score_vs_tokens", png)
                log(f"[agentic] plot: {png}")
            log(f"[{suite}] report: {path}")
            reports[suite] = report
    finally:
        writer.close()
    return reports


def checkpoint_step(ckpt: str) -> int:
    """The training step of an export named params_<step> (TensorBoard's x axis), else 0."""
    tail = os.path.basename(os.path.normpath(ckpt))
    return int(tail[len("params_") :]) if re.fullmatch(r"params_\d+", tail) else 0


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def compare_report(results: dict[str, dict], config, wall_time_s: float) -> dict:
    """One report with every checkpoint's metrics of every suite: items are (checkpoint, suite)."""
    metrics, items, tokens = {}, [], {}
    for ckpt, reports in results.items():
        for suite, r in reports.items():
            for k, v in r["metrics"].items():
                metrics[f"{ckpt}/{suite}/{k}"] = v
            items.append(dict(id=f"{ckpt}:{suite}", checkpoint=ckpt, suite=suite, **r["metrics"]))
            for k, v in r["tokens"].items():
                tokens[f"{suite}_{k}"] = tokens.get(f"{suite}_{k}", 0) + v
    return rp.make_report(
        "compare",
        ",".join(results),
        metrics,
        items,
        tokens,
        wall_time_s,
        config.eval.seed,
        config.eval.to_dict(),
    )


def run(config, workdir: str, params_dir: str = "", log=print) -> dict:
    """The eval entry: returns {checkpoint: {suite: report}}."""
    from data.tokenizers import load_tokenizer

    e = config.eval
    suites = names(e.suites)
    unknown = [s for s in suites if s not in SUITES]
    if unknown or not suites:
        raise ValueError(f"eval.suites={e.suites!r}: expected some of {','.join(SUITES)}")
    ckpts = names(e.compare) or [params_dir or newest_export(workdir)]
    if {"humaneval", "agentic", "repos"} & set(suites):
        log(f"sandbox: {check_isolation()}")
    tok = load_tokenizer(config.data.tokenizer)
    t0 = time.perf_counter()
    results = {}
    for ckpt in ckpts:
        root = ckpt if (params_dir or len(ckpts) > 1) else workdir
        results[ckpt] = evaluate_checkpoint(ckpt, config, suites, tok, root, log)
    for suite in suites:
        rows = [(c, results[c][suite]["metrics"]) for c in ckpts]
        log(f"\n{suite}\n" + rp.metrics_table([(c, _headline(suite, m)) for c, m in rows]))
    if len(ckpts) > 1:
        report = compare_report(results, config, time.perf_counter() - t0)
        path = rp.write_report(report, workdir, _report_name("compare", e.name))
        if "agentic" in suites:
            png = os.path.join(os.path.dirname(path), "score_vs_tokens.png")
            curves = {
                _label(c): agentic.tokens_curve(
                    results[c]["agentic"]["metrics"], ints(e.agentic.ks)
                )
                for c in ckpts
            }
            plot.score_vs_tokens(curves, png)
            writer = SummaryWriter(os.path.join(workdir, "eval", "tb"))
            writer.image(0, f"{_report_name('compare', e.name)}/score_vs_tokens", png)
            writer.close()
            log(f"[compare] plot: {png}")
        log(f"[compare] report: {path}")
    return results


def _headline(suite: str, metrics: dict) -> dict:
    """The table's columns: everything but the per-family breakdown (that stays in the report)."""
    return {k: v for k, v in metrics.items() if "/" not in k}


def family_rows(metrics: dict) -> list[tuple[str, dict]]:
    """Per-family rows '<family>/<metric>' of an agentic report's metrics."""
    rows: dict[str, dict] = {}
    for k, v in metrics.items():
        if "/" in k:
            fam, name = k.split("/", 1)
            rows.setdefault(fam, {})[name] = v
    return sorted(rows.items())


def cli(config, workdir: str, params_dir: str) -> None:
    """main.py --mode=eval: bad input (suite names, paths, missing extra) -> one line, exit 2."""
    import sys

    try:
        results = run(config, workdir, params_dir)
    except (ValueError, FileNotFoundError, ImportError, KeyError) as e:
        print(f"eval error: {e}", file=sys.stderr)
        sys.exit(2)
    for ckpt, reports in results.items():
        for suite in ("agentic", "repos"):
            if suite in reports:
                print(f"\n{suite} per family: {ckpt}")
                print(rp.metrics_table(family_rows(reports[suite]["metrics"])))
