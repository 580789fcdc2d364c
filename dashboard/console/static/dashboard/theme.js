// Theme: follows prefers-color-scheme until the operator picks one with the
// toggle; the choice is kept in localStorage. Loaded in <head> (not deferred)
// so the page never flashes the wrong theme.
(function () {
  "use strict";
  var KEY = "bullpen-theme";
  var root = document.documentElement;
  function stored() {
    try { return localStorage.getItem(KEY); } catch (e) { return null; }
  }
  function apply(theme) {
    if (theme === "light" || theme === "dark") root.setAttribute("data-theme", theme);
    else root.removeAttribute("data-theme");
  }
  function current() {
    var t = root.getAttribute("data-theme");
    if (t) return t;
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches
      ? "dark" : "light";
  }
  if (stored()) apply(stored());
  document.addEventListener("DOMContentLoaded", function () {
    var button = document.getElementById("theme-toggle");
    if (!button) return;
    function label() {
      var next = current() === "dark" ? "light" : "dark";
      button.textContent = next === "dark" ? "\u263E" : "\u2600";
      button.title = "Switch to " + next + " theme";
      button.setAttribute("aria-label", button.title);
    }
    label();
    button.addEventListener("click", function () {
      var next = current() === "dark" ? "light" : "dark";
      apply(next);
      try { localStorage.setItem(KEY, next); } catch (e) { /* private mode */ }
      label();
    });
  });
})();
