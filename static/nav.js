// The bar's link to the page shown carries aria-current="page" (and .current, its style).
// The shell sets it in the first layout when it knows the page; this keeps it true as the
// address changes without a new layout (Dash's links push history; Back pops it).
(function () {
  "use strict";

  function trimmed(path) {
    return path.replace(/\/+$/, "") || "/";
  }

  function mark() {
    var here = trimmed(window.location.pathname);
    var links = document.querySelectorAll(".topbar nav a");
    for (var i = 0; i < links.length; i++) {
      var a = links[i];
      var current = trimmed(a.pathname) === here;
      if (current && a.getAttribute("aria-current") !== "page") {
        a.setAttribute("aria-current", "page");
        a.classList.add("current");
      } else if (!current && a.hasAttribute("aria-current")) {
        a.removeAttribute("aria-current");
        a.classList.remove("current");
      }
    }
  }

  // The bar is drawn by Dash after this script runs: mark it when it appears.
  new MutationObserver(mark).observe(document.documentElement, { childList: true, subtree: true });
  window.addEventListener("popstate", mark);
  window.addEventListener("_dashprivate_pushstate", mark);
})();
