// Watch it learn's training step in the learner's browser: the graph that `python -m
// export.train_step` writes (model/gpt.py's forward pass, its backward pass, the gradient clipping
// and the AdamW update of model/train.py, one batch) run by onnxruntime-web, its new weights and
// moments fed back as the next step's. No training code of its own: the step is the server's,
// as a graph (docs/training.md, "Watch it learn's step as ONNX").
//
// The graph's interface: inputs each parameter by its PyTorch name ("wte.weight", ...), the
// moments "m.<name>" and "v.<name>", the batch "idx" and "targets" (int64 [batch, block]), "lr"
// (float32) and "step" (int64, the updates made before); outputs "loss", "grad_norm" and
// "new.<input>" for each parameter and moment.

const BATCH_INPUTS = ["idx", "targets", "lr", "step"];

export class Trainer {
  /**
   * @param ort onnxruntime-web's module (engine.js's loadOrt)
   * @param session an InferenceSession of a step graph
   */
  constructor(ort, session) {
    this.ort = ort;
    this.session = session;
    this.stateNames = session.inputNames.filter((n) => !BATCH_INPUTS.includes(n));
    this.paramNames = this.stateNames.filter((n) => !n.startsWith("m.") && !n.startsWith("v."));
    for (const name of this.stateNames) {
      if (!session.outputNames.includes(`new.${name}`)) throw new Error(`the step graph has no output new.${name}`);
    }
    this.state = null;
    this.step = 0;
  }

  /** A Trainer of the graph in `bytes` (an ArrayBuffer or Uint8Array), on WebAssembly. */
  static async create(ort, bytes, { graphOptimizationLevel = "all" } = {}) {
    const session = await ort.InferenceSession.create(bytes, { executionProviders: ["wasm"], graphOptimizationLevel });
    return new Trainer(ort, session);
  }

  /**
   * Start from `params`: {name: {data: Float32Array or numbers, dims: [..]}} for every parameter
   * of the graph (the initial weights), with zero moments, at step 0.
   */
  start(params) {
    const state = {};
    for (const name of this.paramNames) {
      const p = params[name];
      if (!p) throw new Error(`no initial value for ${name}`);
      const data = Float32Array.from(p.data);
      state[name] = new this.ort.Tensor("float32", data, p.dims);
      state[`m.${name}`] = new this.ort.Tensor("float32", new Float32Array(data.length), p.dims);
      state[`v.${name}`] = new this.ort.Tensor("float32", new Float32Array(data.length), p.dims);
    }
    this.state = state;
    this.step = 0;
  }

  /**
   * One update on a batch: `idx` and `targets` the batch's ids (numbers or a BigInt64Array, row after row),
   * `dims` [batch, block], `lr` this step's learning rate. Returns {step, loss, gradNorm}: the
   * loss of the weights before the update, as the server's train_step reports it.
   */
  async train(idx, targets, dims, lr) {
    if (!this.state) throw new Error("start(params) first");
    const ids = (values) => new this.ort.Tensor("int64", values instanceof BigInt64Array ? values : BigInt64Array.from(values, (v) => BigInt(v)), dims);
    const feeds = {
      ...this.state,
      idx: ids(idx),
      targets: ids(targets),
      lr: new this.ort.Tensor("float32", Float32Array.of(lr), []),
      step: new this.ort.Tensor("int64", BigInt64Array.of(BigInt(this.step)), []),
    };
    const out = await this.session.run(feeds);
    const next = {};
    for (const name of this.stateNames) next[name] = out[`new.${name}`];
    this.state = next;
    const result = { step: this.step, loss: out.loss.data[0], gradNorm: out.grad_norm.data[0] };
    this.step += 1;
    return result;
  }

  /** The current weights: {name: Float32Array}. */
  params() {
    return Object.fromEntries(this.paramNames.map((name) => [name, this.state[name].data]));
  }
}
