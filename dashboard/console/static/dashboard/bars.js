/* Bar widths and offsets from data attributes. The Content-Security-Policy
 * allows no style attributes, so templates write data-bar-width="42.5" or
 * data-bar-left="80" (percent) and this script sets them through the CSSOM
 * (which the policy allows): once the page has loaded and on every htmx
 * swap. Widths are capped at 100%. */
(function () {
  "use strict";

  function set(el) {
    var width = el.getAttribute("data-bar-width");
    var left = el.getAttribute("data-bar-left");
    if (width !== null && isFinite(parseFloat(width))) {
      el.style.width = Math.min(Math.max(parseFloat(width), 0), 100) + "%";
    }
    if (left !== null && isFinite(parseFloat(left))) {
      el.style.left = parseFloat(left) + "%";
    }
  }

  function apply(root) {
    if (!root || !root.querySelectorAll) { return; }
    if (root.hasAttribute && (root.hasAttribute("data-bar-width") || root.hasAttribute("data-bar-left"))) {
      set(root);
    }
    var found = root.querySelectorAll("[data-bar-width],[data-bar-left]");
    for (var i = 0; i < found.length; i++) { set(found[i]); }
  }

  document.addEventListener("DOMContentLoaded", function () { apply(document); });
  document.addEventListener("htmx:load", function (event) { apply(event.target); });
})();
