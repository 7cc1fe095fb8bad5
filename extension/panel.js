// nbgrad panel: the front end of nbgrad.notebook.widgets.NbgradPanel (an anywidget ES module).
// The kernel sends finished HTML per tab (the graph tab holds graphviz's SVG, whose <g> elements
// carry the snapshot's keys as ids) and `graph`: per id, a title, detail lines and next ids.
// Here: tabs, hover details, click to select (synced back as `selected`), double-click on a node
// to collapse / expand everything upstream of it, and folding the panel to its header.

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// a node drawn once per use has ids "key~1", "key~2", ...: they all describe "key"
const base = (id) => (id || "").split("~")[0];

function upstream(graph, key) {
  // every node reachable through `next` from key (its inputs' history), key excluded
  const seen = new Set();
  const stack = [...((graph.nodes[key] || {}).next || [])];
  while (stack.length) {
    const k = stack.pop();
    if (seen.has(k)) continue;
    seen.add(k);
    for (const n of ((graph.nodes[k] || {}).next || [])) stack.push(n);
  }
  return seen;
}

function render({ model, el: root }) {
  const panel = el("div", "nbgrad-panel");
  const header = el("div", "nbgrad-header");
  const fold = el("button", "nbgrad-fold");
  const summary = el("span", "nbgrad-summary");
  const tabbar = el("div", "nbgrad-tabs");
  header.append(fold, summary, tabbar);
  const body = el("div", "nbgrad-body");
  const details = el("div", "nbgrad-details");
  panel.append(header, body, details);
  root.append(panel);
  const collapsedNodes = new Set();
  let graphCache = null;
  function graphOf() {
    // `graph` arrives as one JSON string (cheaper for the kernel to sync than a nested dict)
    const raw = model.get("graph") || "{}";
    if (!graphCache || graphCache.raw !== raw) {
      let parsed = {};
      try { parsed = JSON.parse(raw); } catch (e) { parsed = {}; }
      graphCache = { raw, value: parsed };
    }
    return graphCache.value;
  }

  function svgElements() {
    return body.querySelectorAll("svg g.node, svg g.edge");
  }

  function showDetails(key, sticky) {
    const info = (graphOf().nodes || {})[base(key)];
    details.replaceChildren();
    if (!info) { details.classList.remove("nbgrad-visible"); return; }
    details.append(el("div", "nbgrad-details-title", info.title));
    for (const line of info.details || []) details.append(el("div", "nbgrad-details-line", line));
    if (sticky) details.append(el("div", "nbgrad-details-hint",
      info.kind === "node" ? "double-click: collapse / expand its inputs" : ""));
    details.classList.add("nbgrad-visible");
  }

  function applyCollapse() {
    const graph = graphOf();
    const hidden = new Set();
    for (const k of collapsedNodes) for (const u of upstream(graph, k)) hidden.add(u);
    // a node stays visible if a visible, non-collapsed path still needs it: keep it simple and
    // hide exactly the upstream sets, then hide edges touching hidden nodes
    for (const g of body.querySelectorAll("svg g.node")) {
      g.classList.toggle("nbgrad-hidden", hidden.has(base(g.id)));
      g.classList.toggle("nbgrad-collapsed", collapsedNodes.has(g.id));
    }
    for (const g of body.querySelectorAll("svg g.edge")) {
      const t = (g.querySelector("title") || {}).textContent || "";
      const [a, b] = t.split("->");
      g.classList.toggle("nbgrad-hidden",
        hidden.has(base((a || "").trim())) || hidden.has(base((b || "").trim())));
    }
  }

  function select(key) {
    for (const g of body.querySelectorAll("svg g.nbgrad-selected")) g.classList.remove("nbgrad-selected");
    if (key) {
      const g = body.querySelector(`svg g[id="${CSS.escape(key)}"]`);
      if (g) g.classList.add("nbgrad-selected");
    }
    showDetails(key, true);
  }

  function wireGraph() {
    for (const g of body.querySelectorAll("svg g.node")) {
      g.addEventListener("mouseenter", () => showDetails(g.id, false));
      g.addEventListener("mouseleave", () => showDetails(model.get("selected"), true));
      g.addEventListener("click", (ev) => {
        ev.stopPropagation();
        const key = model.get("selected") === g.id ? "" : g.id;
        model.set("selected", key);
        model.save_changes();
        select(key);
      });
      g.addEventListener("dblclick", (ev) => {
        ev.stopPropagation();
        if (collapsedNodes.has(g.id)) collapsedNodes.delete(g.id); else collapsedNodes.add(g.id);
        applyCollapse();
      });
    }
    for (const tr of body.querySelectorAll("tr[data-key]")) {
      tr.addEventListener("mouseenter", () => showDetails(tr.dataset.key, false));
    }
  }

  function draw() {
    const tabs = model.get("tabs") || {};
    const order = model.get("tab_order") || Object.keys(tabs);
    let active = model.get("active");
    if (!(active in tabs)) active = order[0];
    summary.textContent = model.get("summary");
    const collapsed = model.get("collapsed");
    panel.classList.toggle("nbgrad-folded", collapsed);
    fold.textContent = collapsed ? "\u25b8" : "\u25be";
    fold.title = collapsed ? "show the panel" : "fold the panel";
    tabbar.replaceChildren();
    for (const name of order) {
      const b = el("button", "nbgrad-tab" + (name === active ? " nbgrad-active" : "") +
        (name === "Error" ? " nbgrad-tab-error" : ""), name);
      b.addEventListener("click", () => { model.set("active", name); model.save_changes(); });
      tabbar.append(b);
    }
    body.innerHTML = tabs[active] || "";
    body.dataset.tab = active;
    wireGraph();
    applyCollapse();
    select(model.get("selected"));
    // no SVG from the kernel: lay the DOT out here (layout.js), then wire the new elements
    nbgradLayout(model, body).then((ok) => {
      if (ok) { wireGraph(); applyCollapse(); select(model.get("selected")); }
    });
  }

  fold.addEventListener("click", () => {
    model.set("collapsed", !model.get("collapsed"));
    model.save_changes();
  });
  body.addEventListener("click", () => {
    if (model.get("selected")) { model.set("selected", ""); model.save_changes(); select(""); }
  });
  model.on("change:tabs", draw);
  model.on("change:active", draw);
  model.on("change:collapsed", draw);
  model.on("change:summary", draw);
  model.on("change:graph", draw);
  model.on("change:dot", draw);
  draw();
  return () => { root.replaceChildren(); };
}

export default { render };
