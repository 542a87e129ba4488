# rocm-console device capture for O and P: the agent's own stream (telemetry + health) under load.
# Run as `bash scripts/device/capture-agent-stream.sh` (the nvidia-ml-py wheel carried in .devcarry/whl) from the repo root; everything it keeps goes to $OUT.
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .devcarry/whl/*.whl || exit 1
export PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$OUT/nvidia-smi-L.txt"
nvidia-smi --query-gpu=driver_version,pstate,power.limit,ecc.mode.current,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max --format=csv | tee "$OUT/nvidia-smi-query.csv"
PYTHONPATH=/tmp/site python3 console/agent telemetry --interval 1 --health-interval 2 >"$OUT/agent-stream.jsonl" 2>"$OUT/agent-stderr.txt" &
AGENT=$!
sleep 3
python3 scripts/device/load.py "$OUT/load.json" idle:12 matmul:60 idle:10 decode:40 idle:10 &
LOAD=$!
sleep 40
nvidia-smi -q -d PERFORMANCE >"$OUT/nvidia-smi-q-performance-under-load.txt" 2>&1
wait $LOAD
echo "load rc=$?"
kill -INT $AGENT; sleep 2; kill -0 $AGENT 2>/dev/null && kill $AGENT
wait $AGENT; echo "agent rc=$?"
wc -l "$OUT/agent-stream.jsonl"; head -c 600 "$OUT/agent-stream.jsonl"; echo
grep -c '"kind":"health"' "$OUT/agent-stream.jsonl"
tail -5 "$OUT/agent-stderr.txt"
python3 - "$OUT/agent-stream.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
hs = [l for l in lines if l["kind"] == "health"]
for h in hs[::5]:
    g = h["gpus"][0]["nvml"]
    print(round(h["ts"]), g.get("clock_event_names"), g.get("throttled"), g.get("energy_mj"))
ss = [l for l in lines if l["kind"] == "sample"]
e = [(s["ts"], s["gpus"][0].get("energy_j"), s["gpus"][0].get("power_w"), s["gpus"][0].get("throttled")) for s in ss]
print("samples", len(ss), "first", e[0], "last", e[-1])
PY
