// nbgrad: the panel's graph laid out in the browser, with viz.js (Graphviz compiled to
// WebAssembly, extension/viz.js, MIT). The kernel sends viz.js once per page over a widget's comm
// when a panel first asks (no network, nothing for the kernel to lay out); the Graph tab shows
// the text tree until the SVG is in. This file is prepended to panel.js (one ES module).

function nbgradVizInstance(model) {
  const g = globalThis;
  if (!g.__nbgradViz) {
    g.__nbgradViz = new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no answer from the kernel")), 30000);
      const onMsg = (msg) => {
        if (!msg || msg.type !== "viz") return;
        clearTimeout(timer);
        model.off("msg:custom", onMsg);
        if (!msg.code) { reject(new Error("viz.js is missing")); return; }
        const url = URL.createObjectURL(new Blob([msg.code], { type: "text/javascript" }));
        import(url).then((m) => m.instance()).then(resolve, reject)
          .finally(() => URL.revokeObjectURL(url));
      };
      model.on("msg:custom", onMsg);
      model.send({ type: "viz" });
    });
    g.__nbgradViz.catch(() => { g.__nbgradViz = null; });  // a later panel may try again
  }
  return g.__nbgradViz;
}

const nbgradLaidOut = new WeakMap(); // model -> {dot, svg}: a tab switch costs no new layout

// Lay out `model.dot` into the Graph tab's placeholder (if it has one). Resolves to true when an
// SVG was put in; tells the kernel once per panel whether the browser could lay out.
async function nbgradLayout(model, body) {
  const host = body.querySelector('.nbgrad-svg[data-layout="browser"]');
  const dot = model.get("dot");
  if (!host || !dot) return false;
  let done = nbgradLaidOut.get(model);
  if (!done || done.dot !== dot) {
    try {
      const viz = await nbgradVizInstance(model);
      done = { dot, svg: viz.renderString(dot, { format: "svg" }), told: done && done.told };
    } catch (e) {
      if (!(done && done.told)) model.send({ type: "rendered", ok: false });
      nbgradLaidOut.set(model, { dot, svg: null, told: true });
      return false;
    }
    nbgradLaidOut.set(model, done);
  }
  if (!done.svg || !host.isConnected) return false;
  const i = done.svg.indexOf("<svg");
  host.innerHTML = i >= 0 ? done.svg.slice(i) : done.svg;
  if (!done.told) { done.told = true; model.send({ type: "rendered", ok: true }); }
  return true;
}
