// Draws every <div class="chart" data-figure="ID"> from the JSON in <script id="ID">
// with the bundled plotly.min.js. When all are drawn, <body data-charts-rendered="N">.
(function () {
  "use strict";
  function draw() {
    var divs = Array.prototype.slice.call(document.querySelectorAll("div.chart[data-figure]"));
    var pending = divs.map(function (div) {
      var source = document.getElementById(div.getAttribute("data-figure"));
      var figure = JSON.parse(source.textContent);
      var config = Object.assign({ responsive: true, displaylogo: false }, figure.config || {});
      return Plotly.newPlot(div, figure.data, figure.layout || {}, config).then(function () {
        div.setAttribute("data-rendered", "true");
      });
    });
    Promise.all(pending).then(function () {
      document.body.setAttribute("data-charts-rendered", String(divs.length));
    }, function (err) { console.error("chart failed:", err); });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); } else { draw(); }
})();
