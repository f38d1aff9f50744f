// Every data table downloads as CSV: a "Download CSV" button above each table of the page
// writes the table's cells as shown (its header rows, then its rows; the text of each cell,
// whitespace collapsed). Found after every Dash render, so tables a callback fills get one too;
// the cells are read when the button is pressed, so the file is what the table shows then.
// Left out: the Admin page (tokens and users: nothing to analyse) and tables marked
// data-csv="off".
(function () {
  "use strict";
  var MARK = "data-csv-for";
  var seen = 0;
  // A spreadsheet runs a cell starting with one of these as a formula (CSV injection); text
  // that does gets a leading '. Numbers as shown ("-12", "−3.5%", "1,204") are left alone.
  var FORMULA = /^[=+\-@\t\r]/;
  var NUMBER = /^[+\-\u2212]?[\d.,]+\s*%?$/;

  function cell(text) {
    var value = FORMULA.test(text) && !NUMBER.test(text) ? "'" + text : text;
    return /[",\n\r]/.test(value) ? '"' + value.replace(/"/g, '""') + '"' : value;
  }

  function shown(node) {
    return (node.innerText || node.textContent || "").replace(/\s+/g, " ").trim();
  }

  function rows(table) {
    var out = [];
    for (var r = 0; r < table.rows.length; r++) {
      var row = [], cells = table.rows[r].cells;
      for (var c = 0; c < cells.length; c++) {
        row.push(shown(cells[c]));
        // A cell spanning columns keeps the ones after it in their columns.
        for (var s = 1; s < (cells[c].colSpan || 1); s++) row.push("");
      }
      out.push(row);
    }
    return out;
  }

  function heading(table) {
    if (table.caption && shown(table.caption)) return shown(table.caption);
    // The nearest heading before the table: its earlier siblings, then its ancestors'.
    for (var node = table; node && node !== document.body; node = node.parentElement) {
      for (var prev = node.previousElementSibling; prev; prev = prev.previousElementSibling) {
        if (/^H[1-6]$/.test(prev.tagName)) return shown(prev);
        var inner = prev.querySelectorAll("h1, h2, h3, h4, h5, h6");
        if (inner.length) return shown(inner[inner.length - 1]);
      }
    }
    return "table";
  }

  function filename(table, name) {
    var base = table.id || name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
    return (base || "table") + ".csv";
  }

  function download(table) {
    var text = rows(table).map(function (r) { return r.map(cell).join(","); }).join("\r\n");
    var link = document.createElement("a");
    link.href = URL.createObjectURL(new Blob([text + "\r\n"], { type: "text/csv" }));
    link.download = filename(table, heading(table));
    document.body.appendChild(link);
    link.click();
    setTimeout(function () { URL.revokeObjectURL(link.href); link.remove(); }, 0);
  }

  function wanted(table) {
    if (table.getAttribute("data-csv") === "off" || table.closest("[data-csv=off]")) return false;
    if (/^\/admin(\/|$)/.test(location.pathname)) return false;
    return table.rows.length > 1 && !!table.parentElement;
  }

  function style() {
    if (document.getElementById("table-csv-style")) return;
    var css = document.createElement("style");
    css.id = "table-csv-style";
    css.textContent =
      ".table-csv { display: flex; justify-content: flex-end; margin: 4px 0; }" +
      ".table-csv button { font: inherit; font-size: 12px; padding: 3px 10px; cursor: pointer;" +
      " border: 1px solid var(--field-line, #c5cbd8); border-radius: 6px;" +
      " background: var(--surface, #fff); color: var(--ink, #1c2333); }" +
      ".table-csv button:hover { background: var(--surface-2, #eef1f7); }";
    document.head.appendChild(css);
  }

  function owns(bar, table) {
    // Whether `bar` is the button bar of `table` (it sits right before its table).
    return !!(bar && table && table.tagName === "TABLE" && bar.getAttribute(MARK) &&
      bar.getAttribute(MARK) === table.getAttribute("data-csv-id"));
  }

  function tidy() {
    // A bar whose table React replaced or removed goes with it.
    var bars = document.querySelectorAll("[" + MARK + "]");
    for (var i = 0; i < bars.length; i++) {
      if (!owns(bars[i], bars[i].nextElementSibling)) bars[i].remove();
    }
  }

  function add() {
    tidy();
    var tables = document.querySelectorAll("main table, #_pages_content table");
    for (var i = 0; i < tables.length; i++) {
      var table = tables[i];
      if (owns(table.previousElementSibling, table) || !wanted(table)) continue;
      style();
      if (!table.getAttribute("data-csv-id")) table.setAttribute("data-csv-id", "t" + ++seen);
      var bar = document.createElement("div");
      bar.className = "table-csv";
      bar.setAttribute(MARK, table.getAttribute("data-csv-id"));
      var button = document.createElement("button");
      button.type = "button";
      button.textContent = "Download CSV";
      button.setAttribute("aria-label", "Download CSV: " + heading(table));
      button.addEventListener("click", download.bind(null, table));
      bar.appendChild(button);
      table.parentElement.insertBefore(bar, table);
    }
  }

  var queued = false;
  function soon() {
    if (queued) return;
    queued = true;
    // Once per frame at most: a render mutates the page many times.
    requestAnimationFrame(function () { queued = false; add(); });
  }

  new MutationObserver(soon).observe(document.documentElement, { childList: true, subtree: true });
})();
