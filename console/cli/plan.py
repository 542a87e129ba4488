"""`rocm-console serve plan MODEL --node N`: will the model fit, in every partition mode x TP.

The model's config.json comes from the node (its Hugging Face cache or a local folder, read by
the agent); the node's GPUs from one telemetry sample. The plan is console/core/models/fit.py's.
"""

from __future__ import annotations

import argparse
import json

from console.cli.common import EXIT_OK, UsageError, parse_pairs
from console.cli.inputs import parse_gpus
from console.cli.selection import Selection
from console.core.model import Profile
from console.core.models.fit import FitError, ServeSettings, Verdict
from console.core.models.settings import SETTING_KEYS, settings_from_args, settings_from_pairs


def add_plan_parser(serve_sub) -> argparse.ArgumentParser:
    plan = serve_sub.add_parser(
        "plan", help="will a model fit: weights, KV cache, largest max_model_len, per partition mode x TP"
    )
    plan.add_argument("model", help="a Hugging Face repo id in the node's cache, or a model folder on the node")
    plan.add_argument("--node", metavar="NAME", help="node (needed when the profile has several)")
    plan.add_argument("--gpus", metavar="LIST", help="also the fit on these logical GPUs in the current mode")
    plan.add_argument("--preset", metavar="NAME", help="start from a serve preset's flags")
    plan.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"a fit setting ({', '.join(SETTING_KEYS)}), repeatable",
    )
    plan.add_argument("--context", type=int, default=None, metavar="L", help="concurrency at L tokens per request")
    return plan


def _settings(args: argparse.Namespace, profile: Profile) -> ServeSettings:
    base = ServeSettings()
    try:
        if args.preset:
            preset = next((p for p in profile.serve_presets if p.name == args.preset), None)
            if preset is None:
                names = ", ".join(p.name for p in profile.serve_presets) or "none"
                raise UsageError(f"unknown serve preset {args.preset!r} (known: {names})")
            base = settings_from_args(list(preset.args), ServeSettings(tp=preset.tp))
        return settings_from_pairs(parse_pairs(args.set, "--set"), base)
    except FitError as exc:
        raise UsageError(str(exc)) from None


async def run_plan(args: argparse.Namespace, profile: Profile) -> int:
    from console.services.models import ModelsError, fit_on, model_facts, node_gpus, plan
    from console.services.status import sample_node

    settings = _settings(args, profile)
    if args.context is not None and args.context < 1:
        raise UsageError(f"--context {args.context}: expected a positive number of tokens")
    chosen = parse_gpus(args.gpus)
    async with Selection(profile) as sel:
        node = sel.node(args.node)
        try:  # a model not on the node, a config.json the plan cannot size: bad input, one line
            facts = await model_facts(sel.pool, node, args.model)
            gpus = node_gpus(await sample_node(sel.pool, node, probe=False))
            rows = plan(facts, gpus, settings)
        except ModelsError as exc:
            raise UsageError(str(exc)) from None
    current = None
    if chosen is not None:
        try:
            current = fit_on(facts, gpus, chosen, settings)
        except ModelsError as exc:
            raise UsageError(f"--gpus {args.gpus}: {exc}") from None
    context = args.context
    if args.json:
        out = {
            "model": facts.name,
            "node": node.name,
            "gpu": gpus.gpu,
            "physical_gpus": gpus.physical,
            "current_mode": f"{gpus.compute}-{gpus.memory}" if gpus.compute else None,
            "rows": [
                {
                    "mode": r.mode,
                    "tp": r.tp,
                    "instances": r.instances,
                    "gpu_memory_bytes": r.gpu_memory_bytes,
                    "fits": r.prediction is not None and r.prediction.verdict in (Verdict.FITS, Verdict.FITS_SHORTER),
                    "verdict": r.prediction.line() if r.prediction else f"not possible: {r.refusal}",
                    "prediction": r.prediction.as_dict() if r.prediction else None,
                    "concurrency": r.prediction.concurrency(context) if r.prediction and context else None,
                }
                for r in rows
            ],
            "on_gpus": {"gpus": chosen, "prediction": current.as_dict(), "verdict": current.line()}
            if current is not None
            else None,
        }
        print(json.dumps(out, indent=2))
        return EXIT_OK
    mode = f"{gpus.compute}-{gpus.memory}" if gpus.compute else "unknown mode"
    print(f"{facts.name} on {node.name} ({gpus.physical}x {gpus.gpu}, now {mode})")
    for r in rows:
        extra = ""
        if r.prediction is not None and context:
            conc = r.prediction.concurrency(context)
            extra = f" [{conc:.2f}x at {context:,} tokens]" if conc is not None else ""
        print(f"  {r.line()}{extra}")
    if current is not None:
        print(f"on GPUs {','.join(map(str, chosen or ()))}: {current.line()}")
    return EXIT_OK
