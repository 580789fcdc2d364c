/* The queue page's selectable job list (templates/dashboard/_job_list.html):
 * checkboxes per row, "select page" in the header, then a banner offering
 * "select all N matching" (Gmail style); the action bar's buttons follow
 * the selection. The selection lives here, keyed by queue and tab, so the
 * list's live re-renders (htmx outerHTML swaps) keep it. The form's hidden
 * `scope` says "page" (the checked ids are posted) or "all" (the server
 * runs a batch over every job of the tab). */
(function () {
  "use strict";

  var states = {};

  function list() { return document.getElementById("job-list"); }

  function state(root) {
    var key = root.getAttribute("data-bulk");
    if (!states[key]) { states[key] = { ids: {}, all: false }; }
    return states[key];
  }

  function boxes(root) { return root.querySelectorAll("input[name=ids]"); }

  function update(root) {
    var st = state(root);
    var all = boxes(root);
    var checked = 0;
    for (var i = 0; i < all.length; i++) {
      var on = !!st.ids[all[i].value] || st.all;
      all[i].checked = on;
      var tr = all[i].closest("tr");
      if (tr) { tr.classList.toggle("selected", on); }
      if (on) { checked++; }
    }
    var total = parseInt(root.getAttribute("data-bulk-total"), 10) || 0;
    var tab = root.getAttribute("data-bulk-tab");
    var pageAll = all.length > 0 && checked === all.length;
    var head = root.querySelector("[data-select-page]");
    if (head) {
      head.checked = pageAll;
      head.indeterminate = checked > 0 && !pageAll;
    }
    var scope = root.querySelector("[data-bulk-scope]");
    if (scope) { scope.value = st.all ? "all" : "page"; }
    var count = root.querySelector("[data-bulk-count]");
    if (count) {
      count.textContent = st.all ? "all " + total + " matching selected"
        : checked ? checked + " selected" : "none selected";
    }
    var banner = root.querySelector("[data-bulk-banner]");
    if (banner) {
      banner.hidden = !(pageAll && (st.all || total > all.length));
      root.querySelector("[data-bulk-banner-page]").hidden = st.all;
      root.querySelector("[data-bulk-banner-all]").hidden = !st.all;
    }
    var verbs = root.querySelectorAll("[data-bulk-verb]");
    for (var j = 0; j < verbs.length; j++) {
      var b = verbs[j];
      var label = b.getAttribute("data-bulk-label");
      b.disabled = st.all ? b.getAttribute("data-batch") !== "1" : checked === 0;
      if (st.all) {
        b.setAttribute("hx-confirm", label + " all " + total + " " + tab +
          " jobs? This runs as a batch you can follow and cancel.");
      } else if (b.getAttribute("data-bulk-ask") === "1") {
        b.setAttribute("hx-confirm", label + " the " + checked + " selected job(s)?");
      } else {
        b.removeAttribute("hx-confirm");
      }
    }
    var exp = root.querySelector("[data-bulk-export]");
    if (exp) { exp.disabled = !st.all && checked === 0; }
  }

  function prune(root) {
    /* Keep only ids still on the page (others left: retried, removed...). */
    var st = state(root);
    var present = {};
    var all = boxes(root);
    for (var i = 0; i < all.length; i++) {
      if (st.ids[all[i].value]) { present[all[i].value] = true; }
    }
    st.ids = present;
  }

  function clear(root) {
    var st = state(root);
    st.ids = {};
    st.all = false;
  }

  document.addEventListener("change", function (event) {
    var root = list();
    var t = event.target;
    if (!root || !root.contains(t)) { return; }
    var st = state(root);
    if (t.matches("[data-select-page]")) {
      var all = boxes(root);
      for (var i = 0; i < all.length; i++) {
        if (t.checked) { st.ids[all[i].value] = true; } else { delete st.ids[all[i].value]; }
      }
      if (!t.checked) { st.all = false; }
      update(root);
    } else if (t.matches("input[name=ids]")) {
      if (t.checked) { st.ids[t.value] = true; } else { delete st.ids[t.value]; st.all = false; }
      update(root);
    }
  });

  document.addEventListener("click", function (event) {
    var root = list();
    var t = event.target;
    if (!root || !t.closest) { return; }
    if (t.closest("[data-bulk-all]")) {
      state(root).all = true;
      update(root);
    } else if (t.closest("[data-bulk-clear]")) {
      clear(root);
      update(root);
    }
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var root = list();
    var elt = event.detail && event.detail.elt;
    if (root && elt && elt.hasAttribute && elt.hasAttribute("data-bulk-verb") &&
        event.detail.successful) {
      clear(root);  /* done: the list re-renders without the acted-on jobs */
      update(root);
    }
  });

  function bind() {
    var root = list();
    if (!root) { return; }
    prune(root);
    update(root);
  }

  document.addEventListener("DOMContentLoaded", bind);
  document.addEventListener("htmx:load", function (event) {
    if (event.target && event.target.id === "job-list") { bind(); }
  });
})();
