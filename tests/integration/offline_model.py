"""The tiny model with a 10240-token vocabulary, for `vllm bench latency`.

vLLM 0.32's latency benchmark draws prompt token ids from randint(10000)
(tests/fixtures/vllm-0.32-cpu/OFFLINE.md), so the 2048-token tiny model fails
with "Token id ... is out of vocabulary". This copy has its embeddings and LM
head resized to 10240 rows (new rows random, seeded); tokenizer files are the
tiny model's. Built once, with the vLLM venv's python, next to the tiny model.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from tests.integration.vllm_cpu import ensure_tiny_model, venv_python

VOCAB = 10240
MARKER = ".rocm-console-wide-model"
_SCRIPT = r"""
import os, shutil, sys
from pathlib import Path
import torch
from transformers import LlamaForCausalLM
src, out, vocab = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
model = LlamaForCausalLM.from_pretrained(src, torch_dtype=torch.float32)
model.resize_token_embeddings(vocab, mean_resizing=False)
tmp = out.with_name(out.name + f".tmp{os.getpid()}")
shutil.rmtree(tmp, ignore_errors=True)
model.save_pretrained(tmp, safe_serialization=True)
for f in src.iterdir():
    if f.name.startswith("tokenizer") or f.name.endswith(".jinja"):
        shutil.copy(f, tmp / f.name)
(tmp / sys.argv[4]).write_text(str(vocab))
try:
    os.rename(tmp, out)
except OSError:  # another builder won the race: keep its copy
    shutil.rmtree(tmp, ignore_errors=True)
"""


def ensure_wide_model(timeout: float = 300) -> Path:
    tiny = ensure_tiny_model()
    out = tiny.with_name(f"{tiny.name}-vocab{VOCAB}")
    if (out / MARKER).is_file():
        return out
    with tempfile.TemporaryDirectory(prefix="rc-wide-") as scratch:
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TMPDIR=scratch)
        for key in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
            env.pop(key, None)
        proc = subprocess.run(
            [str(venv_python()), "-c", _SCRIPT, str(tiny), str(out), str(VOCAB), MARKER],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if not (out / MARKER).is_file():
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise RuntimeError(f"widening the tiny model failed (exit {proc.returncode}): {tail}")
    return out
