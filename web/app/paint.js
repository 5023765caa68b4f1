// When a page that generates in this browser paints (web/app/run_on.js). The page is given back
// to the browser (to paint, to take a click on Stop) every PAINT_MS, and the tokens drawn
// meanwhile join the page in one piece then: a paint and its layout cost more than a token at
// this model's size, so painting at the frame rate (33 ms) held the page to a fraction of the
// engine's speed alone (docs/browser.md). Ten paints a second still show the text growing.
// Where a paint costs more than a sixth of that (the app's large page on a slow phone: 60 % of
// the engine's speed with the CPU throttled 4x), the next one waits PAINT_SHARE times what the
// last took, so painting takes at most a seventh of the time on any device (docs/browser.md:
// 4 times held the page to 78 % there, 6 times to 85 %).

// Never more than MAX_PAINT_MS apart, though: the text still grows and Stop is still taken within
// a second (a paint measured dearer than it was must not make the page look stuck).

export const PAINT_MS = 100;
export const PAINT_SHARE = 6;
export const MAX_PAINT_MS = 1000;

/** Milliseconds from the end of a paint that took `costMs` to the next one. */
export function nextPaintAfter(costMs) {
  return Math.min(MAX_PAINT_MS, Math.max(PAINT_MS, PAINT_SHARE * Math.max(0, costMs)));
}
