// coordctl console: live pages over server-sent events, no build step.
// The server sends the page's live region whenever it changed; it is swapped in
// unless the operator is typing in one of its forms (then a note says so and
// the next update after they leave the field is applied).
(function () {
  "use strict";
  var region = document.getElementById("live");
  if (!region || !region.dataset.live || !window.EventSource) return;
  var state = document.getElementById("live-state");
  var at = document.getElementById("live-at");
  var paused = document.getElementById("live-paused");
  var pending = null;

  function editing() {
    var el = document.activeElement;
    if (el && region.contains(el) && (el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA")) return true;
    var inputs = region.querySelectorAll("input[name=reason]");
    for (var i = 0; i < inputs.length; i++) if (inputs[i].value !== "") return true;
    return false;
  }
  function apply() {
    if (pending === null) return;
    if (editing()) { paused.hidden = false; return; }
    region.innerHTML = pending;
    pending = null;
    paused.hidden = true;
    at.textContent = new Date().toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  }
  var es = new EventSource("/live?path=" + encodeURIComponent(region.dataset.live));
  es.addEventListener("update", function (ev) { pending = ev.data; apply(); });
  es.onopen = function () { state.className = "dot on"; };
  es.onerror = function () { state.className = "dot off"; };
  document.addEventListener("focusout", function () { setTimeout(apply, 0); });
})();
