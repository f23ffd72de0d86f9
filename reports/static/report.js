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

  // Readable op boxes: when the zoomed range holds at most `box_limit` operations,
  // the trace with meta.boxes gets one labelled bar per op (type, values, node).
  var BOX_COLOURS = { ok: "#cfe3f3", fail: "#f6d3c0", info: "#fbe7b8" };
  function boxSource(figure) {
    var target = -1, ops = [];
    figure.data.forEach(function (trace, t) {
      if (trace.meta && trace.meta.boxes) { target = t; }
      var bars = figure.data[t + 1];
      if (trace.customdata && trace.type === "scattergl" && bars && bars.error_x) {
        for (var i = 0; i < trace.x.length; i++) {
          ops.push({ x: trace.x[i], y: trace.y[i], half: bars.error_x.array[i], c: trace.customdata[i],
                     outcome: trace.name });
        }
      }
    });
    return target < 0 ? null : { trace: target, ops: ops };
  }

  function clip(value, length) {
    var text = String(value);
    return text.length > length ? text.slice(0, length) + "…" : text;
  }

  // A value in a few characters: an object by its id / offset / value fields (those
  // not already in `shown`), a list by its length, anything else clipped.
  function brief(text, shown) {
    var value;
    try { value = JSON.parse(text); } catch (e) { return { text: clip(text, 16), value: null }; }
    if (Array.isArray(value)) { return { text: "[" + value.length + "]", value: value }; }
    if (value && typeof value === "object") {
      var parts = ["id", "queue", "offset", "value"].filter(function (k) {
        return k in value && !(shown && typeof shown === "object" && shown[k] === value[k]);
      }).map(function (k) { return k + " " + clip(JSON.stringify(value[k]), 10); });
      return { text: parts.join(" ") || "ok", value: value };
    }
    return { text: clip(text, 16), value: value };
  }

  function drawBoxes(div, boxes, range, limit) {
    var inside = !range ? [] : boxes.ops.filter(function (op) {
      return op.x + op.half >= range[0] && op.x - op.half <= range[1];
    });
    if (inside.length > limit) { inside = []; }
    Plotly.restyle(div, {
      base: [inside.map(function (op) { return op.x - op.half; })],
      x: [inside.map(function (op) { return Math.max(2 * op.half, 1e-4); })],
      y: [inside.map(function (op) { return op.y; })],
      text: [inside.map(function (op) {
        var c = op.c; // index, process, f, key, invoked with, returned, node, error
        var asked = brief(c[4], null);
        return c[2] + " " + asked.text + " → " + (op.outcome === "ok" ? brief(c[5], asked.value).text : op.outcome) +
          (c[6] ? " @" + c[6] : "");
      })],
      "marker.color": [inside.map(function (op) { return BOX_COLOURS[op.outcome] || "#eee"; })]
    }, [boxes.trace]);
  }

  // Anomalies (timeline.html): <script id="anomaly-data"> maps an anchor to its
  // details; list entries (a[data-anomaly]) and marker clicks zoom there and show them.
  function anomalyData() {
    var source = document.getElementById("anomaly-data");
    return source ? JSON.parse(source.textContent) : null;
  }

  function showAnomaly(div, data, anchor, zoom) {
    var item = data[anchor], panel = document.getElementById("anomaly-details");
    if (!item || !panel) { return; }
    panel.textContent = "";
    var title = document.createElement("h3");
    title.textContent = item.category.replace(/_/g, " ") + ": " + item.label;
    panel.appendChild(title);
    var table = document.createElement("table");
    table.className = "facts";
    item.fields.forEach(function (pair) {
      var row = table.insertRow(), name = document.createElement("th"), value = row.insertCell();
      name.textContent = pair[0]; row.insertBefore(name, value);
      value.textContent = typeof pair[1] === "string" ? pair[1] : JSON.stringify(pair[1]);
    });
    panel.appendChild(table);
    var ops = document.createElement("ul");
    item.ops.forEach(function (op) {
      var li = document.createElement("li");
      li.textContent = "op #" + op.index + " " + op.f + " (" + op.type + ") by process " + op.process +
        " at " + op.x.toFixed(3) + " s" + (op.node ? " on " + op.node : "");
      ops.appendChild(li);
    });
    if (!item.ops.length) {
      var none = document.createElement("li");
      none.textContent = "no operation of the history shows it (see the fields above)";
      ops.appendChild(none);
    }
    panel.appendChild(ops);
    panel.setAttribute("data-anomaly", anchor);
    var list = panel.closest(".anomaly-list");
    if (list) { list.scrollTop = 0; }  // the details sit above the list; the page itself stays put
    document.querySelectorAll("a[data-anomaly].current").forEach(function (a) { a.classList.remove("current"); });
    var link = document.querySelector('a[data-anomaly="' + anchor + '"]');
    if (link) { link.classList.add("current"); }
    var drawn = highlightAnomaly(div, anchor);
    if (zoom && item.ops.length) {
      var xs = item.ops.map(function (op) { return op.x; });
      var lo = Math.min.apply(null, xs), hi = Math.max.apply(null, xs), pad = Math.max(0.5, (hi - lo) * 0.2);
      return drawn.then(function () {
        return Plotly.relayout(div, { "xaxis.range[0]": lo - pad, "xaxis.range[1]": hi + pad });
      });
    }
    return drawn;
  }

  // The selected anomaly's markers ringed in black: one trace (meta.selected), replaced on
  // every selection, so the marker that was clicked or picked from the list stands out.
  function highlightAnomaly(div, anchor) {
    var xs = [], ys = [], yaxis = "y";
    div.data.forEach(function (trace) {
      if (!trace.meta || !trace.meta.anomaly) { return; }
      for (var i = 0; i < trace.x.length; i++) {
        if (trace.customdata[i][0] === anchor) { xs.push(trace.x[i]); ys.push(trace.y[i]); yaxis = trace.yaxis || "y"; }
      }
    });
    var old = -1;
    div.data.forEach(function (trace, t) { if (trace.meta && trace.meta.selected) { old = t; } });
    var removed = old >= 0 ? Plotly.deleteTraces(div, old) : Promise.resolve();
    return removed.then(function () {
      return Plotly.addTraces(div, { type: "scatter", mode: "markers", x: xs, y: ys, yaxis: yaxis,
        name: "selected anomaly", showlegend: false, hoverinfo: "skip", meta: { selected: anchor },
        marker: { symbol: "circle-open", size: 28, color: "#000", line: { width: 3, color: "#000" } } });
    });
  }

  // The anomaly marker under the mouse (within its radius), whatever op marker plotly
  // picked as the closest point: a marker sits on the op that shows it.
  function anomalyNear(div, mouse) {
    if (!mouse) { return null; }
    var xa = div._fullLayout.xaxis, box = div.getBoundingClientRect();
    var best = null, bestDistance = 10;
    div.data.forEach(function (trace) {
      if (!trace.meta || !trace.meta.anomaly || trace.visible === "legendonly") { return; }
      var ya = div._fullLayout[trace.yaxis === "y2" ? "yaxis2" : "yaxis"];
      for (var i = 0; i < trace.x.length; i++) {
        var dx = box.left + xa._offset + xa.l2p(trace.x[i]) - mouse.clientX;
        var dy = box.top + ya._offset + ya.d2p(trace.y[i]) - mouse.clientY;
        var distance = Math.sqrt(dx * dx + dy * dy);
        if (distance < bestDistance) { bestDistance = distance; best = trace.customdata[i][0]; }
      }
    });
    return best;
  }

  function setupAnomalies(div) {
    var data = anomalyData();
    if (!data) { return; }
    document.querySelectorAll("a[data-anomaly]").forEach(function (link) {
      link.addEventListener("click", function (event) {
        event.preventDefault();
        showAnomaly(div, data, link.getAttribute("data-anomaly"), true);
      });
    });
    // A plain click listener: plotly's own click event depends on its throttled hover.
    div.addEventListener("click", function (event) {
      var anchor = anomalyNear(div, event);
      if (anchor) { showAnomaly(div, data, anchor, false); }
    });
    var hash = decodeURIComponent(location.hash.replace(/^#/, ""));
    var group = document.getElementById(hash);
    if (group && group.tagName === "DETAILS") { group.open = true; group.scrollIntoView(); }
    var anchor = hash.replace(/^anomaly-/, "");
    if (data[anchor]) { showAnomaly(div, data, anchor, true); }
  }

  // Cluster lanes (legendgroup "cluster"): a span's label is centred on its bar, so a zoom
  // into part of a long span would leave the label outside the view. On every zoom the bars
  // are cut to the visible range (their hover keeps the whole span), which keeps each
  // label in the middle of what is shown.
  function clusterSpans(figure) {
    var indices = [], whole = [];
    figure.data.forEach(function (trace, t) {
      if (trace.type === "bar" && trace.legendgroup === "cluster" && trace.base) {
        indices.push(t);
        whole.push({ base: trace.base.slice(), x: trace.x.slice() });
      }
    });
    return indices.length ? { indices: indices, whole: whole } : null;
  }

  function clipSpans(div, spans, range) {
    var bases = [], widths = [];
    spans.whole.forEach(function (trace) {
      if (!range) { bases.push(trace.base); widths.push(trace.x); return; }
      var lo = Number(range[0]), hi = Number(range[1]);
      var base = [], width = [];
      trace.base.forEach(function (start, i) {
        var stop = start + trace.x[i];
        if (stop <= lo || start >= hi) { base.push(start); width.push(trace.x[i]); return; }
        var from = Math.max(start, lo), to = Math.min(stop, hi);
        base.push(from); width.push(Math.max(to - from, 1e-4));
      });
      bases.push(base); widths.push(width);
    });
    return Plotly.restyle(div, { base: bases, x: widths }, spans.indices);
  }

  function setupTimeline(div, figure) {
    var meta = (figure.layout && figure.layout.meta && figure.layout.meta.timeline) || null;
    if (!meta) { return null; }
    // The container keeps the figure's height, so redraws on zoom keep the lanes' size.
    if (figure.layout.height) { div.style.height = figure.layout.height + "px"; }
    var indices = [], full = [];
    figure.data.forEach(function (trace, t) {
      if (trace.error_x && / bars$/.test(trace.name || "")) {
        indices.push(t);
        full.push({ x: trace.x, y: trace.y, half: trace.error_x.array });
      }
    });
    var boxes = boxSource(figure);
    var spans = clusterSpans(figure);
    var first = barsForRange(full, null, meta.bars_budget);
    indices.forEach(function (t, k) {
      figure.data[t].x = first[k].x; figure.data[t].y = first[k].y; figure.data[t].error_x.array = first[k].half;
    });
    return function () {
      div.on("plotly_relayout", function (change) {
        if (!("xaxis.range[0]" in change) && !change["xaxis.autorange"]) { return; }
        var range = change["xaxis.autorange"] ? null : [change["xaxis.range[0]"], change["xaxis.range[1]"]];
        if (boxes) { drawBoxes(div, boxes, range, meta.box_limit); }
        if (spans) { clipSpans(div, spans, range); }
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
        if (div.id === "timeline") { setupAnomalies(div); }
        div.setAttribute("data-rendered", "true");
      });
    });
    Promise.all(pending).then(function () {
      document.body.setAttribute("data-charts-rendered", String(divs.length));
    }, function (err) { console.error("chart failed:", err); });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); } else { draw(); }
})();
