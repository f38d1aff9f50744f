// Every chart downloads as CSV: a button in each Plotly chart's mode bar (beside its own
// "download as PNG") writes the chart's data as drawn. Heat maps as a grid (one row per y bin,
// one column per x bin, the values the cells show); lines, bars and points in long form (one
// row per point: series, x, y). Added as Plotly draws each mode bar (it redraws it on updates).
(function () {
  "use strict";
  var TITLE = "Download data as CSV";

  function cell(value) {
    if (value === null || value === undefined) return "";
    var text = String(value);
    // Text a spreadsheet would run as a formula (a series named "=..." or "-x") gets a leading
    // ' (CSV injection); numbers, negative ones included, are written as they are.
    if (typeof value !== "number" && /^[=+\-@\t\r]/.test(text) && isNaN(Number(text))) {
      text = "'" + text;
    }
    return /[",\n\r]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
  }

  function values(array) {
    return array ? Array.prototype.slice.call(array) : [];
  }

  function rows(gd) {
    var grids = [], points = [];
    (gd.data || []).forEach(function (trace, t) {
      var name = trace.name || trace.type + " " + (t + 1);
      if (trace.type === "heatmap" && trace.z) {
        var z = values(trace.z).map(values);
        var xs = trace.x ? values(trace.x) : z[0].map(function (_, i) { return i; });
        var ys = trace.y ? values(trace.y) : z.map(function (_, j) { return j; });
        grids.push([name + ": y \\ x"].concat(xs));
        z.forEach(function (row, j) { grids.push([ys[j]].concat(row)); });
        grids.push([]);
        return;
      }
      var x = values(trace.x), y = values(trace.y);
      for (var i = 0; i < Math.max(x.length, y.length); i++) points.push([name, x[i], y[i]]);
    });
    return points.length ? grids.concat([["series", "x", "y"]], points) : grids;
  }

  function download(gd) {
    var text = rows(gd).map(function (r) { return r.map(cell).join(","); }).join("\r\n");
    var holder = gd.closest("[id]");
    var name = (holder && holder.id ? holder.id : "chart") + ".csv";
    var link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([text + "\r\n"], { type: "text/csv" }));
    link.download = name;
    document.body.appendChild(link);
    link.click();
    setTimeout(function () { URL.revokeObjectURL(link.href); link.remove(); }, 0);
  }

  function add() {
    var bars = document.querySelectorAll(".js-plotly-plot .modebar");
    for (var i = 0; i < bars.length; i++) {
      var bar = bars[i];
      if (bar.querySelector('[data-title="' + TITLE + '"]')) continue;
      var gd = bar.closest(".js-plotly-plot");
      var group = document.createElement("div");
      group.className = "modebar-group";
      var button = document.createElement("a");
      button.className = "modebar-btn";
      button.setAttribute("rel", "tooltip");
      button.setAttribute("data-title", TITLE);
      button.setAttribute("role", "button");
      button.setAttribute("aria-label", TITLE);
      button.setAttribute("tabindex", "0");
      button.textContent = "CSV";
      button.style.fontSize = "10px";
      button.style.fontWeight = "bold";
      button.addEventListener("click", download.bind(null, gd));
      button.addEventListener("keydown", function (gdNow, event) {
        if (event.key === "Enter" || event.key === " ") { event.preventDefault(); download(gdNow); }
      }.bind(null, gd));
      group.appendChild(button);
      bar.insertBefore(group, bar.firstChild);
    }
  }

  new MutationObserver(add).observe(document.documentElement, { childList: true, subtree: true });
})();
