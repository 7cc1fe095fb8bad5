// nbgrad panel: the front end of nbgrad.notebook.widgets.NbgradPanel (an anywidget ES module).
// The kernel sends finished HTML per tab (the graph tab holds graphviz's SVG, whose <g> elements
// carry the snapshot's keys as ids) and `graph`: per id, a title, detail lines and next ids.
// Here: tabs, hover details, click to select (synced back as `selected`), double-click on a node
// to collapse / expand everything upstream of it, folding the panel to its header, folding a
// module's cluster to one box (synced back as `folded`: the kernel lays the graph out again),
// expanding a repeated sub-graph drawn once ("50 x ...", synced back as `expanded`), drawing
// the earlier cells' graphs on demand (the "show" button, synced back as `earlier_shown`),
// and fitting the graph to the output width with zoom and pan.

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// Retired panels (their static copy, no widget) have an "interact" button: a click asks the
// kernel, through a panel still live on the page (the loader keeps them in __nbgradLive), to
// show that panel as a widget again. Installed once per page, with the panel's code.
if (!globalThis.__nbgradWake) {
  globalThis.__nbgradWake = true;
  document.addEventListener("click", (ev) => {
    const b = ev.target && ev.target.closest && ev.target.closest("[data-nbgrad-wake]");
    if (!b) return;
    ev.preventDefault();
    ev.stopPropagation();
    const live = [...(globalThis.__nbgradLive || [])];
    if (!live.length) {
      b.title = "no live panel of a running kernel on this page: run a cell, then click again";
      return;
    }
    live[live.length - 1].send({ type: "wake", panel: b.dataset.nbgradWake });
    b.disabled = true;
    b.textContent = "waking\u2026";
    setTimeout(() => {  // no answer (another kernel drew it, or it is too old): say so
      if (!b.isConnected) return;
      b.disabled = false;
      b.textContent = "interact";
      b.title = "the kernel did not answer: it may still be busy, or it is not the kernel " +
        "that drew this panel";
    }, 30000);
  }, true);
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

// The graph fits the output width by default; zoom (buttons, ctrl + wheel) shows it at a scale of
// its natural size, and dragging pans it.
function viewControls(body) {
  const bar = el("div", "nbgrad-zoom");
  const out = el("button", "nbgrad-zoom-out", "\u2212");
  const inn = el("button", "nbgrad-zoom-in", "+");
  const fit = el("button", "nbgrad-zoom-fit", "fit width");
  const one = el("button", "nbgrad-zoom-one", "100%");
  out.title = "zoom out"; inn.title = "zoom in (ctrl + wheel)";
  fit.title = "fit the graph to the output width"; one.title = "natural size";
  bar.append(out, inn, fit, one);
  let zoom = null;  // null: fit to width
  const svgOf = () => body.querySelector(".nbgrad-svg svg");
  function natural(svg) {
    const vb = svg.viewBox && svg.viewBox.baseVal;
    return vb && vb.width ? vb.width * 4 / 3 : svg.getBBox().width;  // pt -> px
  }
  function apply() {
    const svg = svgOf();
    if (!svg) { bar.style.display = "none"; return; }
    bar.style.display = "";
    svg.removeAttribute("height");
    if (zoom === null) {
      // fit = shrink only: a small graph stays at its natural size (enlarged, its lower nodes
      // would fall below the panel's 560 px)
      svg.style.width = "100%";
      svg.style.maxWidth = natural(svg) + "px";
      svg.style.height = "auto";
    } else {
      svg.style.maxWidth = "none";
      svg.style.width = Math.round(natural(svg) * zoom) + "px";
      svg.style.height = "auto";
    }
    svg.setAttribute("width", svg.style.width);
    fit.classList.toggle("nbgrad-active", zoom === null);
  }
  function reveal() {
    // the graph's key nodes (drawn red: stale, failing, NaN) in view in the panel's body
    const svg = svgOf();
    if (!svg) return;
    const key = svg.querySelector('g.node [stroke="#d00000"]');
    if (!key) return;
    const box = key.getBoundingClientRect(), view = body.getBoundingClientRect();
    if (!box.height || (box.top >= view.top && box.bottom <= view.bottom)) return;
    body.scrollTop += box.top - view.top - Math.max(0, (view.height - box.height) / 2);
  }
  function current() {
    const svg = svgOf();
    return svg ? svg.getBoundingClientRect().width / natural(svg) : 1;
  }
  function setZoom(z) { zoom = z === null ? null : Math.min(8, Math.max(0.1, z)); apply(); }
  out.addEventListener("click", (e) => { e.stopPropagation(); setZoom(current() / 1.25); });
  inn.addEventListener("click", (e) => { e.stopPropagation(); setZoom(current() * 1.25); });
  fit.addEventListener("click", (e) => { e.stopPropagation(); setZoom(null); });
  one.addEventListener("click", (e) => { e.stopPropagation(); setZoom(1); });
  body.addEventListener("wheel", (e) => {
    if (!e.ctrlKey || !svgOf()) return;
    e.preventDefault();
    setZoom(current() * (e.deltaY < 0 ? 1.1 : 1 / 1.1));
  }, { passive: false });
  let drag = null;
  body.addEventListener("mousedown", (e) => {
    if (e.button !== 0 || !svgOf() || e.target.closest("g.node")) return;
    drag = { x: e.clientX, y: e.clientY, left: body.scrollLeft, top: body.scrollTop, moved: false };
  });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    body.scrollLeft = drag.left - dx;
    body.scrollTop = drag.top - dy;
  });
  window.addEventListener("mouseup", () => {
    if (drag && drag.moved) body.dataset.panned = "1";
    drag = null;
  });
  return { bar, apply, reveal };
}

