// Watch it learn in the static edition: the view that trains in this browser (web/views/learn.js),
// given the folder's addresses: learn/learn.json (export/learn_files.py) and onnxruntime-web.

import { mount as mountView } from "../views/learn.js";

export function mount(root, ctx) {
  const { site } = ctx;
  return mountView(root, {
    ...ctx,
    learn: {
      facts: site.files["learn/learn.json"], ort: "./vendor/ort/", wasm: site.files["vendor/ort/ort-wasm-simd-threaded.wasm.gz"],
      // One WebAssembly thread unless a developer asks (benchmarks/browser_learn.py measures more, on an isolated page).
      threads: Number(globalThis.localStorage?.getItem("pg-learn-threads")) || 1,
    },
  });
}
