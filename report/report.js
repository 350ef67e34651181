"use strict";
// rig's report script: the gate slider, the paired-rows matrix and its
// detail panel. It reads only the JSON block in this page and writes text
// with textContent, never markup: model outputs are untrusted.
(function () {
  var block = document.getElementById("report-data");
  if (!block) return;
  var data = JSON.parse(block.textContent);
  document.documentElement.classList.add("js");
  var ROW = 30, OVERSCAN = 6;

  function pct(v) { return isFinite(v) ? (100 * v).toFixed(1) + "%" : "—"; }
  function signedPct(v) { return isFinite(v) ? (v >= 0 ? "+" : "") + (100 * v).toFixed(1) + " pt" : "—"; }
  function num(v) { return v === null || v === undefined ? "—" : v.toFixed(3); }
  function secs(v) { return v === null || v === undefined ? "—" : v.toFixed(1) + " s"; }
  function bytes(v) {
    if (!v) return "—";
    var u = ["B", "KiB", "MiB", "GiB"], i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return v.toFixed(i ? 1 : 0) + " " + u[i];
  }
  function make(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // passRate is the analysis's threshold-sweep number: the share of an
  // arm's tasks with a value at or above the gate, missing tasks left out.
  function passRate(vals, gate) {
    var n = 0, pass = 0;
    for (var i = 0; i < vals.length; i++) {
      var v = vals[i];
      if (v === null) continue;
      n++;
      if (v >= gate) pass++;
    }
    return n ? pass / n : NaN;
  }

  function setup(k) {
    var sc = k.scores, vals = sc.values;
    var armIdx = {}, taskIdx = new Map();
    sc.arms.forEach(function (a, i) { armIdx[a] = i; });
    sc.tasks.forEach(function (t, i) { taskIdx.set(t, i); });
    var pairs = k.pairs.map(function (p) { return { c: armIdx[p.challenger], b: armIdx[p.baseline], label: p.challenger + " vs " + p.baseline }; });
    var rows = k.rows, rowTask = new Int32Array(rows.length);
    for (var i = 0; i < rows.length; i++) { var ti = taskIdx.get(rows[i].task); rowTask[i] = ti === undefined ? -1 : ti; }
    var st = { gate: k.gate, filter: "all", q: "", shown: new Int32Array(0), sel: -1 };

    function value(arm, r) { var t = rowTask[r]; return arm === undefined || t < 0 ? null : vals[arm][t]; }
    function cls(r) {
      var p = pairs[rows[r].pair], b = value(p.b, r), c = value(p.c, r), g = st.gate;
      if (b === null || c === null) return "missing";
      if (b >= g && c < g) return "regression";
      if (c >= g && b < g) return "improvement";
      return "unchanged";
    }
    function split(s) { return s.passed > 0 && s.passed < s.repeats; }
    function shows(r) {
      var row = rows[r];
      if (st.q) {
        var hit = row.task.toLowerCase().indexOf(st.q) >= 0 || (row.category || "").toLowerCase().indexOf(st.q) >= 0;
        for (var j = 0; !hit && row.tags && j < row.tags.length; j++) hit = row.tags[j].toLowerCase().indexOf(st.q) >= 0;
        if (!hit) return false;
      }
      switch (st.filter) {
        case "all": return true;
        case "disagreement": return split(row.baseline) || split(row.challenger);
        case "high_cost": return !!row.high_cost;
        case "tool_error": return !!(row.baseline.tool_error || row.challenger.tool_error);
        case "policy_block": return !!(row.baseline.policy_block || row.challenger.policy_block);
      }
      return cls(r) === st.filter;
    }

    // The gate: each arm's pass rate and each pair's flips, recomputed.
    var slider = document.getElementById("gate-" + k.id), out = document.getElementById("gate-" + k.id + "-value");
    function regate() {
      out.textContent = st.gate.toFixed(2);
      out.dataset.value = String(st.gate);
      document.querySelectorAll("#live-" + k.id + " td[data-arm]").forEach(function (td) {
        var v = passRate(vals[+td.dataset.arm], st.gate);
        td.textContent = pct(v);
        td.dataset.value = String(v);
      });
      document.querySelectorAll("#livepairs-" + k.id + " tr[data-pair]").forEach(function (tr) {
        var p = pairs[+tr.dataset.pair], n = 0, cp = 0, bp = 0, fixed = 0, failing = 0;
        if (p.b !== undefined && p.c !== undefined) {
          for (var t = 0; t < sc.tasks.length; t++) {
            var b = vals[p.b][t], c = vals[p.c][t];
            if (b === null || c === null) continue;
            n++;
            var bpass = b >= st.gate, cpass = c >= st.gate;
            if (bpass) bp++;
            if (cpass) cp++;
            if (cpass && !bpass) fixed++;
            if (bpass && !cpass) failing++;
          }
        }
        var d = n ? (cp - bp) / n : NaN;
        var set = function (f, text, v) { var td = tr.querySelector('[data-f="' + f + '"]'); td.textContent = text; td.dataset.value = String(v); };
        set("paired", String(n), n);
        set("delta", signedPct(d), d);
        set("fixed", String(fixed), fixed);
        set("failing", String(failing), failing);
      });
    }
    if (slider) {
      slider.disabled = false;
      slider.value = String(k.gate);
      slider.addEventListener("input", function () { st.gate = +slider.value; regate(); refilter(); });
      regate();
    }

    // The matrix: a spacer as tall as every shown row, and only the rows in
    // view as elements, reused as it scrolls.
    var vp = document.getElementById("vp-" + k.id);
    if (!vp) return;
    var space = document.getElementById("space-" + k.id), count = document.getElementById("count-" + k.id);
    var filter = document.getElementById("filter-" + k.id), q = document.getElementById("q-" + k.id);
    var detail = document.getElementById("detail-" + k.id);
    var pool = [], queued = false;
    filter.disabled = false;
    q.disabled = false;
    filter.addEventListener("change", function () { st.filter = filter.value; refilter(); });
    q.addEventListener("input", function () { st.q = q.value.trim().toLowerCase(); refilter(); });
    vp.addEventListener("scroll", function () {
      if (queued) return;
      queued = true;
      requestAnimationFrame(function () { queued = false; draw(); });
    }, { passive: true });

    function refilter() {
      var keep = new Int32Array(rows.length), n = 0;
      for (var r = 0; r < rows.length; r++) if (shows(r)) keep[n++] = r;
      st.shown = keep.subarray(0, n);
      space.style.height = n * ROW + "px";
      count.textContent = n + " of " + rows.length + " rows";
      count.dataset.shown = String(n);
      draw();
    }

    function rowElement() {
      var e = make("div", "vrow");
      e.setAttribute("role", "row");
      e.tabIndex = 0;
      for (var c = 0; c < 8; c++) e.appendChild(make("span", c >= 2 && c <= 4 || c === 6 ? "n" : ""));
      e.addEventListener("click", function () { open(+e.dataset.row); });
      e.addEventListener("keydown", function (ev) { if (ev.key === "Enter") open(+e.dataset.row); });
      return e;
    }

    function draw() {
      var n = st.shown.length;
      var first = Math.max(0, Math.floor(vp.scrollTop / ROW) - OVERSCAN);
      var last = Math.min(n, Math.ceil((vp.scrollTop + vp.clientHeight) / ROW) + OVERSCAN);
      var want = Math.max(0, last - first);
      while (pool.length < want) pool.push(rowElement());
      for (var i = 0; i < pool.length; i++) {
        var e = pool[i];
        if (i >= want) { if (e.parentNode) e.remove(); continue; }
        var r = st.shown[first + i], row = rows[r], p = pairs[row.pair];
        var b = value(p.b, r), c = value(p.c, r), cl = cls(r), cells = e.children;
        e.dataset.row = String(r);
        e.dataset.cls = cl;
        e.style.top = (first + i) * ROW + "px";
        e.classList.toggle("sel", r === st.sel);
        cells[0].textContent = row.task;
        cells[1].textContent = p.label;
        cells[2].textContent = num(b);
        cells[3].textContent = num(c);
        cells[4].textContent = b === null || c === null ? "—" : (c - b >= 0 ? "+" : "") + (c - b).toFixed(3);
        cells[5].textContent = cl;
        cells[5].className = "c-" + cl;
        var rb = row.baseline.receipt, rc = row.challenger.receipt;
        cells[6].textContent = (rb ? rb.wall_seconds.toFixed(1) : "—") + " → " + (rc ? rc.wall_seconds.toFixed(1) : "—");
        cells[7].textContent = [row.category || ""].concat(row.tags || []).filter(Boolean).join(" · ");
        if (!e.parentNode) space.appendChild(e);
      }
    }

    function side(title, s, v) {
      var d = make("div");
      d.appendChild(make("div", "who", title + " · value " + num(v)));
      var pre = make("pre", "out", s.output);
      pre.dataset.field = "output";
      d.appendChild(pre);
      var dl = make("dl");
      function field(name, label, text) {
        dl.appendChild(make("dt", "", label));
        var dd = make("dd", "", text);
        dd.dataset.field = name;
        dl.appendChild(dd);
      }
      var r = s.receipt;
      if (r) {
        field("trial", "Trial", r.trial);
        field("attempt", "Attempt", String(r.attempt));
        field("outcome", "Outcome", r.outcome);
        field("pins", "Pins", Object.keys(r.pins || {}).sort().map(function (p) { return p + "=" + r.pins[p]; }).join("\n") || "—");
        field("tokens", "Tokens", r.input_tokens + " in · " + r.output_tokens + " out");
        field("wall", "Wall time", secs(r.wall_seconds));
        field("memory", "Peak memory", bytes(r.peak_mem_bytes));
        field("governor", "Governor events", (r.governor_events || []).join("\n") || "none");
        if (r.detail) field("detail", "Detail", r.detail);
      } else {
        field("receipt", "Receipt", "no counted receipt");
      }
      field("repeats", "Repeats", s.passed + " of " + s.repeats + " passed at the design's gate");
      field("replay", "Replay", s.replay ? s.replay.replace(/_/g, " ") : "not replayed");
      var flags = [];
      if (s.tool_error) flags.push("tool error");
      if (s.policy_block) flags.push("policy block");
      if (flags.length) field("flags", "Flags", flags.join(", "));
      d.appendChild(dl);
      return d;
    }

    function open(r) {
      var row = rows[r], p = pairs[row.pair], pk = k.pairs[row.pair];
      st.sel = r;
      detail.textContent = "";
      var head = make("div", "head");
      head.appendChild(make("b", "", row.task));
      head.appendChild(make("span", "dim", p.label + " · " + cls(r) + " at gate " + st.gate.toFixed(2) + (row.high_cost ? " · high cost" : "")));
      var sides = make("div", "side");
      sides.appendChild(side(pk.baseline + " (baseline)", row.baseline, value(p.b, r)));
      sides.appendChild(side(pk.challenger, row.challenger, value(p.c, r)));
      detail.appendChild(head);
      detail.appendChild(sides);
      detail.dataset.row = String(r);
      detail.hidden = false;
      draw();
    }

    refilter();
  }

  data.kinds.forEach(setup);
  document.documentElement.dataset.ready = "1";
})();
