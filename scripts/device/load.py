"""GPU load for the O/P device capture: phases with their wall-clock bounds in a JSON file.

matmul: a bf16 8192x8192 matmul loop (holds an H100 at its power cap: throttle reason
sw_power_cap); decode: a synthetic bf16 greedy decode loop (random weights, no real model:
the node has no network) that counts the tokens it generates, so tokens/J can be computed
from the agent's energy counter over that window.
"""

import json
import sys
import time

import torch


def matmul(seconds):
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    n = 0
    while time.time() - t0 < seconds:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
        n += 20
    return {"matmuls": n}


def decode(seconds, batch=512, hidden=4096, vocab=32000, layers=8):
    torch.manual_seed(0)
    emb = torch.randn(vocab, hidden, device="cuda", dtype=torch.bfloat16) * 0.02
    mlps = [
        (
            torch.randn(hidden, 4 * hidden, device="cuda", dtype=torch.bfloat16) * 0.02,
            torch.randn(4 * hidden, hidden, device="cuda", dtype=torch.bfloat16) * 0.02,
        )
        for _ in range(layers)
    ]
    tokens = torch.randint(0, vocab, (batch,), device="cuda")
    generated = 0
    t0 = time.time()
    with torch.no_grad():
        while time.time() - t0 < seconds:
            for _ in range(8):
                x = emb[tokens]
                for up, down in mlps:
                    x = x + torch.nn.functional.gelu(x @ up) @ down
                tokens = (x @ emb.T).argmax(dim=-1)
                generated += batch
            torch.cuda.synchronize()
    return {"output_tokens": generated, "batch": batch, "hidden": hidden, "layers": layers, "vocab": vocab}


def main():
    out, plan = sys.argv[1], sys.argv[2:]  # e.g. idle:15 matmul:60 idle:10 decode:40 idle:10
    phases = []
    for step in plan:
        kind, seconds = step.split(":")
        start = time.time()
        if kind == "idle":
            time.sleep(float(seconds))
            extra = {}
        elif kind == "matmul":
            extra = matmul(float(seconds))
        elif kind == "decode":
            extra = decode(float(seconds))
        else:
            raise SystemExit("unknown phase " + kind)
        phases.append(dict(kind=kind, start=start, end=time.time(), **extra))
        print(json.dumps(phases[-1]), flush=True)
    with open(out, "w") as fh:
        json.dump({"phases": phases, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}, fh, indent=1)


if __name__ == "__main__":
    main()
