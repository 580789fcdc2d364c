/* GPU page (templates/dashboard/gpus.html): the grid of every GPU.
 *
 * #gpu-grid[data-grid-url] answers {version, cells: [[host, index, uuid,
 * state, util %, VRAM used %, committed %] (percentages in the colours'
 * 10 % steps), ...], match: [indices] | null}
 * (reads/fleet_page.py). Each GPU is one square, grouped by host, coloured
 * by utilisation or VRAM (h0..h10 in gpus.css; the buttons switch), faded
 * when the filters leave it out; a click opens its card (?host=&gpu=).
 * Live: live.js fires `bullpen:workers` with {version, base, cells, gone,
 * summary}: the cells that changed since `base`. When `base` is the grid's
 * version they are applied; when the grid is older (a missed message, a
 * new socket's first message) it is fetched again. The summary's numbers
 * are set as text, and `bullpen:hosts-changed` is fired on <body> when a
 * host whose cards are shown changed (the cards re-render, htmx).
 */
(function () {
  "use strict";

  var grid = null;
  var version = null;
  var colour = "util";
  var cells = {};      // key -> cell
  var els = {};        // key -> element
  var match = null;    // key -> true, or null: no filter
  var loading = false;

  function key(c) { return c[0] + "/" + c[2]; }

  function fmtBytes(n) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"];
    var v = Number(n) || 0;
    for (var i = 0; i < units.length; i++) {
      if (Math.abs(v) < 1024 || i === units.length - 1) {
        return i === 0 ? Math.floor(v) + " B" : v.toFixed(1) + " " + units[i];
      }
      v /= 1024;
    }
    return String(n);
  }

  function paint(el, c) {
    var value = colour === "util" ? c[4] : c[5];
    var cls = "cell";
    if (c[3] === "down" || c[3] === "unused") {
      cls += " " + c[3];
    } else if (value === null || value === undefined) {
      cls += " nodata";
    } else {
      cls += " h" + Math.max(0, Math.min(10, Math.round(value / 10)));
    }
    if (c[3] === "busy") { cls += " busy-mark"; }
    if (match && !match[key(c)]) { cls += " faded"; }
    el.className = cls;
    el.setAttribute("data-state", c[3]);
    el.title = c[0] + " · GPU " + (c[1] === null ? "?" : c[1]) + " · " + c[3] +
      " · utilisation " + (c[4] === null ? "–" : "≈" + c[4] + "%") +
      " · VRAM " + (c[5] === null ? "–" : "≈" + c[5] + "% used") +
      (c[6] === null ? "" : ", ≈" + c[6] + "% committed");
  }

  function draw(data) {
    cells = {};
    els = {};
    match = null;
    if (data.match) {
      match = {};
      for (var m = 0; m < data.match.length; m++) {
        var mc = data.cells[data.match[m]];
        if (mc) { match[key(mc)] = true; }
      }
    }
    var frag = document.createDocumentFragment();
    var group = null;
    var host = null;
    for (var i = 0; i < data.cells.length; i++) {
      var c = data.cells[i];
      if (c[0] !== host) {
        host = c[0];
        group = document.createElement("span");
        group.className = "host-group";
        group.setAttribute("data-grid-host", host);
        frag.appendChild(group);
      }
      var el = document.createElement("span");
      el.setAttribute("data-cell", key(c));
      paint(el, c);
      group.appendChild(el);
      cells[key(c)] = c;
      els[key(c)] = el;
    }
    grid.textContent = "";
    grid.appendChild(frag);
    version = data.version;
    grid.setAttribute("data-version", String(version));
    grid.setAttribute("data-cells", String(data.cells.length));
  }

  function load() {
    if (loading) { return; }
    loading = true;
    fetch(grid.getAttribute("data-grid-url"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) { loading = false; if (data) { draw(data); } })
      .catch(function () { loading = false; });
  }

  function shownHosts() {
    var found = {};
    var sections = document.querySelectorAll("#gpu-hosts [data-host]");
    for (var i = 0; i < sections.length; i++) {
      found[sections[i].getAttribute("data-host")] = true;
    }
    return found;
  }

  function summary(s) {
    if (!s) { return; }
    var nums = document.querySelectorAll("[data-summary]");
    for (var i = 0; i < nums.length; i++) {
      var name = nums[i].getAttribute("data-summary");
      if (name in s) { nums[i].textContent = String(s[name]); }
    }
    // Each count's unit word, singular for one (the server renders it so too).
    var units = document.querySelectorAll("[data-unit]");
    for (var u = 0; u < units.length; u++) {
      var of = units[u].getAttribute("data-unit");
      if (of in s) {
        units[u].textContent = units[u].getAttribute(
          Number(s[of]) === 1 ? "data-one" : "data-many");
      }
    }
    var sizes = document.querySelectorAll("[data-summary-bytes]");
    for (var j = 0; j < sizes.length; j++) {
      var field = sizes[j].getAttribute("data-summary-bytes");
      if (field in s) { sizes[j].textContent = fmtBytes(s[field]); }
    }
  }

  function apply(msg) {
    summary(msg.summary);
    if (version === null || msg.version === undefined) { return; }
    var shown = shownHosts();
    var touched = false;
    var changed = msg.cells || [];
    var hosts = msg.hosts || [];
    for (var t = 0; t < changed.length; t++) {
      if (shown[changed[t][0]]) { touched = true; }
    }
    for (var h = 0; h < hosts.length; h++) {
      if (shown[hosts[h]]) { touched = true; }
    }
    if (msg.base !== version) {
      // Not the version the grid is at: fetch it again (when newer).
      if (msg.version > version) { load(); }
    } else if ((msg.gone || []).length) {
      load();
    } else {
      for (var i = 0; i < changed.length; i++) {
        var c = changed[i];
        var el = els[key(c)];
        if (!el) { load(); break; }   // a GPU the grid does not have yet
        cells[key(c)] = c;
        paint(el, c);
      }
      version = msg.version;
      grid.setAttribute("data-version", String(version));
    }
    if (touched) {
      document.body.dispatchEvent(new CustomEvent("bullpen:hosts-changed", { detail: msg }));
    }
  }

  function start() {
    grid = document.getElementById("gpu-grid");
    if (!grid) { return; }
    grid.addEventListener("click", function (e) {
      var el = e.target;
      var k = el && el.getAttribute && el.getAttribute("data-cell");
      var c = k && cells[k];
      if (!c) { return; }
      window.location.href = grid.getAttribute("data-page-url") +
        "?host=" + encodeURIComponent(c[0]) + "&gpu=" + encodeURIComponent(c[2]);
    });
    var buttons = document.querySelectorAll("[data-grid-colour]");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].addEventListener("click", function (e) {
        colour = e.currentTarget.getAttribute("data-grid-colour");
        for (var j = 0; j < buttons.length; j++) {
          buttons[j].setAttribute("aria-pressed", String(buttons[j] === e.currentTarget));
        }
        grid.setAttribute("aria-label", "Every GPU, coloured by " +
          (colour === "util" ? "utilisation" : "VRAM used"));
        for (var k in els) {
          if (Object.prototype.hasOwnProperty.call(els, k)) { paint(els[k], cells[k]); }
        }
      });
    }
    document.body.addEventListener("bullpen:workers", function (e) { apply(e.detail || {}); });
    load();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
