"""Models on nodes, pure part: what a model's config.json says, whether it fits, packing.

`config` reads the facts a fit plan needs from a Hugging Face config.json; `fit`
predicts weight memory, KV-cache capacity and the largest max_model_len per GPU
and partition mode, and pairs a prediction with what vLLM logs; `packing` is the
rule for several instances sharing one GPU. docs/models.md has the formulas.
"""
