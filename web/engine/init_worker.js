// A worker of init.js's drawWeights: draws one piece of one parameter (normals start .. start + n
// of its lane, times its std) and hands the float32 numbers back without a copy. Draw j depends on
// j alone, so pieces drawn by many workers at once are the numbers one thread draws.

import { fillNormals } from "./init.js";

self.onmessage = ({ data: { seed, lane, std, start, n } }) => {
  const w = new Float32Array(n);
  fillNormals(w, seed, lane, std, start);
  self.postMessage({ start, w }, [w.buffer]);
};
