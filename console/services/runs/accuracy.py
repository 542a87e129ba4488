"""Accuracy beside speed: lm_eval (local-completions / local-chat-completions)
against a ready instance, as seed 002 checks gsm8k before trusting a speed result.
The accuracy kind of run: its argv (lm_eval_argv) and result reader (read_results).

lm_eval runs on the console's machine (scripts/setup-lm-eval puts it in
~/.cache/rocm-console/lm-eval-<version>) and reaches the instance through an SSH
forward of its port, like every other console request: its process is the run
API's local one (run.py's run_local: own session, followed output, stopped on
timeout or cancel). A local dataset copy
(--dataset PATH) becomes a task that includes lm_eval's own task file with
`dataset_path: json`, and the hub is then never asked (HF_DATASETS_OFFLINE=1).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from console.core.bench.output import parse_progress
from console.core.model import NodeSpec
from console.core.node_json import loads_document
from console.core.results.offline import run_from_accuracy
from console.core.results.record import StoredRun
from console.core.serve.argv import redact
from console.services.instances import InstanceService, InstanceState, InstanceView
from console.services.runs.run import gpu_context, run_local
from console.services.runs.serving import client_target
from console.services.status import sample_node
from console.services.transports import TransportPool
from console.transport.base import TransportError

LM_EVAL_VERSION = "0.4.13"
_TAIL = 200  # lines of lm_eval's output kept for the error
_HUB_RE = re.compile(
    r"Couldn't reach '([^']+)' on the Hub[^\n]*|OfflineModeIsEnabled|LocalEntryNotFoundError"
    r"|Max retries exceeded with url: /(?:api/)?datasets/\S+|Failed to resolve 'huggingface\.co'"
)
_EXC_RE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception): .+")


class AccuracyError(Exception):
    """An accuracy run refused or failed: one line."""


@dataclass(frozen=True)
class AccuracyOutcome:
    node: str
    instance: InstanceView
    task: str
    limit: int | None
    dataset: str | None
    model: str
    results: dict = field(repr=False)
    argv: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def summary(self) -> str:
        scores = (self.results.get("results") or {}).get(self.task) or {}
        parts = [
            f"{k} = {v:.4g}" for k, v in scores.items() if "," in k and "_stderr" not in k and isinstance(v, float)
        ]
        parts = parts or [f"{k} = {v}" for k, v in scores.items() if "," in k and "_stderr" not in k]
        return f"{self.task}: " + ", ".join(parts) + f" ({self.seconds:.0f} s)"


def default_lm_eval() -> str | None:
    """$ROCM_CONSOLE_LM_EVAL, scripts/setup-lm-eval's venv, or lm_eval on PATH."""
    env = os.environ.get("ROCM_CONSOLE_LM_EVAL")
    if env:
        return env
    venv = os.environ.get("ROCM_CONSOLE_LM_EVAL_VENV") or str(
        Path.home() / ".cache" / "rocm-console" / f"lm-eval-{LM_EVAL_VERSION}"
    )
    cached = Path(venv) / "bin" / "lm_eval"
    if os.access(cached, os.X_OK):
        return str(cached)
    return shutil.which("lm_eval")


def hub_hint(task: str, found: str) -> str:
    return (
        f"lm_eval could not fetch the {task} dataset from the Hugging Face hub ({found.strip()[:120]}): "
        "give --dataset PATH with a local copy (a folder with test.jsonl and train.jsonl in the task's "
        "format, or one .jsonl), or put the dataset in HF_HOME's cache and set HF_DATASETS_OFFLINE=1"
    )


def explain_failure(lines: list[str], task: str, exit_code: int | None, num_fewshot: int | None) -> str:
    """One line for a failed lm_eval: the hub, the few-shot pool, the server, else its own error line."""
    text = "\n".join(lines)
    errors = [line.strip() for line in lines if _EXC_RE.match(line.strip())]
    # the exception's own line first: the traceback also quotes the source that raises it
    for line in [*reversed(errors), text]:
        hub = _HUB_RE.search(line)
        if hub:
            return hub_hint(task, hub.group(0))
    if "Sample larger than population" in text:
        shots = f"{num_fewshot}" if num_fewshot is not None else "the task's default number of"
        return (
            f"the dataset has fewer training examples than {shots} few-shot examples: "
            "add examples to train.jsonl or give --num-fewshot with a smaller number"
        )
    if errors:
        return f"lm_eval failed: {errors[-1][:300]}"
    return f"lm_eval exited with code {exit_code}" + (f": {lines[-1].strip()[:200]}" if lines else "")


