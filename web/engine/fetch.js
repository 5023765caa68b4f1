// Downloads that survive the next visit: the model is 18 MB, onnxruntime-web's WebAssembly 14 MB,
// so a learner who comes back (or opens a second tab) takes them from the browser's Cache Storage
// instead of the network, whatever headers the host sends. Files are addressed with their content
// hash (?v=… or a hashed folder), so a new version never meets an old cache entry. A file whose
// address ends in ".gz" is unpacked here (a static host may not compress: the static edition ships
// its large libraries gzipped) and kept unpacked, so a return visit does no work for it.

const CACHE_NAME = "gpt-playground";
// A source tried before another (the Hub before the Space) that has not begun to answer in this
// long is passed over: an unreachable host can leave a request hanging for minutes.
export const HEADERS_TIMEOUT_MS = 15_000;

async function openCache() {
  try {
    return globalThis.caches ? await globalThis.caches.open(CACHE_NAME) : null;
  } catch {
    return null; // Cache Storage is refused outside secure contexts and in some private modes
  }
}

/**
 * The bytes at `url`, from the cache when it holds them, else downloaded with progress and kept.
 * `onProgress({ loaded, total, cached })` is called as bytes arrive (total 0 when unknown).
 * @returns {Promise<{ bytes: Uint8Array, cached: boolean }>}
 */
export async function fetchBytes(url, onProgress = () => {}, { headersTimeoutMs = 0 } = {}) {
  const cache = await openCache();
  const hit = cache && (await cache.match(url));
  if (hit) {
    const bytes = new Uint8Array(await hit.arrayBuffer());
    onProgress({ loaded: bytes.length, total: bytes.length, cached: true });
    return { bytes, cached: true };
  }
  let { bytes, type } = await download(url, onProgress, headersTimeoutMs);
  if (isGzipAddress(url) && bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = await gunzip(bytes); // a host that sent it as stored
  if (cache) {
    const headers = { "content-type": type || "application/octet-stream" };
    cache.put(url, new Response(bytes, { headers })).catch(() => {}); // a full quota only costs the next visit a download
  }
  return { bytes, cached: false };
}

/**
 * The bytes of the first of `sources` whose content has the sha256 `digest` (hex): each tried in
 * turn, from the cache or downloaded; one that fails (unreachable, an HTTP error, no answer within
 * HEADERS_TIMEOUT_MS while another is left) or gives other bytes (another version) is passed
 * over, and what it left in the cache dropped. Without WebCrypto (a page that is not a secure
 * context) nothing can be checked, so only the last source, the page's own host, is used.
 * @returns {Promise<{ bytes: Uint8Array, cached: boolean, source: string, skipped: string[] }>}
 */
export async function fetchVerified(sources, digest, onProgress = () => {}, { headersTimeoutMs = HEADERS_TIMEOUT_MS } = {}) {
  const subtle = globalThis.crypto?.subtle;
  const tried = subtle ? sources : sources.slice(-1);
  const skipped = [];
  for (const [i, url] of tried.entries()) {
    const last = i === tried.length - 1;
    try {
      const got = await fetchBytes(url, onProgress, { headersTimeoutMs: last ? 0 : headersTimeoutMs });
      if (!subtle || (await sha256(got.bytes)) === digest) return { ...got, source: url, skipped };
      skipped.push(`${url}: another file (its sha256 is not ${digest.slice(0, 16)}…)`);
      (await openCache())?.delete(url).catch(() => {});
    } catch (err) {
      skipped.push(`${url}: ${err.message}`);
    }
  }
  throw new Error(`the model could not be had from ${skipped.join("; ")}`);
}

/** The sha256 of `bytes`, hex. */
export async function sha256(bytes) {
  const hash = new Uint8Array(await globalThis.crypto.subtle.digest("SHA-256", bytes));
  return Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Whether `url`'s path (its query aside) names a gzipped file. */
export function isGzipAddress(url) {
  return /\.gz$/.test(String(url).split(/[?#]/)[0]);
}

/** The gzip stream `bytes` unpacked, by the browser's own zlib (DecompressionStream). */
export async function gunzip(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

async function download(url, onProgress, headersTimeoutMs = 0) {
  const abort = headersTimeoutMs ? new AbortController() : null;
  const timer = abort && setTimeout(() => abort.abort(new Error(`no answer within ${headersTimeoutMs / 1000} s`)), headersTimeoutMs);
  let response;
  try {
    response = await fetch(url, abort ? { signal: abort.signal } : {});
  } finally {
    clearTimeout(timer); // (the body, once it flows, takes what the link needs)
  }
  if (!response.ok) throw new Error(`could not download ${url}: HTTP ${response.status}`);
  const total = Number(response.headers.get("content-length")) || 0;
  const chunks = [];
  let loaded = 0;
  if (response.body && response.body.getReader) {
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      loaded += value.length;
      onProgress({ loaded, total, cached: false });
    }
  } else {
    chunks.push(new Uint8Array(await response.arrayBuffer()));
    loaded = chunks[0].length;
  }
  const bytes = new Uint8Array(loaded);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  onProgress({ loaded, total: total || loaded, cached: false });
  return { bytes, type: response.headers.get("content-type") };
}

/** JSON at `url` through the same cache. */
export async function fetchJSON(url, onProgress) {
  const { bytes } = await fetchBytes(url, onProgress);
  return JSON.parse(new TextDecoder().decode(bytes));
}

/** Whether this browser's cache already holds `url` (a page can then load it without asking). */
export async function isCached(url) {
  const cache = await openCache();
  return Boolean(cache && (await cache.match(url)));
}
