// Greedy generation with transformers.js, shared by the Node.js script and the browser page:
// for each dtype ("fp32": onnx/model.onnx, "q8": onnx/model_quantized.onnx, "int8": onnx/model_int8.onnx),
// each prompt alone (with tokens/s) and, with `batch`, all prompts as one
// left-padded batch (the folder's tokenizer pads on the left).
export async function greedyRuns(transformers, name, prompts, n, { device, batch = true, dtypes = ["fp32", "q8"] } = {}) {
  const { AutoModelForCausalLM, AutoTokenizer } = transformers;
  const tokenizer = await AutoTokenizer.from_pretrained(name);
  const result = { prompt_ids: prompts.map((p) => tokenizer.encode(p)) };
  const settings = { max_new_tokens: n, min_new_tokens: n, do_sample: false };
  for (const dtype of dtypes) {
    const model = await AutoModelForCausalLM.from_pretrained(name, { dtype, device });
    const alone = [];
    let seconds = 0;
    for (const prompt of prompts) {
      const inputs = tokenizer(prompt);
      const start = performance.now();
      const out = await model.generate({ ...inputs, ...settings });
      seconds += (performance.now() - start) / 1000;
      alone.push(out.tolist()[0].map(Number).slice(inputs.input_ids.dims[1]));
    }
    result[dtype] = { alone, tokens_per_s: (n * prompts.length) / seconds };
    if (batch) {
      const padded = tokenizer(prompts, { padding: true });
      const out = await model.generate({ ...padded, ...settings });
      const width = padded.input_ids.dims[1];
      result[dtype].batch = out.tolist().map((row) => row.map(Number).slice(width));
      result[dtype].padding = padded.attention_mask.tolist().map((row) => row.map(Number));
    }
    await model.dispose();
  }
  return result;
}
