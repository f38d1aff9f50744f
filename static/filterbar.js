// The filter bar's time range, on every page that has one (#filter-bar):
// - its "from"/"to" fields become native date-time pickers (dcc.Input renders only text; the
//   value format, 2026-11-20T08:00, is the same);
// - typing or picking a time switches the window to custom, choosing a preset clears them, so
//   what is submitted is what the user sees;
// - dragging across a time chart sets the page's window (every chart, and the URL: Back
//   returns), as in Grafana; the axes are drawn in the zone the form's data-tz names, the URL
//   holds its own tz's wall clock (UTC without one);
// - times in: the server's zone, UTC or this browser's, remembered in localStorage;
// - auto-refresh: with refresh=N in the URL the page reloads every N seconds while visible;
// - the top bar's links carry the view (window, times, filters) to the other filtered pages.
// Delegated from the document and re-applied as Dash replaces the page's nodes on navigation.
(function () {
  "use strict";
  var FIELDS = ["filter-start", "filter-end"];

  function bar() {
    return document.getElementById("filter-bar");
  }

  // The zone's offset from UTC at the instant `ms`, in ms (wall clock minus UTC).
  function offset(ms, tz) {
    var parts = {};
    new Intl.DateTimeFormat("en-US", {
      timeZone: tz, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit",
    }).formatToParts(new Date(ms)).forEach(function (p) { parts[p.type] = p.value; });
    var wall = Date.UTC(+parts.year, +parts.month - 1, +parts.day, +parts.hour % 24,
      +parts.minute, +parts.second);
    return wall - Math.floor(ms / 1000) * 1000;
  }

  // The instant (ms) a wall-clock time ("2026-11-18 08:30:12.5" or "2026-11-18T08:30") in `tz`
  // names; null if it is not one.
  function instant(value, tz) {
    var m = String(value).match(/^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):?(\d{2})?:?(\d{2})?(\.\d+)?)?/);
    if (!m) return null;
    var wall = Date.UTC(+m[1], +m[2] - 1, +m[3], +(m[4] || 0), +(m[5] || 0), +(m[6] || 0),
      Math.round(parseFloat(m[7] || "0") * 1000));
    var ms = wall - offset(wall, tz);
    return wall - offset(ms, tz);  // again at the instant found: right across a DST change
  }

  // The wall-clock minute ("2026-11-18T13:30") of the instant `ms` in `tz`.
  function wallMinute(ms, tz) {
    return new Date(ms + offset(ms, tz)).toISOString().slice(0, 16);
  }

  // A wall-clock time in `from` as the same instant's wall-clock minute in `to`, rounded down
  // (start) or up (end).
  function convert(value, from, to, up) {
    var ms = instant(value, from);
    if (ms === null) return null;
    var minute = 60000;
    ms = up ? Math.ceil(ms / minute) * minute : Math.floor(ms / minute) * minute;
    return wallMinute(ms, to);
  }

  // The zone the URL's zone-less times are in: its tz, else UTC (links older than the switch).
  function urlZone(url) {
    return url.searchParams.get("tz") || "UTC";
  }

  function onRelayout(gd, event) {
    var form = bar();
    var axis = gd._fullLayout && gd._fullLayout.xaxis;
    if (!form || !axis || axis.type !== "date" || !event) return;
    var a = event["xaxis.range[0]"], b = event["xaxis.range[1]"];
    if (a === undefined && event["xaxis.range"]) {
      a = event["xaxis.range"][0];
      b = event["xaxis.range"][1];
    }
    if (a === undefined || b === undefined) return;  // autorange, a y zoom, a legend click
    var tz = form.getAttribute("data-tz") || "UTC";
    var url = new URL(window.location.href);
    var zone = urlZone(url);
    var start = convert(a, tz, zone, false), end = convert(b, tz, zone, true);
    if (!start || !end || start >= end) return;
    url.searchParams.set("window", "custom");
    url.searchParams.set("start", start);
    url.searchParams.set("end", end);
    window.location.assign(url.toString());
  }

  // Shared with static/annotations.js, which draws notes on the same axes.
  window.tokenshapeTime = { offset: offset, instant: instant, wallMinute: wallMinute };

  // The zone switch: the browser's own zone is offered, the choice remembered, and typed times
  // moved with it (the same instants, read in the new zone).
  var PREF = "tokenshape.tz";
  function browserZone() {
    try { return Intl.DateTimeFormat().resolvedOptions().timeZone || null; } catch (e) { return null; }
  }

  function offerBrowserZone() {
    var select = document.getElementById("filter-tz");
    var zone = browserZone();
    if (!select || !zone || select.__tokenshapeZone) return;
    select.__tokenshapeZone = true;
    select.dataset.shown = select.value;
    for (var i = 0; i < select.options.length; i++) {
      if (select.options[i].value === zone) {
        select.options[i].text += " · this browser";
        return;
      }
    }
    var option = document.createElement("option");
    option.value = zone;
    option.text = zone + " (this browser)";
    select.appendChild(option);
  }

  // A remembered zone applies to a page opened without one (its zone-less times, UTC, are
  // rewritten into it so the window stays the same).
  function applyPreference() {
    var form = bar();
    var url = new URL(window.location.href);
    var wanted = null;
    try { wanted = window.localStorage.getItem(PREF); } catch (e) { return; }
    if (!form || !wanted || url.searchParams.get("tz")) return;
    if (wanted === (form.getAttribute("data-server-tz") || "UTC")) return;
    ["start", "end"].forEach(function (key) {
      var value = url.searchParams.get(key);
      if (value && !/(Z|[+-]\d{2}:?\d{2})$/.test(value)) {
        var moved = convert(value, "UTC", wanted, key === "end");
        if (moved) url.searchParams.set(key, moved);
      }
    });
    url.searchParams.set("tz", wanted);
    window.location.replace(url.toString());
  }

  function upgrade() {
    offerBrowserZone();
    FIELDS.forEach(function (id) {
      var field = document.getElementById(id);
      if (field && field.type === "text") {
        field.type = "datetime-local";
        field.step = "60";
      }
    });
    if (!bar()) return;
    var graphs = document.querySelectorAll(".js-plotly-plot");
    for (var i = 0; i < graphs.length; i++) {
      var gd = graphs[i];
      if (gd.__tokenshapeZoom || typeof gd.on !== "function") continue;
      gd.__tokenshapeZoom = true;
      gd.on("plotly_relayout", onRelayout.bind(null, gd));
    }
  }

  new MutationObserver(upgrade).observe(document.documentElement, {
    childList: true, subtree: true,
  });
  document.addEventListener("DOMContentLoaded", upgrade);
  var preferenceChecked = false;
  new MutationObserver(function () {
    if (!preferenceChecked && bar()) {
      preferenceChecked = true;
      applyPreference();
    }
  }).observe(document.documentElement, { childList: true, subtree: true });
  document.addEventListener("input", function (event) {
    var target = event.target;
    if (!target || FIELDS.indexOf(target.id) < 0 || !target.value) return;
    var select = document.getElementById("filter-window");
    if (select && select.value !== "custom") select.value = "custom";
  });
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target && target.id === "filter-tz") {
      var was = target.dataset.shown || "UTC";
      FIELDS.forEach(function (id) {
        var field = document.getElementById(id);
        if (field && field.value) field.value = convert(field.value, was, target.value, false) || field.value;
      });
      target.dataset.shown = target.value;
      try { window.localStorage.setItem(PREF, target.value); } catch (e) { /* private mode */ }
      return;
    }
    if (!target || target.id !== "filter-window" || target.value === "custom") return;
    FIELDS.forEach(function (id) {
      var field = document.getElementById(id);
      if (field) field.value = "";
    });
  });

  // Filters survive moving between pages: a link in the top bar carries the view to the other
  // filtered pages, and the engine to the pages of one engine.
  var FILTERED = ["/", "/shapes", "/latency", "/traffic", "/notes"];
  var KEYS = [
    "window", "start", "end", "model", "engine", "gateway", "tenant", "refresh", "tz", "split",
  ];
  var ENGINE_PAGES = ["/rightsizing", "/seasonal", "/compare"];
  document.addEventListener("click", function (event) {
    var link = event.target && event.target.closest && event.target.closest(".topbar nav a");
    if (!link) return;
    var here = new URL(window.location.href).searchParams;
    var to = new URL(link.href);
    var path = to.pathname.replace(/\/+$/, "") || "/";
    var keys = FILTERED.indexOf(path) >= 0 ? KEYS : ENGINE_PAGES.indexOf(path) >= 0 ? ["engine"] : [];
    keys.forEach(function (key) {
      var value = here.get(key);
      if (value && !to.searchParams.get(key)) to.searchParams.set(key, value);
    });
    link.href = to.toString();
  }, true);

  // Auto-refresh, counted from the last load or navigation; paused while the tab is hidden.
  var shownAt = Date.now(), shownHref = window.location.href;
  setInterval(function () {
    if (window.location.href !== shownHref) {
      shownHref = window.location.href;
      shownAt = Date.now();
    }
    var every = Number(new URL(window.location.href).searchParams.get("refresh") || 0);
    if (every > 0 && bar() && !document.hidden && Date.now() - shownAt >= every * 1000) {
      shownAt = Date.now();
      window.location.reload();
    }
  }, 1000);
})();
