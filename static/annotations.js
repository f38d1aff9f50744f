// Markers on every time chart: each note and engine-profile change in a chart's visible range
// is drawn as a thin dotted vertical line with a short label; hovering the label shows who,
// when and what. The list comes from GET /api/annotations (the page's session cookie is
// enough for a read; in open mode nothing is needed), for the chart's range and the URL's
// engine.
// - Which charts: every Plotly graph whose x axis is a date axis (as static/filterbar.js finds
//   them for drag-to-zoom). The axes are drawn in the zone the filter bar's data-tz names
//   (UTC on a page without the bar), so instants are turned into that zone's wall clock.
// - Dash replaces a figure (Plotly.react) when a callback redraws it, which drops the markers:
//   they are drawn again on plotly_afterplot. Drawing is itself a relayout, which fires
//   afterplot once more; that pass finds the markers already there and stops (no loop).
(function () {
  "use strict";
  var TAG = "tokenshape-note";
  var COLOR = "#c77d00";
  var TTL_MS = 30000;  // a list is reused this long for the same range (several charts, zooms)
  var cache = {}, cacheHref = window.location.href;

  // Zone arithmetic is filterbar.js's (window.tokenshapeTime), looked up when used: every
  // asset has loaded by the time a chart is drawn.
  function offset(ms, tz) { return window.tokenshapeTime.offset(ms, tz); }
  function instant(value, tz) { return window.tokenshapeTime.instant(value, tz); }

  // The wall-clock time ("2026-11-18 08:30:12") of the instant `ms` in `tz`: an axis value.
  function wall(ms, tz) {
    return new Date(ms + offset(ms, tz)).toISOString().replace("T", " ").slice(0, 19);
  }

  function zone() {
    var form = document.getElementById("filter-bar");
    return (form && form.getAttribute("data-tz")) || "UTC";
  }

  // Plotly reads a few tags and entities in annotation text: a note is text, never markup.
  function escape(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function notes(startMs, endMs) {
    if (window.location.href !== cacheHref) {  // another page or view: lists may be stale
      cache = {};
      cacheHref = window.location.href;
    }
    // Whole minutes outward, so charts of nearly the same range share one request.
    var s = Math.floor(startMs / 60000) * 60000, e = Math.ceil(endMs / 60000) * 60000 + 60000;
    var engine = new URL(window.location.href).searchParams.get("engine") || "";
    var key = s + "/" + e + "/" + engine;
    var hit = cache[key];
    if (hit && Date.now() - hit.at < TTL_MS) return hit.list;
    var url = "/api/annotations?limit=500&start=" + encodeURIComponent(new Date(s).toISOString()) +
      "&end=" + encodeURIComponent(new Date(e).toISOString()) +
      (engine ? "&engine=" + encodeURIComponent(engine) : "");
    var list = fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : []; })
      .catch(function () { return []; });
    cache[key] = { at: Date.now(), list: list };
    return list;
  }

  function ours(item) {
    return item && item.name === TAG;
  }

  function label(note) {
    var text = note.text.length > 28 ? note.text.slice(0, 27) + "…" : note.text;
    return escape(text);
  }

  function hover(note, tz) {
    var when = wall(Date.parse(note.at), tz).slice(0, 16) + " " + tz;
    var what = note.kind === "note" ? "note" : "profile change";
    return escape(note.author + " · " + when + " · " + what) + "<br>" + escape(note.text);
  }

  function draw(gd) {
    var layout = gd._fullLayout;
    var axis = layout && layout.xaxis;
    if (!axis || axis.type !== "date" || !axis.range || !window.Plotly) return;
    var tz = zone();
    var a = instant(axis.range[0], tz), b = instant(axis.range[1], tz);
    if (a === null || b === null || a >= b) return;
    var ticket = (gd.__tokenshapeNotesTicket || 0) + 1;
    gd.__tokenshapeNotesTicket = ticket;
    notes(a, b).then(function (list) {
      if (gd.__tokenshapeNotesTicket !== ticket || !gd._fullLayout || !gd.layout) return;
      var inside = (Array.isArray(list) ? list : []).filter(function (n) {
        var t = Date.parse(n.at);
        return t >= a && t <= b;
      });
      var shapes = gd.layout.shapes || [], texts = gd.layout.annotations || [];
      var drawn = shapes.filter(ours).length, labelled = texts.filter(ours).length;
      var key = tz + "|" + inside.map(function (n) { return n.id; }).join(",");
      if (drawn === inside.length && labelled === inside.length &&
          (inside.length === 0 || gd.__tokenshapeNotesKey === key)) {
        gd.__tokenshapeNotesKey = key;
        return;  // already as wanted: the afterplot of our own relayout ends here
      }
      gd.__tokenshapeNotesKey = key;
      var keepShapes = shapes.filter(function (s) { return !ours(s); });
      var keepTexts = texts.filter(function (t) { return !ours(t); });
      var paper = gd._fullLayout.paper_bgcolor || "#fff";
      inside.forEach(function (n) {
        var x = wall(Date.parse(n.at), tz);
        keepShapes.push({
          type: "line", name: TAG, xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1,
          line: { color: COLOR, width: 1, dash: "dot" }, layer: "above",
        });
        keepTexts.push({
          name: TAG, x: x, xref: "x", y: 1, yref: "paper", xanchor: "left", yanchor: "top",
          xshift: 2, showarrow: false, text: label(n), hovertext: hover(n, tz),
          font: { size: 10, color: COLOR }, bgcolor: paper, opacity: 0.9,
        });
      });
      window.Plotly.relayout(gd, { shapes: keepShapes, annotations: keepTexts });
    });
  }

  function schedule(gd) {
    if (gd.__tokenshapeNotesTimer) return;
    gd.__tokenshapeNotesTimer = setTimeout(function () {
      gd.__tokenshapeNotesTimer = null;
      draw(gd);
    }, 30);
  }

  function hook() {
    var graphs = document.querySelectorAll(".js-plotly-plot");
    for (var i = 0; i < graphs.length; i++) {
      var gd = graphs[i];
      if (gd.__tokenshapeNotes || typeof gd.on !== "function") continue;
      gd.__tokenshapeNotes = true;
      gd.on("plotly_afterplot", schedule.bind(null, gd));
      schedule(gd);
    }
  }

  new MutationObserver(hook).observe(document.documentElement, { childList: true, subtree: true });
  document.addEventListener("DOMContentLoaded", hook);
})();
