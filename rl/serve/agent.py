"""`python main.py --mode=agent --repo=PATH "a terse request"`: one agent episode on a user's
repository in RL's harness, its change printed as a unified diff, applied only with --apply.

    python main.py --mode=agent --params=DIR --repo=PATH "fix the failing test"      # in-process
    python main.py --mode=agent --endpoint=http://127.0.0.1:8000/v1 --repo=PATH "..."  # a server
    python main.py --mode=agent --scripted=calls.json --repo=PATH "..."   # scripted turns (tests)
        [--apply | --reject] [--workdir=W] [--config=configs/agent.py --config.agent.max_turns=N]

The harness is RL's, defined once: the episode is a CodingEnv (rl/envs/agent/env.py) with the
mined repository tasks' tools (the base tools + search and code_search), its system prompt, its
trim of tool outputs (data/chat.py trim_tool_output) and its sandbox (bubblewrap; the repository
is copied in, the user's folder is never mounted). Only the end differs: a user's repository has
no hidden tests, so the episode is not graded; the files the sandbox holds when it ends are
compared with the copy (`AgentEnv`).

Here: the task, the environment and the record; the folder's side (copy in, diff, apply):
rl/serve/agent_folder.py; the scripted and endpoint policies: rl/serve/agent_policies.py.

The policy: exported params in this process (`--params`: rl/sampling/rollout.py's driver on the
decode engine, the one RL samples with), any OpenAI-compatible endpoint (`--endpoint`: this
project's server, rl/serve; each turn is one chat request whose messages render, through the same
chat template and tool budget, to the context the environment holds), or scripted tool calls
(`--scripted FILE`: a JSON list of {"name", "arguments"}, one per turn; for tests).

The record: the episode as the server logs an exchange (rl/serve/app.py `_exchange`: an RL record,
rl/episodes/records.py, kind "exchange", reward None) in the interaction log
(<workdir>/interactions by default, where `--mode=serve` logs and rl/serve/feedback.py reads),
with the diff as its completion_text; --apply logs the signal "accepted", --reject "rejected"
(rl/episodes/rewards.py feedback_reward: +1 / -1), so the real-time cycle trains on it. Through an
endpoint, the server has logged each turn itself; the signal is posted to /v1/feedback for every
turn's response. A scripted episode's record has no sampler log-probs (zeros, version 0, no
experts) and says policy "scripted": the plumbing, not a sample to learn from.

Bad input stops with one line (model.errors.InputError): a path that is not a folder, a repository
over the sandbox's size limit (Limits.repo_bytes), a request whose prompt leaves no room for a
turn in the context, a user's file that changed while the episode ran (nothing is applied then).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import uuid

from data.chat import generation_prompt
from model.errors import InputError
from rl.envs.agent import tools
from rl.envs.agent.env import DEFAULT_SYSTEM, CodingEnv, run_episode
from rl.envs.grading.tasks import Task
from rl.envs.isolation.sandbox import Limits
from rl.episodes.records import episode_records, to_json
from rl.episodes.rewards import RewardConfig
from rl.serve.agent_folder import (
    apply_change,
    check_folder,
    read_repo,
    sandbox_files,
    unified_diff,
)
from rl.serve.agent_policies import EndpointPolicy, ScriptedTurns, load_scripted
from rl.serve.interaction_log import InteractionLog

AGENT_TOOLS = ("search", "code_search")  # the mined repository tasks' (rl/envs/repos/mine.py)


def agent_task(request: str, files: dict[str, str], name: str, test_command: str) -> Task:
    """The user's request as a Task: their files, RL's tools for real repositories, no grading."""
    return Task(
        id=f"agent/{name}",
        prompt=request,
        files=files,
        hidden_tests={},
        solution={},
        test_command=test_command,
        kind="agent",
        meta={"tools": list(AGENT_TOOLS)},
    )


def system_prompt(task: Task) -> str:
    """CodingEnv.reset's system prompt for `task` (what an endpoint's first request carries)."""
    return DEFAULT_SYSTEM + tools.extra_help(task.meta.get("tools", ()))


class AgentEnv(CodingEnv):
    """A CodingEnv whose episode ends without grading (a user's repository has no hidden tests):
    `final` holds the sandbox's files when it ended, read before the sandbox goes."""

    final: dict[str, str] | None = None

    def _finish(self, reason: str) -> None:
        self._record.done_reason = reason
        self.final = sandbox_files(self.sandbox)
        self.close()


# ---------------------------------------------------------------- the episode


@dataclasses.dataclass
class Outcome:
    diff: str
    record: dict  # the logged exchange (JSON form); {} through an endpoint (the server logs)
    env_record: object  # the environment's EpisodeRecord
    applied: list[str]
    signal: str | None


def env_kwargs(a, cache_len: int | None = None) -> dict:
    """The agent block's environment settings (configs/agent.py); the context is at most the
    engine's cache (`cache_len`: the engine caps it at the model's positions), as RL's is."""
    return dict(
        max_turns=a.max_turns,
        max_tokens=min(a.max_tokens, cache_len or a.max_tokens),
        obs_token_budget=a.obs_token_budget,
        command_timeout_s=a.command_timeout_s,
        test_timeout_s=a.test_timeout_s,
        limits=Limits(repo_bytes=a.max_repo_bytes),
    )


def check_fits(tok, env: AgentEnv, task: Task, max_turn_tokens: int) -> None:
    """InputError when the prompt (system + request) leaves no room for one turn."""
    prompt = generation_prompt(
        tok,
        [
            {"role": "system", "content": system_prompt(task)},
            {"role": "user", "content": task.prompt},
        ],
    )
    if len(prompt) + max_turn_tokens > env.max_tokens:
        raise InputError(
            f"the request does not fit: its prompt is {len(prompt)} tokens (system prompt "
            f"included) and a turn needs {max_turn_tokens}, over the context of {env.max_tokens} "
            "tokens (config agent.max_tokens); shorten the request"
        )


def run(
    request: str,
    repo: str,
    a,
    *,
    tok,
    log_dir: str,
    policy_kind: str,
    apply=False,
    reject=False,
    endpoint="",
    scripted="",
    api_key="-",
    engine=None,
) -> Outcome:
    """One episode (module docstring). `a`: the agent block (configs/agent.py); `engine`: a
    built decode engine for policy_kind "params" (`main` builds it from --params)."""
    if policy_kind == "params" and engine is None:
        raise ValueError("policy_kind 'params' needs the decode engine")
    if apply and reject:
        raise InputError("--apply and --reject contradict each other: give one")
    if not request.strip():
        raise InputError('--mode=agent needs a request: main.py --mode=agent --repo=PATH "..."')
    files = read_repo(repo, a.max_repo_bytes)
    name = os.path.basename(os.path.realpath(repo)) or "repo"
    task = agent_task(request, files, name, a.test_command)
    env = AgentEnv(tok, **env_kwargs(a, engine.spec.cache_len if engine is not None else None))
    check_fits(tok, env, task, a.max_turn_tokens)
    t0 = time.time()
    if policy_kind == "params":
        arrays, env_rec = _play_on_engine(engine, tok, task, env, a)
    else:
        if policy_kind == "endpoint":
            policy = EndpointPolicy(
                tok,
                endpoint,
                extra=AGENT_TOOLS,
                model=a.model_name,
                api_key=api_key,
                max_tokens=a.max_turn_tokens,
                temperature=a.temperature,
            )
        else:
            policy = ScriptedTurns(tok, load_scripted(scripted))
        env_rec = run_episode(env, task, policy)
        arrays = None
    if env.final is None:  # never a diff against nothing: that would delete every file
        raise InputError(f"the episode ended without reading the sandbox back ({task.id})")
    diff = unified_diff(files, env.final)
    signal = "accepted" if apply else "rejected" if reject else None
    applied = apply_change(repo, files, env.final) if apply else []
    record = {}
    if policy_kind == "endpoint":
        if signal:
            policy.feedback(signal)
    else:
        record = _exchange(tok, env_rec, arrays, task, a.model_name, diff, policy_kind, t0)
        log = InteractionLog(log_dir)
        try:
            log.append(record)
            if signal:
                log.append_signal(_feedback(record["id"], signal))
        finally:
            log.close()
    return Outcome(diff, record, env_rec, applied, signal)


def _play_on_engine(engine, tok, task, env, a):
    """The episode on the decode engine through RL's rollout driver (the sampler's own path):
    -> (the engine's per-token arrays of its one segment, the env's record)."""
    from rl.sampling.rollout import play_episodes

    out = play_episodes(
        engine,
        tok,
        [task],
        max_turn_tokens=a.max_turn_tokens,
        workers=1,
        env_factory=lambda: env,
        log_every_s=0,
    )
    if not out.records:
        raise InputError(f"the episode failed: {out.stats.get('error_messages')}")
    return out.records[0], env.record()


def _exchange(tok, env_rec, rec, task, model, diff, policy_kind, t0) -> dict:
    """The episode as the interaction log's exchange record (rl/serve/app.py `_exchange`'s
    fields): an RL record over the whole multi-turn transcript, reward None until a signal."""
    if rec is None:  # scripted: the env's tokens; no sampler, so no log-probs or experts
        n = len(env_rec.tokens)
        arrays = dict(tokens=env_rec.tokens, logprobs=[0.0] * n, versions=[0] * n, experts=[])
        (rec,) = episode_records(
            env_rec, [arrays], tok, RewardConfig(), group=0, sample=0, policy="scripted"
        )
    rid = f"agent-{uuid.uuid4().hex}"
    messages = [
        {"role": "system", "content": system_prompt(task)},
        {"role": "user", "content": task.prompt},
    ]
    return to_json(
        dict(
            rec,
            group_id=rid,
            reward=None,
            reward_terms=None,
            kind="exchange",
            id=rid,
            choice=0,
            time=t0,
            endpoint="agent",
            model=model,
            messages=messages,
            completion_text=diff,
            policy=policy_kind,
            key_id=None,
        )
    )


def _feedback(rid: str, signal: str) -> dict:
    return {
        "kind": "feedback",
        "id": f"fb-{uuid.uuid4().hex}",
        "time": time.time(),
        "key_id": None,
        "response_id": rid,
        "choice": 0,
        "signal": signal,
    }


def main(
    config,
    request: str,
    *,
    repo: str,
    workdir: str,
    params="",
    endpoint="",
    scripted="",
    apply=False,
    reject=False,
) -> Outcome:
    """main.py --mode=agent: picks the policy, runs the episode, prints the diff (stdout) and a
    summary line (stderr)."""
    from rl.envs import require_isolation

    a = config.agent
    given = [
        k
        for k, v in (("--params", params), ("--endpoint", endpoint), ("--scripted", scripted))
        if v
    ]
    if len(given) != 1:
        raise InputError(
            "--mode=agent needs exactly one policy: --params=DIR, --endpoint=URL or "
            f"--scripted=FILE (got {', '.join(given) or 'none'})"
        )
    kind = given[0].lstrip("-")
    check_folder(repo)
    require_isolation()  # model-written commands run in the sandbox: bubblewrap or refuse
    tok = _tokenizer(a.tokenizer, params)
    engine = _engine(config, params, tok) if kind == "params" else None
    log_dir = a.log_dir or os.path.join(workdir, "interactions")
    api_key = os.environ.get("COMPOSER_API_KEY") or os.environ.get("OPENAI_API_KEY") or "-"
    o = run(
        request,
        repo,
        a,
        tok=tok,
        log_dir=log_dir,
        policy_kind=kind,
        apply=apply,
        reject=reject,
        endpoint=endpoint,
        scripted=scripted,
        api_key=api_key,
        engine=engine,
    )
    sys.stdout.write(o.diff or "")
    r = o.env_record
    where = f"logged as {o.record['id']} in {log_dir}" if o.record else f"logged by {endpoint}"
    change = (
        f"applied to {len(o.applied)} file(s)"
        if apply
        else ("not applied (--apply applies it)" if o.diff else "no change")
    )
    print(
        f"agent: {r.turns} turns, {r.tool_calls} tool calls, {r.malformed_calls} malformed, "
        f"ended by {r.done_reason}; {change}; {where}"
        + (f"; feedback {o.signal}" if o.signal else ""),
        file=sys.stderr,
    )
    return o


def _tokenizer(spec: str, params_dir: str):
    """agent.tokenizer when set, else the one the --params export records (bytes for one that
    records none, or for an --endpoint / --scripted policy); a contradiction is one line."""
    from data.export_tokenizer import tokenizer_for_export
    from data.tokenizers import load_tokenizer
    from model.export import load_config

    try:
        if params_dir:
            return tokenizer_for_export(params_dir, spec, load_config(params_dir).vocab_size)
        return load_tokenizer(spec or "byte")
    except FileNotFoundError as e:  # a params dir that is not an export
        raise InputError(f"--params={params_dir}: {' '.join(str(e).split())}") from None
    except ValueError as e:
        raise InputError(f"agent.tokenizer: {e} (leave it unset to use the export's)") from None


def _engine(config, params_dir: str, tok):
    from model.engine_config import EngineConfig, build_engine
    from rl.sampling.rollout_main import _model

    a = config.agent
    cfg, params = _model(config, params_dir, a.cache_len)
    ec = EngineConfig.from_block(a, cfg)
    return build_engine(cfg, params, ec, valid_vocab=tok.vocab_size)
