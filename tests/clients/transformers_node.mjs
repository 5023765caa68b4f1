// transformers.js under Node.js on a Hub folder, no project code: greedy ids for each prompt,
// alone and as one left-padded batch, for each dtype. Prints JSON.
//   node transformers_node.mjs <folder> <max_new_tokens> <prompt>...
// DTYPES (comma-separated, default fp32,q8,int8): the files to run; natively every one applies.
import path from "node:path";
import * as transformers from "@huggingface/transformers";
import { greedyRuns } from "./greedy.mjs";

const [folder, maxNew, ...prompts] = process.argv.slice(2);
transformers.env.localModelPath = path.dirname(path.resolve(folder)) + "/";
transformers.env.allowRemoteModels = false;
const result = await greedyRuns(transformers, path.basename(folder), prompts, Number(maxNew), {
  device: "cpu",
  dtypes: (process.env.DTYPES || "fp32,q8,int8").split(","),
});
console.log(JSON.stringify(result));
