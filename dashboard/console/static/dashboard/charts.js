/* Charts over time, drawn with the vendored uPlot (static/vendor/).
 *
 * A page includes templates/dashboard/_charts.html: a <section data-charts=
 * "queue|gpus" data-charts-url="..."> that this script fills with one chart
 * per measure, reading the JSON of views/charts.py for the range chosen with
 * the section's buttons (1 h / 24 h / 7 d, remembered in localStorage).
 *
 * Live: the data is fetched again every 15 s while the page is visible, and
 * soon after a queue event (live.js's bullpen:queue-event) or a GPU heartbeat
 * (bullpen:workers), without reloading the page. Colours come from the
 * theme's CSS variables and the charts are drawn again when the theme
 * changes; each chart follows its container's width (ResizeObserver).
 * The section's data-charts-loads counts the loads and data-charts-completed
 * holds the range's completed jobs (tests read them); section.bullpenCharts
 * holds the uPlot instances. */
(function () {
  "use strict";
  var RANGES = ["1h", "24h", "7d"];
  var KEY = "bullpen-chart-range";
  var REFRESH_MS = 15000;

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
  }
  function num(v) {
    if (v == null) return "–";
    if (Math.abs(v) >= 1000) return (v / 1000).toFixed(v >= 10000 ? 0 : 1) + "k";
    return String(Math.round(v * 100) / 100);
  }
  function dur(v) {
    if (v == null) return "–";
    if (v === 0) return "0";
    if (v < 1) return Math.round(v * 1000) + " ms";
    if (v < 60) return (Math.round(v * 10) / 10) + " s";
    if (v < 3600) return (Math.round(v / 6) / 10) + " min";
    if (v < 86400) return (Math.round(v / 360) / 10) + " h";
    return (Math.round(v / 8640) / 10) + " d";
  }
  function bytes(v) {
    if (v == null) return "–";
    var gib = v / 1073741824;
    return gib >= 1 ? (Math.round(gib * 10) / 10) + " GiB" : Math.round(v / 1048576) + " MiB";
  }
  function pct(v) { return v == null ? "–" : Math.round(v) + "%"; }

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  // One line per tick: hours and minutes, or the day over a longer span.
  function timeLabels(u, splits) {
    var span = splits.length > 1 ? splits[splits.length - 1] - splits[0] : 0;
    return splits.map(function (s) {
      var d = new Date(s * 1000);
      if (span > 2 * 86400) return d.toLocaleDateString([], { weekday: "short", day: "numeric" });
      return pad(d.getHours()) + ":" + pad(d.getMinutes());
    });
  }

  var PALETTE = ["--accent", "--ok", "--warn", "--info", "--bad"];

  // What each kind of section draws: title, unit formatter, [column, label, colour].
  var QUEUE = [
    { title: "Jobs finished", unit: "per minute", fmt: num,
      series: [["completed", "Completed", "--ok"], ["failed", "Failed", "--bad"]] },
    { title: "Wait time", unit: "queued → started", fmt: dur,
      series: [["wait_p50", "p50", "--accent"], ["wait_p95", "p95", "--warn"]] },
    { title: "Run time", unit: "started → finished", fmt: dur,
      series: [["run_p50", "p50", "--accent"], ["run_p95", "p95", "--warn"]] },
    { title: "Backlog", unit: "jobs", fmt: num,
      series: [["backlog", "Waiting + delayed", "--info"], ["active", "Active", "--accent"]] },
    { title: "Oldest waiting job", unit: "age", fmt: dur,
      series: [["oldest", "Age", "--warn"]] }
  ];

  function gpuDefs(json) {
    function per(column) {
      return json.gpus.map(function (g, i) {
        var label = g.host + " #" + (g.index == null ? "?" : g.index) + (g.name ? " " + g.name : "");
        return [column, label, PALETTE[i % PALETTE.length], i];
      });
    }
    return [
      { title: "GPU utilisation", unit: "%", fmt: pct, max: 100, series: per("util") },
      { title: "Committed VRAM", unit: "admitted jobs' declared VRAM", fmt: bytes, least: 1073741824,
        series: per("committed") }
    ];
  }

  // A queue with groups: its waiting jobs by group, the largest backlogs
  // and "(other)", the rest (the series are json.groups[i].waiting).
  function queueDefs(json) {
    if (!json.groups || !json.groups.length) return QUEUE;
    var series = json.groups.map(function (g, i) {
      var colour = g.id === "(other)" ? "--muted" : PALETTE[i % PALETTE.length];
      return ["waiting", g.id, colour, i, "groups"];
    });
    return QUEUE.concat([{ title: "Waiting by group", unit: "largest backlogs", fmt: num, series: series }]);
  }

  function columns(json, def) {
    var data = [json.t];
    def.series.forEach(function (s) {
      data.push(s.length > 3 ? json[s[4] || "gpus"][s[3]][s[0]] : json[s[0]]);
    });
    return data;
  }

  // A value between two gaps (a queue's first sampled minute, the live one)
  // draws no line: uPlot is told to draw it as a dot.
  function isolated(u, si, show) {
    if (show) return null;
    var d = u.data[si], out = [];
    for (var i = 0; i < d.length; i++) {
      if (d[i] != null && (i === 0 || d[i - 1] == null) && (i === d.length - 1 || d[i + 1] == null)) out.push(i);
    }
    return out.length ? out : null;
  }

  function options(def, width, height) {
    var muted = cssVar("--muted"), line = cssVar("--line");
    var axis = { stroke: muted, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 } };
    var y = Object.assign({}, axis, {
      size: 74,  // room for "954 MiB" or "21.5 GiB"
      values: function (u, splits) { return splits.map(def.fmt); }
    });
    return {
      width: width,
      height: height,
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: { time: true },
        y: { range: function (u, min, max) { return [0, def.max || Math.max(max * 1.1, def.least || 1)]; } }
      },
      axes: [Object.assign({}, axis, { size: 30, values: timeLabels }), y],
      series: [{ value: function (u, v) { return v == null ? "–" : new Date(v * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }); } }]
        .concat(def.series.map(function (s) {
          return {
            label: s[1], stroke: cssVar(s[2]), width: 1.75, spanGaps: false,
            points: { size: 5, filter: isolated },
            value: function (u, v) { return def.fmt(v); }
          };
        }))
    };
  }

  function Section(el) {
    this.el = el;
    this.url = el.getAttribute("data-charts-url");
    this.kind = el.getAttribute("data-charts");
    this.grid = el.querySelector("[data-charts-grid]");
    this.note = el.querySelector("[data-charts-note]");
    this.plots = [];
    this.loads = 0;
    this.json = null;
    this.signature = "";
    var stored = null;
    try { stored = localStorage.getItem(KEY); } catch (e) { /* private mode */ }
    this.range = RANGES.indexOf(stored) >= 0 ? stored : "1h";
    this.bindRange();
    this.load();
  }

  Section.prototype.bindRange = function () {
    var self = this;
    var buttons = this.el.querySelectorAll("[data-range]");
    function mark() {
      buttons.forEach(function (b) {
        b.setAttribute("aria-pressed", b.getAttribute("data-range") === self.range ? "true" : "false");
      });
    }
    buttons.forEach(function (b) {
      b.addEventListener("click", function () {
        self.range = b.getAttribute("data-range");
        try { localStorage.setItem(KEY, self.range); } catch (e) { /* private mode */ }
        mark();
        self.load();
      });
    });
    mark();
  };

  Section.prototype.load = function () {
    var self = this;
    var sep = this.url.indexOf("?") >= 0 ? "&" : "?";
    return fetch(this.url + sep + "range=" + encodeURIComponent(this.range), {
      credentials: "same-origin", headers: { Accept: "application/json" }
    }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    }).then(function (json) {
      self.json = json;
      self.draw();
      self.loads += 1;
      self.el.setAttribute("data-charts-loads", String(self.loads));
      self.el.setAttribute("data-charts-range", json.range);
      if (json.completed) {
        var sum = json.completed.reduce(function (a, v) { return a + (v || 0); }, 0);
        self.el.setAttribute("data-charts-completed", String(Math.round(sum * 100) / 100));
      }
    }).catch(function (err) {
      if (self.note) self.note.textContent = "Could not load the charts (" + err.message + "); retrying.";
    });
  };

  Section.prototype.defs = function () {
    return this.kind === "gpus" ? gpuDefs(this.json) : queueDefs(this.json);
  };

  Section.prototype.draw = function (rebuild) {
    var json = this.json;
    if (!json) return;
    var defs = this.defs();
    var signature = defs.map(function (d) { return d.series.map(function (s) { return s[1]; }).join("|"); }).join(";");
    if (rebuild || signature !== this.signature) this.build(defs, signature);
    for (var i = 0; i < defs.length; i++) this.plots[i].setData(columns(json, defs[i]));
    var empty = defs.every(function (d) {
      return columns(json, d).slice(1).every(function (col) {
        return col.every(function (v) { return v == null; });
      });
    });
    if (this.note) {
      this.note.textContent = empty
        ? (this.kind === "gpus" && !json.gpus.length
          ? "No GPUs have reported yet."
          : "No samples in this range yet: a point is taken each minute while the dashboard server or a GPU supervisor runs.")
        : (json.queues_left_out ? "Only the first " + json.queues + " queues are combined." : "");
    }
  };

  Section.prototype.build = function (defs, signature) {
    this.plots.forEach(function (p) { p.destroy(); });
    this.plots = [];
    this.grid.textContent = "";
    var phone = window.matchMedia && window.matchMedia("(max-width: 720px)").matches;
    var height = phone ? 150 : 170;
    var self = this;
    defs.forEach(function (def) {
      var fig = document.createElement("figure");
      fig.className = "chart";
      var cap = document.createElement("figcaption");
      cap.textContent = def.title;
      var unit = document.createElement("span");
      unit.className = "muted small";
      unit.textContent = " " + def.unit;
      cap.appendChild(unit);
      var box = document.createElement("div");
      box.className = "chart-plot";
      fig.appendChild(cap);
      fig.appendChild(box);
      self.grid.appendChild(fig);
      var plot = new window.uPlot(options(def, Math.max(box.clientWidth, 200), height), [[]], box);
      plot.bullpenBox = box;
      // A long series name (a group id) is cut in the legend: whole on hover.
      box.querySelectorAll(".u-legend .u-label").forEach(function (l) { l.title = l.textContent; });
      self.plots.push(plot);
      if (window.ResizeObserver) {
        new ResizeObserver(function () {
          var w = Math.max(box.clientWidth, 200);
          if (Math.abs(w - plot.width) > 2) plot.setSize({ width: w, height: height });
        }).observe(box);
      }
    });
    this.signature = signature;
    this.el.bullpenCharts = this.plots;
  };

  function throttle(fn, ms) {
    var timer = null;
    return function () {
      if (timer) return;
      timer = setTimeout(function () { timer = null; fn(); }, ms);
    };
  }

  function start() {
    if (!window.uPlot) return;
    var sections = [];
    document.querySelectorAll("[data-charts]").forEach(function (el) { sections.push(new Section(el)); });
    if (!sections.length) return;
    function loadAll(kind) {
      sections.forEach(function (s) { if (!kind || s.kind === kind) s.load(); });
    }
    setInterval(function () { if (!document.hidden) loadAll(); }, REFRESH_MS);
    document.body.addEventListener("bullpen:queue-event", throttle(function () { loadAll("queue"); }, 2000));
    document.body.addEventListener("bullpen:workers", throttle(function () { loadAll("gpus"); }, 10000));
    function redraw() { sections.forEach(function (s) { s.draw(true); }); }
    new MutationObserver(redraw).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
    if (window.matchMedia) {
      var dark = window.matchMedia("(prefers-color-scheme: dark)");
      if (dark.addEventListener) dark.addEventListener("change", redraw);
    }
  }

  document.addEventListener("DOMContentLoaded", start);
})();
