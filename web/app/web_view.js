// A web view in the app (playground/ui/web_view.py): this gr.HTML's js_on_load. It imports the
// view's module (web/views/<name>.js, served under <root>/browser/views/) and mounts it in the
// component's element with a host: the app's side of the contract every view is written against
// (the static edition gives its own). The component's value is the view's data, packed by
// playground/wire.py: each new value the app's handlers send is unpacked (wire.js) and handed to
// the view's update() (one JSON string: Gradio's page makes every node of a value reactive). What the view asks for (host.request) is one of this component's custom
// events, so a Python handler of that event answers with a new value; the controls it moves
// (host.choose) are the tab's Gradio controls, set as a learner sets them.
const spec = __SPEC__;
const root = element.querySelector('.pg-web-view') || element;
const base = window.gradio_config && window.gradio_config.root
  ? window.gradio_config.root.replace(/\/?$/, '/') : new URL('.', location.href).href;
function setControl(id, value) {
  // The number goes into the control's box; its "input" event is the one a drag or an arrow key
  // on the slider sends, so the tab's own events follow.
  const box = document.querySelector('#' + id + ' input[type=number]');
  if (!box) return false;
  box.value = String(value);
  box.dispatchEvent(new Event('input', {bubbles: true}));
  return true;
}
const host = {
  edition: 'app',
  config: spec.config,
  // A page side that computes the view's data in this browser (inside_on.js) answers its requests
  // itself while it does (host.answer, set and cleared there): the server then hears none of them.
  answer: null,
  request: (name, data) => (host.answer ? host.answer(name, data || {}) : trigger(name, data || {})),
  choose: (name, value) => spec.controls[name] !== undefined && setControl(spec.controls[name], value),
  control: (name) => {
    const box = spec.controls[name] !== undefined && document.querySelector('#' + spec.controls[name] + ' input[type=number]');
    return box ? Number(box.value) : null;
  },
};
const views = (window.pgViews = window.pgViews || {});
(window.pgHosts = window.pgHosts || {})[spec.id] = host;
Promise.all([import(new URL(spec.module, base).href), import(new URL(spec.wire, base).href)]).then(([view, wire]) => {
  const mounted = view.mount(root, host);
  views[spec.id] = mounted;
  let shown;
  const show = () => {
    const value = props.value;
    if (value === shown || value === null || value === undefined || value === '') return;
    shown = value;
    mounted.update(wire.unpack(value));
  };
  show();
  watch('value', show);
}).catch((err) => {
  root.textContent = 'This view could not start in this browser: ' + err.message;
  console.error(err);
});
