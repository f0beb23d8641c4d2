"""The report page's own style and script (plain JS, no library besides the plotly.js embedded once).

The script reads the data embedded once (`<script type="application/json" id="rlpatch-data">`),
draws the overview (every request's error by layer, one heatmap) at load, filters the pairs table as
one types (or as `#q=WORDS` in the address says), and draws a request's plot only when its `<details>` is opened (a table link or a click on
the overview opens it). When the overview is drawn it sets `data-ready` on the body (ms since load,
read by the browser test and the benchmark).
"""

STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 100%; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; font-size: 0.9em; vertical-align: top; }
th { background: #f0f0f0; }
.diverges, .failed, .undecided { color: #c62828; font-weight: bold; } .agrees, .within-floor { color: #2e7d32; }
.verdict { font-size: 1.2em; padding: 0.6em; border-left: 6px solid #c62828; background: #fff5f5; }
.verdict.clean { border-color: #2e7d32; background: #f4fbf4; }
.summary { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
.summary table { margin: 0; }
details.request { margin: 0.3em 0; } details.request[open] { margin-bottom: 1.5em; }
details.request > summary { cursor: pointer; }
#pairs-filter { width: 30em; margin-bottom: 0.5em; }
code { font-size: 0.85em; }
"""

# Before anything else runs: a fetch the Content-Security-Policy blocked is marked on the page
# (`data-blocked`), so that a test sees an attempt even though nothing left the machine.
WATCH = ('document.addEventListener("securitypolicyviolation", function (e) {'
         ' var html = document.documentElement;'
         ' html.dataset.blocked = (html.dataset.blocked || "") + " " + e.blockedURI; });')

SCRIPT = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("rlpatch-data").textContent);
  var names = data.modules;

  function unlog(n) { return Math.pow(10, n / 1000); }

  function logTicks(all) {
    var every = Math.max(1, Math.floor(all.length / 40));
    var picked = all.filter(function (_, i) { return i % every === 0; });
    return {tickvals: picked.map(function (t) { return t[0]; }), ticktext: picked.map(function (t) { return t[1]; })};
  }

  function drawRequest(index, where) {
    var r = data.requests[index];
    if (r.s < 0) {
      where.textContent = "no judged module: msprobe compared nothing usable for this request.";
      return;
    }
    var sequence = data.sequences[r.s];
    var x = sequence.map(function (_, i) { return i; });
    var labels = sequence.map(function (m) { return names[m]; });
    var hi = r.hi.map(unlog);
    var floor = [];
    r.floor.forEach(function (step, k) {
      var end = k + 1 < r.floor.length ? r.floor[k + 1][0] : sequence.length;
      for (var i = step[0]; i < end; i++) { floor.push(unlog(step[1])); }
    });
    var traces = [{x: x, y: hi, mode: "lines+markers", name: "output error (max over ranks)",
                   marker: {size: 4}, line: {width: 1, color: "#37474f"}, customdata: labels,
                   hovertemplate: "%{customdata}<br>error %{y:.3g}<extra></extra>"}];
    if (r.lo) {
      traces.push({x: x, y: r.lo.map(unlog), mode: "lines", name: "min over ranks", customdata: labels,
                   line: {width: 1, color: "#90a4ae", dash: "dot"},
                   hovertemplate: "%{customdata}<br>min %{y:.3g}<extra></extra>"});
    }
    traces.push({x: x, y: floor, mode: "lines", name: "noise floor", hoverinfo: "skip",
                 line: {width: 1, color: "#2e7d32", dash: "dash", shape: "hv"}});
    var shapes = [];
    if (r.culprit >= 0) {
      traces.push({x: [r.culprit], y: [hi[r.culprit]], mode: "markers", name: "culprit: " + labels[r.culprit],
                   marker: {size: 14, color: "#c62828", symbol: "x"}, customdata: [labels[r.culprit]],
                   hovertemplate: "culprit %{customdata}<br>error %{y:.3g}<extra></extra>"});
      shapes.push({type: "line", xref: "x", yref: "paper", x0: r.culprit, x1: r.culprit, y0: 0, y1: 1,
                   line: {color: "#c62828", width: 1, dash: "dot"}});
    }
    var ticks = logTicks(data.ticks[r.s]);
    Plotly.newPlot(where, traces, {
      title: {text: "request " + r.id + ": output error per module (" + r.ranks + " rank(s))"},
      height: 420, margin: {l: 60, r: 20, t: 50, b: 60}, autosize: true, shapes: shapes,
      legend: {orientation: "h", y: -0.2}, hovermode: "closest",
      xaxis: {title: {text: "module in forward order (ticks: decoder layers)"}, tickvals: ticks.tickvals,
              ticktext: ticks.ticktext, showgrid: true},
      yaxis: {title: {text: "relative error"}, type: "log", exponentformat: "power"}
    }, {responsive: true});
  }

  function openRequest(index) {
    var box = document.getElementById("r-" + index);
    if (!box) { return; }
    box.open = true;
    box.scrollIntoView();
  }

  document.querySelectorAll("details.request").forEach(function (box) {
    box.addEventListener("toggle", function () {
      var where = box.querySelector(".plot");
      if (box.open && !where.dataset.drawn) {
        where.dataset.drawn = "1";
        drawRequest(Number(box.dataset.k), where);
      }
    });
  });
  function fromHash() {
    var found = /^#r-(\d+)$/.exec(location.hash);
    if (found) { openRequest(Number(found[1])); }
    var query = /^#q=(.*)$/.exec(location.hash);  // a link that opens the table filtered
    if (query) { filter.value = decodeURIComponent(query[1]); applyFilter(); }
  }
  window.addEventListener("hashchange", fromHash);

  var filter = document.getElementById("pairs-filter");
  var verdict = document.getElementById("pairs-verdict");
  var rows = Array.prototype.slice.call(document.querySelectorAll("#pairs tbody tr"));
  var shown = document.getElementById("pairs-shown");
  function applyFilter() {
    var words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    var wanted = verdict.value;
    var count = 0;
    rows.forEach(function (row) {
      var text = row.dataset.text || (row.dataset.text = row.textContent.toLowerCase());
      var keep = (!wanted || row.dataset.verdict === wanted) &&
                 words.every(function (w) { return text.indexOf(w) >= 0; });
      row.style.display = keep ? "" : "none";
      if (keep) { count += 1; }
    });
    shown.textContent = count + " of " + rows.length + " pair(s) shown";
  }
  filter.addEventListener("input", applyFilter);
  verdict.addEventListener("change", applyFilter);

  function ready() { document.body.dataset.ready = String(Math.round(performance.now())); }
  var o = data.overview;
  var where = document.getElementById("overview");
  if (!o.z.length || !o.columns.length) { where.textContent = "no judged module in any request."; ready(); fromHash(); return; }
  Plotly.newPlot(where, [{
    type: "heatmap", z: o.z, x: o.columns, y: o.rows.map(function (_, i) { return i; }),
    customdata: o.z.map(function (row, i) { return row.map(function () { return o.rows[i]; }); }),
    colorscale: [[0, "#1b5e20"], [0.5, "#fffde7"], [1, "#b71c1c"]], zmid: 0, zmin: -3, zmax: 3,
    colorbar: {title: {text: "log10(error / floor)"}}, hoverongaps: false,
    hovertemplate: "request %{customdata}<br>%{x}: log10(error / floor) %{z:.2f}<extra></extra>"
  }], {
    title: {text: "every request: its largest output error in each layer, against the floor (click: its plot)"},
    height: Math.min(900, Math.max(260, 12 * o.rows.length + 140)), margin: {l: 60, r: 20, t: 50, b: 60},
    xaxis: {title: {text: "layer in forward order"}, type: "category"},
    yaxis: {title: {text: "request (" + o.rows.length + ")"}, autorange: "reversed", showticklabels: false}
  }, {responsive: true}).then(function () {
    where.on("plotly_click", function (event) {
      if (event.points.length) { location.hash = "#r-" + event.points[0].y; }
    });
    ready();
    fromHash();
  });
})();
"""
