/* Bullpen live updates (docs/dashboard-design.md): one websocket per page.
 *
 * The page says what it follows in <body data-live='{"queues": [...], "jobs":
 * [...], "gpus": true}'> (optionally "last_ids": {queue: stream id} as of the
 * render). This script opens the socket at <body data-live-socket> (/ws/live/
 * at the site's root), subscribes, and applies what arrives:
 *   counts   -> text of [data-live-count="<queue>:<state>"]; of
 *               [data-live-sum="<queue>"] the sum of the counts of the states
 *               in its data-live-states (space separated); [data-live-paused]
 *   progress -> [data-live-progress="<queue>:<job>"] (<progress> value, or the
 *               width of .bar > span) and text of [data-live-progress-text]
 *   event    -> text of [data-live-state="<queue>:<job>"], a
 *               `bullpen:job-event` DOM event on each [data-live-job="<queue>:<job>"]
 *               (htmx triggers without eval'd filters, for the CSP), then a
 *               `bullpen:queue-event` DOM event on <body> (detail = message)
 *   workers  -> what changed in the fleet (live/snapshots.py): text of
 *               [data-live-running="<host>/<queue>"] for the counts it
 *               carries (workers running there), then a `bullpen:workers`
 *               DOM event on <body> (gpus.js applies the grid's cells)
 *   replayed -> also `bullpen:queue-event` (lists re-render after a gap)
 *   batch    -> {"messages": [...]}: several of the above, applied in order
 * It reconnects with capped exponential backoff and full jitter (a random
 * wait in 0..1 s, then 0..2 s, 0..4 s ... up to 0..30 s; back to 0..1 s once
 * a socket stayed open STABLE_MS), so that every page a server restart cut
 * off does not come back in the same millisecond, and resends the last
 * stream id it saw per queue, so the server replays what was missed.
 * Everything is set as text, never HTML.
 * <body data-live-status> says connecting | open | closed (for tests and CSS).
 */
