// nbgrad: a graph laid out in the browser, with viz.js (Graphviz compiled to WebAssembly,
// extension/viz.js, MIT), for what the kernel could not lay out (past its time bound, or an SVG
// too big to sync): the kernel lays out every other graph itself, so a panel is a picture
// whatever the browser and the kernel are busy with. viz.js comes over a widget's comm, once per
// page, when a panel first needs it (no network); the Graph tab shows the text tree until then.
// This file is prepended to panel.js (one ES module).

function nbgradVizInstance(model) {
  // Every panel that needs viz.js asks through its own comm until one answer is in: a panel
  // retired (its comm closed) while the kernel was busy loses its answer, not the others'.
  const g = globalThis;
  if (!g.__nbgradViz) {
    const st = { done: false, loading: false };
    st.promise = new Promise((resolve, reject) => { st.resolve = resolve; st.reject = reject; });
    st.promise.catch(() => {});
    g.__nbgradViz = st;
  }
  const st = g.__nbgradViz;
  if (!st.done && !st.loading) {
    const onMsg = (msg) => {
      if (!msg || msg.type !== "viz") return;
      model.off("msg:custom", onMsg);
      if (st.done || st.loading) return;
      if (!msg.code) { st.reject(new Error("viz.js is missing")); return; }
      st.loading = true;
      const url = URL.createObjectURL(new Blob([msg.code], { type: "text/javascript" }));
      import(url).then((m) => m.instance()).then((v) => { st.done = true; st.resolve(v); },
        (e) => { st.loading = false; st.reject(e); })
        .finally(() => URL.revokeObjectURL(url));
    };
    model.on("msg:custom", onMsg);
    try { model.send({ type: "viz" }); } catch (e) { /* no kernel: the text tree stays */ }
  }
  return st.promise;
}

const nbgradTold = new WeakSet(); // models that told their kernel whether viz.js works here

function nbgradTell(model, ok) {
  if (nbgradTold.has(model)) return;
  nbgradTold.add(model);
  try { model.send({ type: "rendered", ok }); } catch (e) { /* no kernel: a saved notebook */ }
}

const nbgradLaidOut = new WeakMap(); // model -> {dot, svg}: a tab switch costs no new layout

// Lay out `model.dot` into the Graph tab's placeholder (if it has one). Resolves to true when an
// SVG was put in.
async function nbgradLayout(model, body) {
  const host = body.querySelector('.nbgrad-svg[data-layout="browser"]');
  const dot = model.get("dot");
  if (!host || !dot) return false;
  let done = nbgradLaidOut.get(model);
  if (!done || done.dot !== dot) {
    try {
      const viz = await nbgradVizInstance(model);
      done = { dot, svg: viz.renderString(dot, { format: "svg" }) };
    } catch (e) {
      console.warn("nbgrad: the browser could not lay the graph out:", e);
      nbgradTell(model, false);
      nbgradLaidOut.set(model, { dot, svg: null });
      return false;
    }
    nbgradLaidOut.set(model, done);
  }
  // the host may not be in the document yet (a view is rendered before it is attached): what
  // matters is that no later draw replaced it
  if (!done.svg || !body.contains(host)) return false;
  const i = done.svg.indexOf("<svg");
  host.innerHTML = i >= 0 ? done.svg.slice(i) : done.svg;
  host.removeAttribute("data-layout");
  host.dataset.laidOut = "browser";
  nbgradTell(model, true);
  return true;
}
