// Draws every <div class="chart" data-figure="ID"> from the JSON in <script id="ID">
// with the bundled plotly.min.js. When all are drawn, <body data-charts-rendered="N">.
(function () {
  "use strict";

  // Timeline bars (layout.meta.timeline): traces named "... bars" hold every op's
  // bar as an error bar; only the `bars_budget` longest ones inside the current
  // x range are drawn, recomputed on each zoom, because software WebGL draws
  // 100,000 bars slowly. The hover markers always hold every op.
  function barsForRange(full, range, budget) {
    var inside = [];
    full.forEach(function (trace, t) {
      for (var i = 0; i < trace.x.length; i++) {
        var half = trace.half[i], mid = trace.x[i];
        if (!range || (mid + half >= range[0] && mid - half <= range[1])) { inside.push([half, t, i]); }
      }
    });
    if (inside.length > budget) {
      inside.sort(function (a, b) { return b[0] - a[0]; });
      inside.length = budget;
    }
    var picked = full.map(function () { return { x: [], y: [], half: [] }; });
    inside.forEach(function (item) {
      var trace = full[item[1]], p = picked[item[1]];
      p.x.push(trace.x[item[2]]); p.y.push(trace.y[item[2]]); p.half.push(trace.half[item[2]]);
    });
    return picked;
  }

  function setupTimeline(div, figure) {
    var meta = (figure.layout && figure.layout.meta && figure.layout.meta.timeline) || null;
    if (!meta) { return null; }
    var indices = [], full = [];
    figure.data.forEach(function (trace, t) {
      if (trace.error_x && / bars$/.test(trace.name || "")) {
        indices.push(t);
        full.push({ x: trace.x, y: trace.y, half: trace.error_x.array });
      }
    });
    var first = barsForRange(full, null, meta.bars_budget);
    indices.forEach(function (t, k) {
      figure.data[t].x = first[k].x; figure.data[t].y = first[k].y; figure.data[t].error_x.array = first[k].half;
    });
    return function () {
      div.on("plotly_relayout", function (change) {
        if (!("xaxis.range[0]" in change) && !change["xaxis.autorange"]) { return; }
        var range = change["xaxis.autorange"] ? null : [change["xaxis.range[0]"], change["xaxis.range[1]"]];
        var picked = barsForRange(full, range, meta.bars_budget);
        Plotly.restyle(div, {
          x: picked.map(function (p) { return p.x; }), y: picked.map(function (p) { return p.y; }),
          "error_x.array": picked.map(function (p) { return p.half; })
        }, indices);
      });
    };
  }

  function draw() {
    var divs = Array.prototype.slice.call(document.querySelectorAll("div.chart[data-figure]"));
    var pending = divs.map(function (div) {
      var source = document.getElementById(div.getAttribute("data-figure"));
      var figure = JSON.parse(source.textContent);
      var afterDraw = setupTimeline(div, figure);
      var config = Object.assign({ responsive: true, displaylogo: false }, figure.config || {});
      return Plotly.newPlot(div, figure.data, figure.layout || {}, config).then(function () {
        if (afterDraw) { afterDraw(); }
        div.setAttribute("data-rendered", "true");
      });
    });
    Promise.all(pending).then(function () {
      document.body.setAttribute("data-charts-rendered", String(divs.length));
    }, function (err) { console.error("chart failed:", err); });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); } else { draw(); }
})();