def _lm_eval_tasks_dir(lm_eval: str) -> Path | None:
    """lm_eval's tasks folder, found without importing it (its import takes seconds)."""
    python = Path(lm_eval).parent / "python"
    if not python.exists():
        return None
    try:
        out = subprocess.run(
            [
                str(python),
                "-c",
                "import importlib.util as u; print(u.find_spec('lm_eval').submodule_search_locations[0])",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    path = Path(out.stdout.strip()) / "tasks"
    return path if out.returncode == 0 and path.is_dir() else None


def _task_yaml(tasks_dir: Path, task: str) -> tuple[Path, str] | None:
    pattern = re.compile(rf"^task:\s*['\"]?{re.escape(task)}['\"]?\s*$", re.MULTILINE)
    for path in sorted(tasks_dir.rglob("*.yaml")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if pattern.search(text):
            return path, text
    return None


def local_task(dataset: Path, task: str, tasks_dir: Path | None, out_dir: Path) -> str:
    """Write `<task>_local`: lm_eval's task file with the data read from dataset. Returns its name."""
    if not dataset.exists():
        raise AccuracyError(f"--dataset {dataset}: no such file or folder")
    if dataset.is_dir():
        test = dataset / "test.jsonl"
        train = dataset / "train.jsonl"
        if not test.is_file():
            raise AccuracyError(f"--dataset {dataset}: no test.jsonl in it")
        train = train if train.is_file() else test
    else:
        if dataset.suffix not in (".jsonl", ".json"):
            raise AccuracyError(f"--dataset {dataset}: expected a .jsonl file or a folder with test.jsonl")
        test = train = dataset
    if tasks_dir is None:
        raise AccuracyError("cannot find lm_eval's tasks folder next to the lm_eval program (give --lm-eval PATH)")
    found = _task_yaml(tasks_dir, task)
    if found is None:
        raise AccuracyError(f"--task {task}: lm_eval has no task of that name")
    base, text = found

    def split(key: str, default: str | None) -> str | None:
        m = re.search(rf"^{key}:\s*(\S+)\s*$", text, re.MULTILINE)
        return m.group(1).strip("'\"") if m else default

    files = {split("test_split", "test") or "test": str(test.resolve())}
    for key in ("training_split", "fewshot_split", "validation_split"):
        name = split(key, None)
        if name and name not in files:
            files[name] = str(train.resolve())
    name = f"{task}_local"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.yaml").write_text(
        "\n".join(
            [
                f"include: {json.dumps(str(base))}",
                f"task: {name}",
                "tag: []",
                "dataset_path: json",
                "dataset_name: null",
                "dataset_kwargs:",
                "  data_files:",
                *(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in files.items()),
                "",
            ]
        ),
        encoding="utf-8",
    )
    return name


def _rename_task(results: dict, old: str, new: str) -> dict:
    out = dict(results)
    for key in ("results", "n-shot", "n-samples", "versions", "higher_is_better", "configs"):
        section = out.get(key)
        if isinstance(section, dict) and old in section:
            section = dict(section)
            section[new] = section.pop(old)
            out[key] = section
    return out


def lm_eval_argv(
    lm_eval: str,
    *,
    model: str,
    base_url: str,
    task: str,
    output: Path,
    extra: Sequence[str] = (),
    limit: int | None = None,
    num_fewshot: int | None = None,
    chat: bool = False,
) -> tuple[list[str], str]:
    """The accuracy kind's argv: lm_eval against the instance at base_url (its forward); and
    its --model_args (shown redacted, with the forward's address replaced)."""
    endpoint = "/v1/chat/completions" if chat else "/v1/completions"
    model_args = ",".join(
        [
            f"model={model}",
            f"base_url={base_url}{endpoint}",
            "tokenizer_backend=None",  # text requests: no tokenizer download on this machine
            "tokenized_requests=False",
            "num_concurrent=4",
            "max_retries=2",
            "timeout=600",
        ]
    )
    argv = [
        lm_eval,
        "--model",
        "local-chat-completions" if chat else "local-completions",
        "--model_args",
        model_args,
        "--tasks",
        task,
        "--output_path",
        str(output),
        *extra,
    ]
    if limit is not None:
        argv += ["--limit", str(limit)]
    if num_fewshot is not None:
        argv += ["--num_fewshot", str(num_fewshot)]
    if chat:
        argv += ["--apply_chat_template"]
    return argv, model_args


def read_results(output: Path, where: str) -> dict:
    """The accuracy kind's result: lm_eval's newest results_*.json under its --output_path."""
    files = sorted(output.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise AccuracyError(f"{where}: lm_eval wrote no results file")
    try:
        return loads_document(files[-1].read_text(encoding="utf-8"))  # W2: depth-safe
    except (OSError, ValueError) as exc:
        raise AccuracyError(f"{where}: unreadable lm_eval results: {exc}") from None


def progress_lines(on_line: Callable[[str], None] | None) -> Callable[[str], None]:
    """lm_eval's output as what a user reads: its progress bars, one line every 2 s and the last."""
    last_shown = 0.0

    def seen(part: str) -> None:
        nonlocal last_shown
        if on_line is None:
            return
        progress = parse_progress(part)
        now = time.monotonic()
        if progress is not None and (progress.n == progress.total or now - last_shown >= 2):
            last_shown = now
            on_line(f"{progress.desc or 'progress'} {progress.n}/{progress.total}")

    return seen


class AccuracyRunner:
    def __init__(self, pool: TransportPool | None = None, *, lm_eval: str | None = None) -> None:
        self.pool = pool or TransportPool()
        self.lm_eval = lm_eval

    async def ready_instance(self, node: NodeSpec, name: str) -> InstanceView:
        views = await InstanceService(self.pool).list_checked(node)
        view = next((v for v in views if v.name == name), None)
        if view is None:
            raise AccuracyError(f"{node.name}: no instance named {name}")
        if view.state != InstanceState.READY or not view.port:
            if view.state in (InstanceState.STOPPED, InstanceState.EXITED, InstanceState.FAILED):
                how = f"has stopped ({view.state.value}): start it again with `rocm-console serve start`"
            else:
                how = f"is {view.state.value}, not ready yet: wait for it (`rocm-console serve list`)"
            raise AccuracyError(f"{node.name}: instance {name} {how}")
        return view

    async def run(
        self,
        node: NodeSpec,
        instance: str,
        *,
        task: str = "gsm8k",
        limit: int | None = None,
        dataset: str | None = None,
        num_fewshot: int | None = None,
        chat: bool = False,
        timeout: float = 3600.0,
        on_line: Callable[[str], None] | None = None,
    ) -> AccuracyOutcome:
        lm_eval = self.lm_eval or default_lm_eval()
        if not lm_eval or not os.access(lm_eval, os.X_OK):
            raise AccuracyError(
                f"lm_eval not found{' at ' + lm_eval if lm_eval else ''}: run scripts/setup-lm-eval or give --lm-eval PATH"
            )
        view = await self.ready_instance(node, instance)
        model, _ = client_target(view)
        if not model:
            raise AccuracyError(f"{node.name}: instance {instance} serves no known model")
        try:
            forward = await self.pool.get(node).forward_port(view.port or 0)
        except TransportError as exc:
            raise AccuracyError(f"{node.name}: cannot reach instance {instance}: {exc.reason}") from None
        t0 = time.monotonic()
        try:
            with tempfile.TemporaryDirectory(prefix="rc-lmeval-") as tmp:
                work = Path(tmp)
                run_task = task
                env = dict(os.environ, TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
                extra: list[str] = []
                if dataset:
                    run_task = local_task(Path(dataset).expanduser(), task, _lm_eval_tasks_dir(lm_eval), work / "tasks")
                    extra += ["--include_path", str(work / "tasks")]
                    # a local copy: never ask the hub, keep the datasets cache in our temp folder
                    env.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_DATASETS_CACHE=str(work / "hf-datasets"))
                argv, model_args = lm_eval_argv(
                    lm_eval,
                    model=model,
                    base_url=f"http://127.0.0.1:{forward.local_port}",
                    task=run_task,
                    output=work / "out",
                    extra=extra,
                    limit=limit,
                    num_fewshot=num_fewshot,
                    chat=chat,
                )
                code, tail = await run_local(
                    argv, env, timeout, progress_lines(on_line), error=AccuracyError, what="lm_eval", keep=_TAIL
                )
                if code != 0:
                    raise AccuracyError(f"{node.name}: {instance}: " + explain_failure(tail, task, code, num_fewshot))
                results = read_results(work / "out", f"{node.name}: {instance}")
        finally:
            await forward.close()
        if run_task != task:
            results = _rename_task(results, run_task, task)
        shown = [redact(a) for a in argv]
        shown[shown.index("--model_args") + 1] = redact(
            model_args.replace(f"127.0.0.1:{forward.local_port}", "INSTANCE")
        )
        return AccuracyOutcome(
            node=node.name,
            instance=view,
            task=task,
            limit=limit,
            dataset=dataset,
            model=model,
            results=results,
            argv=tuple(shown),
            seconds=time.monotonic() - t0,
        )

    async def context(self, node: NodeSpec, outcome: AccuracyOutcome) -> dict:
        view = outcome.instance
        snap = None
        try:
            snap = await sample_node(self.pool, node, probe=False)
        except TransportError:
            pass
        return {
            **gpu_context(node, snap, view.gpus),
            "instance": view.name,
            "serve_preset": view.preset,
            "serve_args": list(view.argv),
            "vllm_version": view.version,
            "client_argv": list(outcome.argv),
            "gpus": list(view.gpus),
        }

    def stored_run(self, outcome: AccuracyOutcome, context: dict, *, label: str | None = None) -> StoredRun:
        try:
            return run_from_accuracy(
                context,
                outcome.results,
                task=outcome.task,
                limit=outcome.limit,
                model=outcome.model,
                dataset=outcome.dataset,
                label=label,
            )
        except ValueError as exc:
            raise AccuracyError(f"{outcome.node}: {outcome.instance.name}: {exc}") from None
