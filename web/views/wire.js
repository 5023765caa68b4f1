// Unpacks what a handler of the app packed for a view (playground/wire.py): float32 vectors as
// their own bytes in base64 ({$f32, shape}), attention weights as 16-bit fractions ({$u16, shape,
// tril}), everything else JSON. The views draw from plain nested arrays, as the browser's own
// engine gives them, so this is the only place that knows how the numbers travelled.

const UNIT_STEPS = 65535; // playground/wire.UNIT_STEPS

function bytesOf(b64) {
  const text = atob(b64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

/** A flat array as nested plain arrays of `shape` (row-major). */
export function nest(flat, shape) {
  if (shape.length === 0) return flat[0];
  if (shape.length === 1) return Array.from(flat);
  const step = shape.slice(1).reduce((a, b) => a * b, 1);
  return Array.from({ length: shape[0] }, (_, i) => nest(flat.subarray(i * step, (i + 1) * step), shape.slice(1)));
}

function unit({ $u16: b64, shape, tril }) {
  const bytes = bytesOf(b64);
  const q = new Uint16Array(bytes.buffer, 0, bytes.length / 2);
  const size = shape.reduce((a, b) => a * b, 1);
  const out = new Float64Array(size);
  if (!tril) {
    for (let i = 0; i < size; i++) out[i] = q[i] / UNIT_STEPS;
  } else {
    const n = shape[shape.length - 1];
    let k = 0;
    for (let base = 0; base < size; base += n * n) {
      for (let r = 0; r < n; r++) for (let c = 0; c <= r; c++) out[base + r * n + c] = q[k++] / UNIT_STEPS;
    }
  }
  return nest(out, shape);
}

/** `value` with every packed array unpacked (a new object; `value` is left as it is). */
export function decode(value) {
  if (Array.isArray(value)) return value.map(decode);
  if (value === null || typeof value !== "object") return value;
  if (typeof value.$f32 === "string") {
    const bytes = bytesOf(value.$f32);
    return nest(new Float32Array(bytes.buffer, 0, bytes.length / 4), value.shape);
  }
  if (typeof value.$u16 === "string") return unit(value);
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, decode(v)]));
}
