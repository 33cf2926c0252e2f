// Live updates: a page marked data-live=MS fetches its own live part
// (?partial=1) every MS milliseconds and swaps it in, unless the user is typing in
// one of its fields. Nothing else runs here; every page works without it.
(function () {
  "use strict";
  var main = document.getElementById("live");
  var state = document.getElementById("live-state");
  if (!main || !main.dataset.live) { return; }
  var every = Math.max(100, parseInt(main.dataset.live, 10) || 1000), failures = 0, stopped = false;
  function url() {
    var u = new URL(window.location.href);
    u.searchParams.delete("done");
    u.searchParams.set("partial", "1");
    var w = chartWidth();
    if (w) { u.searchParams.set("cw", String(w)); }
    return u.toString();
  }
  // chartWidth is the width, in CSS pixels, of the page's first chart's
  // column: the server draws the charts at it (?cw=), so that their text
  // keeps its size and their time axis gets the labels that fit.
  function chartWidth() {
    var svg = main.querySelector("figure.plot svg");
    if (!svg) { return 0; }
    return Math.round(svg.getBoundingClientRect().width);
  }
  // fitCharts redraws the charts alone (not the rest of the page, which
  // may be in use) when their column is not the width they were drawn at:
  // after the page loads and when the window is resized.
  function fitCharts() {
    var svg = main.querySelector("figure.plot svg"), w = chartWidth();
    if (!svg || !w || Math.abs(w - parseInt(svg.dataset.width, 10)) < 8) { return; }
    fetch(url(), { credentials: "same-origin", cache: "no-store" }).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (!html) { return; }
      var doc = new DOMParser().parseFromString(html, "text/html");
      var figs = doc.querySelectorAll("figure.plot[id]");
      for (var i = 0; i < figs.length; i++) {
        var old = document.getElementById(figs[i].id);
        if (old) { old.replaceWith(document.importNode(figs[i], true)); }
      }
    }).catch(function () {});
  }
  // utcTime writes a time as the charts and the clock do (render.go's clockFormat):
  // "2006-01-02 15:04:05 UTC", never the browser's local clock.
  function utcTime(d) {
    return d.toISOString().slice(0, 19).replace("T", " ") + " UTC";
  }
  function typing() {
    var a = document.activeElement;
    return a && main.contains(a) && (a.tagName === "INPUT" || a.tagName === "SELECT" || a.tagName === "TEXTAREA");
  }
  function tick() {
    if (stopped) { return; }
    if (document.hidden || typing()) { setTimeout(tick, every); return; }
    fetch(url(), { credentials: "same-origin", cache: "no-store" }).then(function (r) {
      if (r.status === 404 || r.status === 401 || r.status === 403) {
        stopped = true;
        state.textContent = "stopped updating (" + r.status + ")";
        return null;
      }
      if (!r.ok) { throw new Error("HTTP " + r.status); }
      return r.text();
    }).then(function (html) {
      if (html === null || html === undefined) { return; }
      if (!typing()) { main.innerHTML = html; }
      failures = 0;
      state.textContent = "live " + utcTime(new Date());
      main.dataset.updated = String(Date.now());
    }).catch(function (e) {
      failures++;
      state.textContent = "update failed (" + e.message + "), retrying";
    }).then(function () {
      if (!stopped) { setTimeout(tick, every * Math.min(1 + failures, 10)); }
    });
  }
  setTimeout(tick, every);
  fitCharts();
  var resized = null;
  window.addEventListener("resize", function () {
    clearTimeout(resized);
    resized = setTimeout(fitCharts, 250);
  });
})();

// Select all: a checkbox marked data-select-all=FORM checks or unchecks
// every task checkbox of that form (form=FORM) on the page. Without the
// script each row is still selected by hand.
(function () {
  "use strict";
  document.addEventListener("change", function (e) {
    var box = e.target;
    if (!box.dataset || !box.dataset.selectAll) { return; }
    var rows = document.querySelectorAll('input[type=checkbox][form="' + box.dataset.selectAll + '"]');
    for (var i = 0; i < rows.length; i++) { rows[i].checked = box.checked; }
  });
})();