function render({ model, el: root }) {
  const panel = el("div", "nbgrad-panel");
  const header = el("div", "nbgrad-header");
  const fold = el("button", "nbgrad-fold");
  const summary = el("span", "nbgrad-summary");
  const tabbar = el("div", "nbgrad-tabs");
  header.append(fold, summary, tabbar);
  const body = el("div", "nbgrad-body");
  const view = viewControls(body);
  const details = el("div", "nbgrad-details");
  panel.append(header, view.bar, body, details);
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

  function setFolded(path, on) {
    const now = (model.get("folded") || []).filter((p) => p !== path);
    if (on) now.push(path);
    model.set("folded", now);
    model.save_changes();
  }

  function wireModules() {
    // a module's cluster: click its title to fold it to one box; click the box to expand it
    const modules = graphOf().modules || {};
    for (const g of body.querySelectorAll("svg g.cluster")) {
      const path = modules[g.id];
      if (!path) continue;
      g.classList.add("nbgrad-module");
      const title = g.querySelector("text");
      if (!title) continue;
      title.addEventListener("click", (ev) => { ev.stopPropagation(); setFolded(path, true); });
      const tip = g.querySelector(":scope > title");  // graphviz's tooltip: the cluster id
      if (tip) tip.textContent = `${path}: click its title to fold it to one box`;
    }
  }

  function setExpanded(key, on) {
    const now = (model.get("expanded") || []).filter((k) => k !== key);
    if (on) now.push(key);
    model.set("expanded", now);
    model.save_changes();
  }

  function wireRepeats() {
    // a loop body drawn once ("50 x ..."): click its title to draw every copy; click the title
    // of the expanded cluster to fold it again
    const reps = graphOf().repeats || {};
    for (const g of body.querySelectorAll("svg g.cluster")) {
      const rep = reps[g.id];
      if (!rep) continue;
      const [key, expanded] = rep;
      g.classList.add("nbgrad-repeat");
      const title = g.querySelector("text");
      if (!title) continue;
      title.classList.add("nbgrad-repeat-title");
      title.addEventListener("click", (ev) => { ev.stopPropagation(); setExpanded(key, !expanded); });
      const tip = g.querySelector(":scope > title");
      if (tip) tip.textContent = expanded ? "click the title to draw one copy"
        : "click the title to draw every copy";
    }
  }

  function wireGraph() {
    wireModules();
    wireRepeats();
    for (const g of body.querySelectorAll("svg g.node")) {
      const info = (graphOf().nodes || {})[base(g.id)];
      if (info && info.kind === "module") {
        g.classList.add("nbgrad-module-box");
        g.addEventListener("click", (ev) => { ev.stopPropagation(); setFolded(info.path, false); });
        g.addEventListener("mouseenter", () => showDetails(g.id, false));
        continue;
      }
      g.addEventListener("mouseenter", () => showDetails(g.id, false));
      // leaving a node keeps its details until another is hovered or selected: hiding them would
      // change the panel's height, re-fit the graph under the pointer, and hover it again
      g.addEventListener("mouseleave", () => {
        if (model.get("selected")) showDetails(model.get("selected"), true);
      });
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
    for (const b of body.querySelectorAll(".nbgrad-show-earlier")) {
      // "3 earlier graphs: loss, y, c — show": the kernel draws them in this panel (or hides them)
      b.addEventListener("click", (ev) => {
        ev.stopPropagation();
        b.disabled = true;
        model.set("earlier_shown", !model.get("earlier_shown"));
        model.save_changes();
      });
    }
    for (const b of body.querySelectorAll(".nbgrad-values-toggle")) {
      // values mode in this panel: data and .grad in the boxes (the kernel draws it again)
      b.addEventListener("click", (ev) => {
        ev.stopPropagation();
        b.disabled = true;
        model.set("values_shown", !model.get("values_shown"));
        model.save_changes();
      });
    }
    for (const b of body.querySelectorAll(".nbgrad-step-open, .nbgrad-step-ctl")) {
      // "step through loss.backward()" and the Step tab's controls: the kernel walks the engine
      b.addEventListener("click", (ev) => {
        ev.stopPropagation();
        b.disabled = true;
        model.send({ type: "step", op: b.dataset.op || "", name: b.dataset.name || "" });
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
    panel.classList.toggle("nbgrad-theme-projector", model.get("theme") === "projector");
    const scrolled = body.dataset.tab === active ? body.scrollTop : null;
    body.innerHTML = tabs[active] || "";
    body.dataset.tab = active;
    view.apply();
    if (scrolled === null) requestAnimationFrame(view.reveal); else body.scrollTop = scrolled;
    wireGraph();
    applyCollapse();
    select(model.get("selected"));
    // no SVG from the kernel: lay the DOT out here (layout.js), then wire the new elements
    nbgradLayout(model, body).then((ok) => {
      if (ok) { view.apply(); wireGraph(); applyCollapse(); select(model.get("selected")); }
    });
  }

  fold.addEventListener("click", () => {
    model.set("collapsed", !model.get("collapsed"));
    model.save_changes();
  });
  body.addEventListener("click", () => {
    if (body.dataset.panned) { delete body.dataset.panned; return; }  // the end of a drag
    if (model.get("selected")) { model.set("selected", ""); model.save_changes(); select(""); }
  });
  model.on("change:tabs", draw);
  model.on("change:active", draw);
  model.on("change:collapsed", draw);
  model.on("change:summary", draw);
  model.on("change:graph", draw);
  model.on("change:theme", draw);
  model.on("change:dot", draw);
  draw();
  return () => { root.replaceChildren(); };
}

export default { render };
