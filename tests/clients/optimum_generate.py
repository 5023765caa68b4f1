"""Hugging Face Optimum on a Hub folder, no project code: greedy ids per prompt, alone and as one
left-padded batch, for each ONNX file, and everything Optimum logged or warned. Prints JSON.

    python optimum_generate.py FOLDER MAX_NEW_TOKENS PROMPT...   (in a venv with optimum-onnx)
"""

import io
import json
import logging
import sys
import time
import warnings

import torch
from optimum.onnxruntime import ORTModelForCausalLM
from transformers import AutoTokenizer

folder, max_new, prompts = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
log = io.StringIO()
handler = logging.StreamHandler(log)
logging.getLogger().addHandler(handler)
for name in ("optimum", "transformers"):
    logging.getLogger(name).addHandler(handler)
warnings.simplefilter("always")

result = {}
with warnings.catch_warnings(record=True) as caught:
    tok = AutoTokenizer.from_pretrained(folder)
    result["prompt_ids"] = [tok(p)["input_ids"] for p in prompts]
    for file_name in ("model.onnx", "model_quantized.onnx", "model_int8.onnx"):
        model = ORTModelForCausalLM.from_pretrained(folder, subfolder="onnx", file_name=file_name)
        settings = dict(max_new_tokens=max_new, min_new_tokens=max_new, do_sample=False)
        model.generate(**tok(prompts[0], return_tensors="pt"), max_new_tokens=2, do_sample=False)  # warm-up: not timed
        alone, seconds = [], 0.0
        for p in prompts:
            ids = tok(p, return_tensors="pt")
            start = time.perf_counter()
            alone.append(model.generate(**ids, **settings)[0, ids["input_ids"].shape[1]:].tolist())
            seconds += time.perf_counter() - start
        batch = tok(prompts, return_tensors="pt", padding=True)
        out = model.generate(**batch, **settings)[:, batch["input_ids"].shape[1]:].tolist()
        result[file_name] = {
            "alone": alone,
            "batch": out,
            "padding": batch["attention_mask"].tolist(),
            "inputs": [i.name for i in model.session.get_inputs()],
            "use_cache": bool(model.can_use_cache),
            "tokens_per_s": max_new * len(prompts) / seconds,
        }
result["log"] = log.getvalue() + "".join(f"{w.category.__name__}: {w.message}\n" for w in caught)
print(json.dumps(result))
