// A weights file for the stage graph (export/inside_graph.py): weights.bin holds each tensor of
// weights.json's index, the matrices as int8 rows with one float32 scale each, the rest float32.
// Here they become the float32 arrays the graph takes as inputs: the 8-bit download is a quarter
// of the fp32 one, and the graph never needs to know how the weights travelled.

/**
 * @param bytes the weights.bin Uint8Array
 * @param index weights.json, parsed
 * @returns {Map<string, {data: Float32Array, shape: number[]}>} in the graph's input order
 */
export function readWeights(bytes, index) {
  const out = new Map();
  const view = (offset, n) => new Float32Array(bytes.buffer.slice(bytes.byteOffset + offset, bytes.byteOffset + offset + 4 * n));
  for (const t of index.tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    if (t.dtype === "int8") {
      const q = new Int8Array(bytes.buffer, bytes.byteOffset + t.offset, n);
      const rows = t.shape[0];
      const width = n / rows;
      const scales = view(t.scales_offset, rows);
      const data = new Float32Array(n);
      for (let r = 0; r < rows; r++) {
        const s = scales[r];
        for (let i = r * width, end = i + width; i < end; i++) data[i] = q[i] * s;
      }
      out.set(t.name, { data, shape: t.shape });
    } else if (t.dtype === "float32") {
      out.set(t.name, { data: view(t.offset, n), shape: t.shape });
    } else {
      throw new Error(`${t.name}: unknown dtype ${t.dtype}`);
    }
  }
  return out;
}
