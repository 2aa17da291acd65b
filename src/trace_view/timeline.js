"use strict";
// The timeline of `mur trace --html`: the groups (tasks, and the session's own events) and
// their rows, built from the page's JSON with createElement and textContent only (never
// markup from data), a few hundred at a time so a trace of any length stays usable.
(function () {
  var data = JSON.parse(document.getElementById("page-data").textContent);
  var span = Math.max(data.span, 1);
  var PAGE = 300;
  var byGroup = data.groups.map(function () { return []; });
  data.rows.forEach(function (r, i) {
    if (byGroup[r[0]]) { byGroup[r[0]].push(i); }
  });
  var LANES = ["task", "turn", "tool", "shell", "delegation", "other"];
  var MARKS = ["", "note", "bad"];

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function secs(ms) { return "+" + (ms / 1000).toFixed(3) + " s"; }
  function dur(ms) { return ms >= 10000 ? (ms / 1000).toFixed(1) + " s" : ms + " ms"; }
  function bar(start, length, cls) {
    var track = el("div", "track");
    var b = el("div", "bar " + cls);
    b.style.left = Math.min(100, (100 * start) / span) + "%";
    b.style.width = Math.min(100, (100 * length) / span) + "%";
    b.title = secs(start) + ", " + dur(length);
    track.appendChild(b);
    return track;
  }
  function tokens(i, o) { return i || o ? i + " in / " + o + " out" : ""; }

  // A row: [group, start ms, duration ms, mark 0-2, lane 0-5, text, tokens in, tokens out]
  function row(r) {
    var mark = MARKS[r[3]] || "";
    var line = el("div", "row " + mark);
    var cells = el("div", "cells");
    cells.appendChild(el("span", "when", secs(r[1])));
    cells.appendChild(el("span", "num dur", r[2] ? dur(r[2]) : ""));
    cells.appendChild(el("span", "num tok", tokens(r[6], r[7])));
    cells.appendChild(el("span", "text", r[5]));
    line.appendChild(cells);
    line.appendChild(bar(r[1], r[2], "k-" + (LANES[r[4]] || "other") + (mark === "bad" ? " bad" : "")));
    return line;
  }

  function more(container, items, make, what) {
    var shown = 0;
    var button = el("button", "more");
    function next() {
      var end = Math.min(items.length, shown + PAGE);
      var frag = document.createDocumentFragment();
      for (; shown < end; shown++) { frag.appendChild(make(items[shown])); }
      container.insertBefore(frag, button);
      var left = items.length - shown;
      button.textContent = "show " + Math.min(left, PAGE) + " more of " + left + " " + what;
      button.hidden = left === 0;
    }
    button.addEventListener("click", next);
    container.appendChild(button);
    next();
  }

  // A group: [label, start ms, end ms, status, failed 0/1, tokens in, tokens out, rows, why]
  function group(index) {
    var g = data.groups[index];
    var d = el("details", "group");
    d.dataset.group = String(index);
    var s = el("summary");
    var label = el("span", "label");
    label.appendChild(el("span", "text", g[0]));
    label.appendChild(el("span", g[4] ? "st-bad" : "muted", g[3]));
    label.appendChild(el("span", "num", dur(g[2] - g[1]) + ", " + g[7] + " events"));
    var t = tokens(g[5], g[6]);
    if (t) { label.appendChild(el("span", "num", t)); }
    s.appendChild(label);
    s.appendChild(bar(g[1], g[2] - g[1], g[4] ? "k-task bad" : "k-task"));
    d.appendChild(s);
    if (g[8]) { d.appendChild(el("div", "why fail", "first failure: " + g[8])); }
    var rows = el("div", "rows");
    d.appendChild(rows);
    var filled = false;
    function fill() {
      if (!filled) {
        filled = true;
        more(rows, byGroup[index], function (i) { return row(data.rows[i]); }, "events");
      }
    }
    d.addEventListener("toggle", function () { if (d.open) { fill(); } });
    // A small trace is shown whole: every group open, its rows made now.
    if (data.rows.length <= 2000) {
      fill();
      d.open = true;
    }
    return d;
  }

  var axis = document.getElementById("axis");
  for (var k = 0; k <= 4; k++) {
    var tick = el("span", "tick", (span * k / 4000).toFixed(k ? 1 : 0) + " s");
    tick.style.left = k * 25 + "%";
    axis.appendChild(tick);
  }
  var order = data.groups.map(function (_, i) { return i; });
  more(document.getElementById("groups"), order, group, "tasks");
  document.body.dataset.ready = "1";
})();
