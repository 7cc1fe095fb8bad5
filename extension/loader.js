// nbgrad panel loader: the `_esm` of every panel (an anywidget ES module). The widget state of
// every panel carries its `_esm`, and a saved notebook keeps one copy per panel; so each panel
// carries only this loader, and the panel's code (layout.js + panel.js, and panel.css) comes from
// the kernel once per page over a panel's comm. Until it is in (the kernel busy with Run All, or
// no kernel: a saved notebook's widget state), the panel shows its summary and its Graph tab as
// a picture, from the widget state. Every waiting panel asks; the first answer serves them all.
// Written short (widgets.py strips the comments and indentation): a saved notebook keeps this
// text once per live panel, so each byte here counts up to 8 times a notebook.

const G = globalThis;

// `content`: the tabs' HTML and the graph's details as raw-deflated JSON in base64, after its
// inflated length and a comma (a saved notebook keeps every panel's widget state: 4x less). The
// picture shown until the panel's code is in inflates it here; the code reads it synchronously
// (inflate.js). The last 16 are kept, by content.
const inflated = new Map();
function unpacked(model) {
  const raw = model.get("content") || "";
  let p = inflated.get(raw);
  if (!p) {
    p = raw ? new Response(new Blob([Uint8Array.from(atob(raw.slice(raw.indexOf(",") + 1)),
      (c) => c.charCodeAt(0))]).stream().pipeThrough(new DecompressionStream("deflate-raw"))).json()
      : Promise.resolve({ tabs: {} });
    inflated.set(raw, p);
    while (inflated.size > 16) inflated.delete(inflated.keys().next().value);
  }
  return p;
}

// the summary and the active tab (the Graph tab's SVG fitted to the output width), until the
// panel's code is in
function picture(model, el) {
  el.innerHTML = '<div class="nbgrad-panel nbgrad-waiting" style="font:12px sans-serif;' +
    'border:1px solid #ccc;border-radius:4px;padding:2px 6px 4px 6px;max-width:100%">' +
    '<div class="nbgrad-summary" style="font-weight:600"></div>' +
    '<div class="nbgrad-body" style="overflow:auto;max-height:560px"></div></div>';
  const box = el.firstChild, [head, body] = box.children;
  head.textContent = model.get("summary") || "";
  unpacked(model).then(({ tabs }) => {
    if (!box.isConnected) return;  // (the panel's code came first and drew it)
    body.innerHTML = tabs[model.get("active")] || tabs.Graph || "";
    for (const svg of body.querySelectorAll(".nbgrad-svg svg")) svg.style.cssText = "max-width:100%;height:auto";
  }, (e) => console.warn("nbgrad: the panel's content could not be read:", e));
}

// resolves to the panel's module once the code is in (from this model or any other)
function code(model) {
  let resolve;
  const S = G.__nbgradCode ||= { promise: new Promise((r) => { resolve = r; }), resolve };
  const onMsg = (msg) => {
    if (!msg || msg.type !== "code" || !msg.code || S.loading) return;
    S.loading = true;
    if (msg.css && !document.getElementById("nbgrad-panel-css")) {
      const style = document.head.appendChild(document.createElement("style"));
      style.id = "nbgrad-panel-css";
      style.textContent = msg.css;
    }
    const url = URL.createObjectURL(new Blob([msg.code], { type: "text/javascript" }));
    import(url).then((m) => S.resolve(m.default), (e) => {
      S.loading = false;
      console.warn("nbgrad: the panel's code did not load:", e);
    }).finally(() => URL.revokeObjectURL(url));
  };
  if (!S.module) {
    model.on("msg:custom", onMsg);
    try { model.send({ type: "code" }); } catch (e) { /* no kernel: the picture stays */ }
  }
  return S.promise.then((m) => { S.module = m; model.off("msg:custom", onMsg); return m; });
}

// models with a view on the page, newest last (the "interact" button of retired panels: a click
// listener installed by the panel's code)
const live = G.__nbgradLive ||= new Set();

function render({ model, el }) {
  live.add(model);
  const ready = G.__nbgradCode && G.__nbgradCode.module;
  let cleanup, gone;
  if (ready) cleanup = ready.render({ model, el });
  else {
    picture(model, el);
    code(model).then((m) => {
      if (gone) return;
      el.replaceChildren();
      cleanup = m.render({ model, el });
    });
  }
  return () => {
    gone = true;
    live.delete(model);
    if (typeof cleanup === "function") cleanup();
  };
}

export default { render };
