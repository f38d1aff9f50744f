// Dark charts for the dark theme (static/style.css, prefers-color-scheme: dark). The figures
// come from the server in light colours; while dark is active, each chart gets dark paper and
// plot backgrounds, font, grid and zero lines (colour bars and axis titles follow the font),
// and gets its own colours back when the preference turns light. Data colours are never
// touched. Applied after every draw (Plotly's "plotly_afterplot": Dash redrawing a figure
// brings the light colours back) and when the preference changes. The relayout is skipped
// when the chart already has the colours it should, so the draw it causes stops there.
(function () {
  "use strict";
  var DARK = {
    paper: "#181d27", // the cards' surface (--surface)
    plot: "#181d27",
    font: "#e6e9ef", // --ink
    grid: "#343c4d",
    zero: "#5b6578",
    line: "#6b7588",
    legend: "rgba(0,0,0,0)",
    modebar: "#a9b1c1",
    modebarActive: "#e6e9ef",
  };
  var query = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  var KEY = "_tokenshapeLight"; // on each chart: the light values a dark relayout replaced

  function dark() {
    return !!(query && query.matches);
  }

  function axes(gd) {
    var full = gd._fullLayout || {};
    return Object.keys(full).filter(function (k) { return /^[xy]axis\d*$/.test(k); });
  }

  // The dark value of every layout attribute the theme sets, for this chart's axes.
  function wanted(gd) {
    var update = {
      paper_bgcolor: DARK.paper,
      plot_bgcolor: DARK.plot,
      "font.color": DARK.font,
      "legend.bgcolor": DARK.legend,
      "modebar.bgcolor": "rgba(0,0,0,0)",
      "modebar.color": DARK.modebar,
      "modebar.activecolor": DARK.modebarActive,
    };
    axes(gd).forEach(function (a) {
      update[a + ".gridcolor"] = DARK.grid;
      update[a + ".zerolinecolor"] = DARK.zero;
      update[a + ".linecolor"] = DARK.line;
      update[a + ".tickcolor"] = DARK.line;
    });
    return update;
  }

  function get(obj, path) {
    return path.split(".").reduce(function (o, k) { return o == null ? undefined : o[k]; }, obj);
  }

  function apply(gd) {
    var Plotly = window.Plotly;
    if (!Plotly || !gd.layout || !gd._fullLayout) return;
    var target = wanted(gd);
    var update = {};
    if (dark()) {
      var saved = gd[KEY] || {};
      Object.keys(target).forEach(function (path) {
        var now = get(gd.layout, path);
        if (now === target[path]) return; // already dark: nothing to do, so no loop
        // The figure's own value (a fresh figure's, after a redraw); undefined, plotly's
        // default, is restored as null.
        saved[path] = now === undefined ? null : now;
        update[path] = target[path];
      });
      gd[KEY] = saved;
    } else if (gd[KEY]) {
      var light = gd[KEY];
      delete gd[KEY];
      Object.keys(light).forEach(function (path) {
        // Only what the theme set: a redraw since then brought the figure's own already.
        if (get(gd.layout, path) === target[path]) update[path] = light[path];
      });
    }
    if (Object.keys(update).length) Plotly.relayout(gd, update);
  }

  function watch(gd) {
    // Once per event emitter: Plotly.newPlot purges a chart's listeners and makes a new one.
    if (!gd._ev || gd._tokenshapeEv === gd._ev || typeof gd.on !== "function") return;
    gd._tokenshapeEv = gd._ev;
    // Every draw, Dash's included: a figure drawn anew comes in its light colours again.
    gd.on("plotly_afterplot", function () { apply(gd); });
    apply(gd);
  }

  function scan() {
    var charts = document.querySelectorAll(".js-plotly-plot");
    for (var i = 0; i < charts.length; i++) watch(charts[i]);
  }

  function all() {
    var charts = document.querySelectorAll(".js-plotly-plot");
    for (var i = 0; i < charts.length; i++) apply(charts[i]);
  }

  // Charts appear as Dash renders pages: watch each once, when it first shows.
  new MutationObserver(scan).observe(document.documentElement, { childList: true, subtree: true });
  if (query) {
    if (query.addEventListener) query.addEventListener("change", all);
    else if (query.addListener) query.addListener(all); // older Safari
  }
})();
