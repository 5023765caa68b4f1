() => {
  // Enter in a slider's number box commits the typed value, as letting go of the handle does:
  // Gradio sends a slider's "release" on blur and pointer-up only, so Enter recomputed nothing.
  const isSliderBox = (box) => box instanceof HTMLInputElement && box.type === 'number'
    && (box.getAttribute('aria-label') || '').startsWith('number input for');
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && isSliderBox(e.target)) e.target.blur();
  }, true);
  // A number typed past a slider's ends is brought within them before the slider sends it
  // (Gradio sent it as typed, its range check failed on the server, and every output showed
  // "Error"); this runs before the slider's own blur handler.
  document.addEventListener('blur', (e) => {
    const box = e.target;
    if (!isSliderBox(box) || box.value === '') return;
    const v = Number(box.value), lo = Number(box.min), hi = Number(box.max);
    if (!Number.isFinite(v) || (v >= lo && v <= hi)) return;
    box.value = String(Math.min(Math.max(v, lo), hi));
    box.dispatchEvent(new Event('input', {bubbles: true}));
  }, true);
  // Each new action starts without the notices of the previous ones (Gradio keeps its toasts,
  // grouped, until closed, so old messages sat beside new results).
  const closeToasts = () => document.querySelectorAll('[data-testid="toast-close"]').forEach((b) => b.click());
  document.addEventListener('pointerdown', (e) => {
    if (e.target.closest('button, input, textarea') && !e.target.closest('[data-testid="toast-body"]')) closeToasts();
  }, true);
  document.addEventListener('keydown', (e) => { if (e.key === 'Enter') closeToasts(); }, true);
  // An input's error is brought into view (on a phone it can sit below the screen's edge).
  new MutationObserver((records) => {
    for (const r of records) for (const n of r.addedNodes) {
      const msg = n.nodeType === 1 && (n.matches('.pg-error-msg') ? n : n.querySelector('.pg-error-msg'));
      if (msg) { const b = msg.getBoundingClientRect(); if (b.top < 0 || b.bottom > window.innerHeight) msg.scrollIntoView({block: 'nearest'}); }
    }
  }).observe(document.body, {childList: true, subtree: true});
  // The tab bar is one row that scrolls sideways when narrow (page.css): the open tab is kept in
  // view, however it was opened (a click, a "Next" link, a link's address) and when the screen turns.
  const showSelectedTab = (behavior = 'smooth') => {
    const tab = document.querySelector('.tab-container[role="tablist"] > button[aria-selected="true"]');
    const bar = tab && tab.parentElement;
    if (!bar || bar.scrollWidth <= bar.clientWidth) return;
    const left = tab.getBoundingClientRect().left - bar.getBoundingClientRect().left + bar.scrollLeft;
    const right = left + tab.offsetWidth;
    if (left < bar.scrollLeft || right > bar.scrollLeft + bar.clientWidth) {
      bar.scrollTo({left: Math.max(0, left - (bar.clientWidth - tab.offsetWidth) / 2), behavior});
    }
  };
  new MutationObserver(() => showSelectedTab()).observe(document.body, {subtree: true, attributes: true, attributeFilter: ['aria-selected']});
  window.addEventListener('resize', () => showSelectedTab('instant'));  // a phone turned: the row's width changed
  // On a phone the header's intro is folded (page.css): a tap unfolds it, with the model line.
  document.addEventListener('click', (e) => {
    const header = e.target.closest('#pg-header');
    if (header && !e.target.closest('a') && window.matchMedia('(max-width: 600px)').matches) header.classList.toggle('pg-open');
  });
  // A plot drawn while its tab was hidden (a result that came on page load) has the default
  // width: opening a tab tells plotly the page's size, and it fits every plot to its box.
  document.addEventListener('click', (e) => {
    if (e.target.closest('button[role="tab"], .overflow-dropdown button')) {
      setTimeout(() => window.dispatchEvent(new Event('resize')), 60);
    }
  });
}
