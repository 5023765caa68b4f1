// transformers.js under Node.js on a Hub folder, no project code: greedy ids for each prompt,
// alone and as one left-padded batch, for each dtype. Prints JSON.
//   node transformers_node.mjs <folder> <max_new_tokens> <prompt>...
import path from "node:path";
import { AutoModelForCausalLM, AutoTokenizer, env } from "@huggingface/transformers";

const [folder, maxNew, ...prompts] = process.argv.slice(2);
env.localModelPath = path.dirname(path.resolve(folder)) + "/";
env.allowRemoteModels = false;
const name = path.basename(folder);
const n = Number(maxNew);

const tokenizer = await AutoTokenizer.from_pretrained(name);
const result = { prompt_ids: prompts.map((p) => tokenizer.encode(p)) };
for (const dtype of ["fp32", "q8"]) {
  const model = await AutoModelForCausalLM.from_pretrained(name, { dtype, device: "cpu" });
  const alone = [];
  let seconds = 0;
  for (const prompt of prompts) {
    const inputs = tokenizer(prompt);
    const start = performance.now();
    const out = await model.generate({ ...inputs, max_new_tokens: n, min_new_tokens: n, do_sample: false });
    seconds += (performance.now() - start) / 1000;
    alone.push(out.tolist()[0].map(Number).slice(inputs.input_ids.dims[1]));
  }
  const batch = tokenizer(prompts, { padding: true });
  const out = await model.generate({ ...batch, max_new_tokens: n, min_new_tokens: n, do_sample: false });
  const width = batch.input_ids.dims[1];
  result[dtype] = {
    alone,
    batch: out.tolist().map((row) => row.map(Number).slice(width)),
    padding: batch.attention_mask.tolist().map((row) => row.map(Number)),
    tokens_per_s: (n * prompts.length) / seconds,
  };
  await model.dispose();
}
console.log(JSON.stringify(result));