(function () {
  "use strict";

  var BASE_DELAY_MS = 1000;
  var MAX_DELAY_MS = 30000;
  // A socket open this long was a working connection, not a flap: the next
  // reconnect starts over from BASE_DELAY_MS.
  var STABLE_MS = 10000;
  // Events that name the state a job is now in.
  var STATE_OF = {
    added: null, waiting: "waiting", active: "active", completed: "completed",
    failed: "failed", delayed: "delayed", prioritized: "prioritized",
    "waiting-children": "waiting-children", removed: "removed", stalled: "waiting"
  };

  function parseSpec() {
    var raw = document.body && document.body.getAttribute("data-live");
    if (!raw) { return null; }
    try {
      var spec = JSON.parse(raw);
      if (!spec || typeof spec !== "object") { return null; }
      var follows = (spec.queues && spec.queues.length) || (spec.jobs && spec.jobs.length) || spec.gpus;
      return follows ? spec : null;
    } catch (e) {
      return null;
    }
  }

  function idKey(id) {
    var parts = String(id).split("-");
    return [Number(parts[0]) || 0, Number(parts[1]) || 0];
  }

  function newer(a, b) {
    if (!b) { return true; }
    var x = idKey(a), y = idKey(b);
    return x[0] > y[0] || (x[0] === y[0] && x[1] > y[1]);
  }

  // The wait before reconnect number `attempt` (0: the first after a close):
  // "full jitter", uniform in 0..min(MAX, BASE * 2^attempt). `random` is
  // Math.random unless a test passes its own.
  function backoffDelay(attempt, random) {
    var ceiling = Math.min(MAX_DELAY_MS, BASE_DELAY_MS * Math.pow(2, Math.min(attempt, 30)));
    return Math.floor((random || Math.random)() * ceiling);
  }
  // Exposed for tests (page.evaluate through the DevTools protocol; the CSP
  // forbids eval in the page itself).
  window.bullpenLiveBackoff = backoffDelay;

  function each(attr, value, fn) {
    var sel = "[" + attr + '="' + (window.CSS && CSS.escape ? CSS.escape(value) : value) + '"]';
    var found = document.querySelectorAll(sel);
    for (var i = 0; i < found.length; i++) { fn(found[i]); }
  }

  function fire(name, detail) {
    document.body.dispatchEvent(new CustomEvent(name, { detail: detail, bubbles: true }));
  }

  // (percent or null, text) of a progress value: a number, or an object with
  // a numeric `percent` / `progress`, or anything else (shown as JSON text).
  function progressParts(value) {
    var number = value;
    if (value && typeof value === "object") {
      number = value.percent !== undefined ? value.percent : value.progress;
    }
    if (typeof number === "number" && isFinite(number)) {
      var pct = Math.max(0, Math.min(100, number));
      var text = number === value ? pct + "%" : JSON.stringify(value);
      return [pct, text.length > 60 ? text.slice(0, 59) + "…" : text];
    }
    if (value === null || value === undefined || value === "" || value === 0) { return [null, ""]; }
    var other = typeof value === "string" ? value : JSON.stringify(value);
    return [null, other.length > 60 ? other.slice(0, 59) + "…" : other];
  }

  function applyCounts(msg) {
    var counts = msg.counts || {};
    Object.keys(counts).forEach(function (state) {
      each("data-live-count", msg.queue + ":" + state, function (el) {
        el.textContent = String(counts[state]);
        el.classList.toggle("zero", !counts[state]);
      });
    });
    each("data-live-sum", msg.queue, function (el) {
      var states = (el.getAttribute("data-live-states") || "").split(" ");
      var sum = 0, known = false;
      for (var i = 0; i < states.length; i++) {
        if (typeof counts[states[i]] === "number") { sum += counts[states[i]]; known = true; }
      }
      if (!known) { return; }
      el.textContent = String(sum);
      el.classList.toggle("zero", !sum);
    });
    if (typeof msg.paused === "boolean") {
      each("data-live-paused", msg.queue, function (el) { el.hidden = !msg.paused; });
    }
  }

  function applyProgress(msg) {
    var key = msg.queue + ":" + msg.job;
    var parts = progressParts(msg.progress);
    each("data-live-progress", key, function (el) {
      if (parts[0] === null) { return; }
      if (el.tagName === "PROGRESS") {
        el.value = parts[0];
        return;
      }
      var bar = el.classList.contains("bar") ? el.querySelector(":scope > span") : el;
      if (bar) { bar.style.width = parts[0] + "%"; }
      el.setAttribute("aria-valuenow", String(Math.round(parts[0])));
    });
    each("data-live-progress-text", key, function (el) { el.textContent = parts[1]; });
  }

  function applyEvent(msg) {
    if (msg.job !== null && msg.job !== undefined && STATE_OF[msg.event]) {
      var state = STATE_OF[msg.event];
      each("data-live-state", msg.queue + ":" + msg.job, function (el) {
        el.textContent = state;
        el.className = el.className.replace(/\bst-[\w-]+/g, "").trim() + " st-" + state;
      });
    }
    if (msg.job !== null && msg.job !== undefined) {
      each("data-live-job", msg.queue + ":" + msg.job, function (el) {
        el.dispatchEvent(new CustomEvent("bullpen:job-event", { detail: msg }));
      });
    }
    fire("bullpen:queue-event", msg);
  }

  function applyWorkers(msg) {
    var running = msg.running || {};
    var found = document.querySelectorAll("[data-live-running]");
    for (var i = 0; i < found.length; i++) {
      var key = found[i].getAttribute("data-live-running");
      if (Object.prototype.hasOwnProperty.call(running, key)) {
        found[i].textContent = String(running[key] || 0);
      }
    }
    fire("bullpen:workers", msg);
  }

  function Live(spec) {
    this.spec = spec;
    this.lastIds = {};
    var given = spec.last_ids || {};
    for (var q in given) {
      if (Object.prototype.hasOwnProperty.call(given, q)) { this.lastIds[q] = given[q]; }
    }
    this.attempt = 0;
    // When the current socket opened (null: not open), and the last wait
    // chosen before a reconnect (ms, for tests).
    this.openedAt = null;
    this.lastDelay = null;
    this.socket = null;
    this.stopped = false;
  }

  Live.prototype.seen = function (queue, id) {
    if (queue && id && newer(id, this.lastIds[queue])) { this.lastIds[queue] = id; }
  };

  Live.prototype.connect = function () {
    var self = this;
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    document.body.setAttribute("data-live-status", "connecting");
    // The socket's path comes from the page (the dashboard may be mounted
    // under a prefix in a host project).
    var path = document.body.getAttribute("data-live-socket") || "/ws/live/";
    var socket = this.socket = new WebSocket(scheme + location.host + path);
    socket.onopen = function () {
      self.openedAt = Date.now();
      document.body.setAttribute("data-live-status", "open");
      var msg = {
        type: "subscribe",
        queues: self.spec.queues || [],
        jobs: self.spec.jobs || [],
        gpus: !!self.spec.gpus,
        last_ids: self.lastIds
      };
      socket.send(JSON.stringify(msg));
    };
    socket.onmessage = function (e) {
      var msg;
      try { msg = JSON.parse(e.data); } catch (err) { return; }
      self.handle(msg);
    };
    socket.onclose = function (e) {
      document.body.setAttribute("data-live-status", "closed");
      // Logged out (4401) or no longer allowed to view (4403): trying again
      // cannot help; the next page load asks for a login.
      if (e.code === 4401 || e.code === 4403) { self.stopped = true; }
      // A connection that held resets the backoff; one that failed or
      // dropped at once (a server still starting, a storm) keeps growing it.
      if (self.openedAt !== null && Date.now() - self.openedAt >= STABLE_MS) { self.attempt = 0; }
      self.openedAt = null;
      if (self.stopped) { return; }
      var delay = self.lastDelay = backoffDelay(self.attempt++);
      setTimeout(function () { self.connect(); }, delay);
    };
  };

  Live.prototype.handle = function (msg) {
    switch (msg.type) {
      case "counts":
        applyCounts(msg);
        this.seen(msg.queue, msg.id);
        break;
      case "progress":
        applyProgress(msg);
        this.seen(msg.queue, msg.id);
        break;
      case "event":
        this.seen(msg.queue, msg.id);
        applyEvent(msg);
        break;
      case "replayed":
        fire("bullpen:queue-event", msg);
        break;
      case "workers":
        applyWorkers(msg);
        break;
      case "batch":
        // Several messages that were ready at once, in order.
        for (var i = 0; i < (msg.messages || []).length; i++) { this.handle(msg.messages[i]); }
        break;
      case "error":
        if (window.console) { console.warn("bullpen live:", msg.message); }
        break;
    }
  };

  function start() {
    var spec = parseSpec();
    if (!spec || !window.WebSocket) { return; }
    var live = new Live(spec);
    window.bullpenLive = live;
    live.connect();
    window.addEventListener("pagehide", function () {
      live.stopped = true;
      if (live.socket) { live.socket.close(); }
    });
    // Back/forward cache: the page comes back without its socket.
    window.addEventListener("pageshow", function (e) {
      if (e.persisted && live.stopped) {
        live.stopped = false;
        live.connect();
      }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
