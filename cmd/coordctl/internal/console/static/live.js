// coordctl console: live pages over server-sent events, no build step.
// The server sends only what changed: the whole region ("full"), the parts
// whose HTML changed ("parts", by the key of their <!--p:KEY--> marker), or
// "ok" (nothing changed: the page is confirmed current). "stale" says the page
// could not be read: what is shown stays, marked stale with the error. While
// the operator types in a form or has rows ticked, updates wait (the bar says
// so) and are applied, in order, once they are done.
(function () {
  "use strict";
  var region = document.getElementById("live");
  if (!region || !region.dataset.live || !window.EventSource) return;
  var bar = document.getElementById("livebar");
  var state = document.getElementById("live-state");
  var label = document.getElementById("live-label");
  var at = document.getElementById("live-at");
  var paused = document.getElementById("live-paused");
  var staleBox = document.getElementById("live-stale");
  var queue = [];

  function now() { return new Date().toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z"); }
  function editing() {
    var el = document.activeElement;
    if (el && region.contains(el) && (el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA")) return true;
    var inputs = region.querySelectorAll("input[name=reason], input[type=checkbox][name=id]");
    for (var i = 0; i < inputs.length; i++) {
      if (inputs[i].type === "checkbox" ? inputs[i].checked : inputs[i].value !== "") return true;
    }
    return false;
  }
  function setState(cls, text) {
    state.className = "dot " + cls;
    label.textContent = text;
    bar.className = "livebar " + cls;
  }
  function fresh() {
    staleBox.hidden = true;
    region.classList.remove("stale-region");
    setState("on", "live");
    at.textContent = now();
  }
  // markers maps each part's key to its opening comment node.
  function markers() {
    var out = {};
    var walker = document.createTreeWalker(region, NodeFilter.SHOW_COMMENT);
    for (var n = walker.nextNode(); n; n = walker.nextNode()) {
      if (n.data.indexOf("p:") === 0) out[n.data.slice(2)] = n;
    }
    return out;
  }
  function replacePart(start, html) {
    var n = start.nextSibling;
    while (n && !(n.nodeType === 8 && n.data === "/p")) { var next = n.nextSibling; n.parentNode.removeChild(n); n = next; }
    var t = document.createElement("template");
    t.innerHTML = html;
    start.parentNode.insertBefore(t.content, n);
  }
  function apply(ev) {
    if (ev.type === "full") region.innerHTML = ev.data;
    if (ev.type === "parts") {
      var parts = JSON.parse(ev.data), ms = markers();
      for (var k in parts) {
        if (!ms[k]) { location.reload(); return; }
        replacePart(ms[k], parts[k]);
      }
    }
    fresh();
  }
  function drain() {
    if (editing()) {
      paused.hidden = queue.length === 0;
      paused.textContent = " · updates paused while you type or select (" + queue.length + " waiting)";
      return;
    }
    while (queue.length) apply(queue.shift());
    paused.hidden = true;
  }
  function onUpdate(ev) { queue.push({ type: ev.type, data: ev.data }); drain(); }
  var es = new EventSource("/live?path=" + encodeURIComponent(region.dataset.live) + "&digest=" + encodeURIComponent(region.dataset.digest || "") +
    "&skeleton=" + encodeURIComponent(region.dataset.skeleton || ""));
  es.addEventListener("full", onUpdate);
  es.addEventListener("parts", onUpdate);
  es.addEventListener("ok", function () { if (queue.length === 0) fresh(); else drain(); });
  es.addEventListener("stale", function (ev) {
    var d = JSON.parse(ev.data);
    staleBox.hidden = false;
    staleBox.textContent = "Updates paused: the page could not be read (" + d.status + "): " + d.error +
      " — what is shown is as of " + at.textContent + ", not current.";
    region.classList.add("stale-region");
    setState("off", "stale");
  });
  es.onopen = function () { setState("on", "live"); };
  es.onerror = function () {
    setState("off", "disconnected: what is shown is as of " + at.textContent);
    region.classList.add("stale-region");
  };
  region.addEventListener("change", function (e) {
    if (!e.target.hasAttribute || !e.target.hasAttribute("data-select-all")) return;
    var boxes = region.querySelectorAll("input[type=checkbox][name=id]");
    for (var i = 0; i < boxes.length; i++) boxes[i].checked = e.target.checked;
  });
  document.addEventListener("focusout", function () { setTimeout(drain, 0); });
  document.addEventListener("change", function () { setTimeout(drain, 0); });
})();
