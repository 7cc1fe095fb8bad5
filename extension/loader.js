// nbgrad panel loader: the `_esm` of every panel (an anywidget ES module). The widget state of
// every panel carries its `_esm`, and a saved notebook keeps one copy per panel; so each panel
// carries only this loader, and the panel's code (layout.js + panel.js, and panel.css) comes from
// the kernel once per page over a panel's comm. Until it is in (the kernel busy with Run All, or
// no kernel: a saved notebook's widget state), the panel shows its summary and its Graph tab as
// a picture, from the widget state. Every waiting panel asks; the first answer serves them all.

const G = globalThis;

function nbgradPicture(model, el) {
  const box = document.createElement("div");
  box.className = "nbgrad-panel nbgrad-waiting";
  box.style.cssText = "font:12px sans-serif;border:1px solid #ccc;border-radius:4px;" +
    "padding:2px 6px 4px 6px;max-width:100%";
  const head = document.createElement("div");
  head.className = "nbgrad-summary";
  head.style.fontWeight = "600";
  head.textContent = model.get("summary") || "";
  const body = document.createElement("div");
  body.className = "nbgrad-body";
  body.style.cssText = "overflow:auto;max-height:560px";
  const tabs = model.get("tabs") || {};
  body.innerHTML = tabs[model.get("active")] || tabs.Graph || "";
  for (const svg of body.querySelectorAll(".nbgrad-svg svg")) {
    svg.style.maxWidth = "100%";  // fit the output width, never above its natural size
    svg.style.height = "auto";
  }
  box.append(head, body);
  el.replaceChildren(box);
}

function nbgradCode(model) {
  // resolves to the panel's module once the code is in (from this model or any other)
  if (!G.__nbgradCode) {
    let resolve;
    G.__nbgradCode = { promise: new Promise((r) => { resolve = r; }), resolve, loading: false };
  }
  const state = G.__nbgradCode;
  const onMsg = (msg) => {
    if (!msg || msg.type !== "code" || !msg.code || state.loading) return;
    state.loading = true;
    if (msg.css && !document.getElementById("nbgrad-panel-css")) {
      const style = document.createElement("style");
      style.id = "nbgrad-panel-css";
      style.textContent = msg.css;
      document.head.append(style);
    }
    const url = URL.createObjectURL(new Blob([msg.code], { type: "text/javascript" }));
    import(url).then((m) => state.resolve(m.default), (e) => {
      state.loading = false;
      console.warn("nbgrad: the panel's code did not load:", e);
    }).finally(() => URL.revokeObjectURL(url));
  };
  if (!state.module) {
    model.on("msg:custom", onMsg);
    try { model.send({ type: "code" }); } catch (e) { /* no kernel: the picture stays */ }
  }
  return state.promise.then((m) => { state.module = m; model.off("msg:custom", onMsg); return m; });
}

if (!G.__nbgradLive) G.__nbgradLive = new Set(); // models with a view on the page, newest last
// (the "interact" button of retired panels: a click listener installed by the panel's code)

function render({ model, el }) {
  G.__nbgradLive.add(model);
  const ready = G.__nbgradCode && G.__nbgradCode.module;
  let cleanup = null;
  let gone = false;
  if (ready) {
    cleanup = ready.render({ model, el });
  } else {
    nbgradPicture(model, el);
    nbgradCode(model).then((m) => {
      if (gone) return;
      el.replaceChildren();
      cleanup = m.render({ model, el });
    });
  }
  return () => {
    gone = true;
    G.__nbgradLive.delete(model);
    if (typeof cleanup === "function") cleanup();
  };
}

export default { render };
