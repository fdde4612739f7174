// Charts, drawn by Chart.js (Debian's libjs-chart.js, which hwfarmd serves
// from /usr/share/javascript). A chart is never the only place a number is
// shown: each view has its table too, and each canvas a text label.
import {h, replace} from "./dom.js";

const BAD = "#b42318", GOOD = "#1a7f37", REF = "#57606a", TARGET = "#0a58ca", BAND = "rgba(26,127,55,0.12)";

function canvas(el, label) {
  if (el._chart) { el._chart.destroy(); el._chart = null; }
  if (!window.Chart) {
    replace(el, h("p", {class: "empty"}, "Charts need the chart library (Debian's libjs-chart.js) served by hwfarmd; the tables show the same numbers."));
    return null;
  }
  const c = h("canvas", {role: "img", "aria-label": label});
  replace(el, c);
  return c;
}

function make(el, c, config) {
  config.options = {animation: false, responsive: true, maintainAspectRatio: false, ...config.options};
  el._chart = new window.Chart(c, config);
  return el._chart;
}

const timeTicks = {callback: v => new Date(v).toISOString().slice(5, 16).replace("T", " ")};

// The effective tier over time, from the transitions (newest first).
export function tierChart(el, tier) {
  const c = canvas(el, `effective tier over time; now ${tier.effective_tier}`);
  if (!c) return;
  const points = [...tier.transitions].reverse().map(t => ({x: Date.parse(t.at), y: t.effective}));
  if (points.length) points.unshift({x: points[0].x - 3600e3, y: tier.transitions[tier.transitions.length - 1].from});
  points.push({x: Date.now(), y: tier.effective_tier});
  make(el, c, {type: "line", data: {datasets: [{label: "effective tier", data: points, stepped: true, borderColor: TARGET, pointRadius: 3}]},
    options: {scales: {x: {type: "linear", ticks: timeTicks},
      y: {reverse: true, min: 0.5, max: 4.5, afterBuildTicks: axis => { axis.ticks = [1, 2, 3, 4].map(value => ({value})); },
          ticks: {callback: v => (v === 4 ? "suspended" : `tier ${v}`)}}}, plugins: {legend: {display: false}}}});
}

// At most `max` points of `values` (min and max of each bucket), as {x, y}.
export function downsample(values, max = 2000) {
  const n = values.length;
  if (n <= max) return Array.from(values, (y, x) => ({x, y}));
  const out = [];
  const step = n / (max / 2);
  for (let b = 0; b < n; b += step) {
    let lo = Math.floor(b), hi = Math.min(n, Math.floor(b + step)), mi = lo, ma = lo;
    for (let i = lo; i < hi; ++i) { if (values[i] < values[mi]) mi = i; if (values[i] > values[ma]) ma = i; }
    out.push(...(mi < ma ? [mi, ma] : [ma, mi]).map(i => ({x: i, y: values[i]})));
  }
  return out;
}

// A target's values over the reference's, by position.
export function valuesChart(el, target, reference, names) {
  const c = canvas(el, `${names[0]} and ${names[1]} values by position (${target.length} values)`);
  if (!c) return;
  make(el, c, {type: "line", data: {datasets: [
      {label: names[0], data: downsample(target), borderColor: TARGET, pointRadius: target.length > 64 ? 0 : 2, borderWidth: 1.5},
      {label: names[1], data: downsample(reference), borderColor: REF, borderDash: [5, 3], pointRadius: 0, borderWidth: 1.5}]},
    options: {parsing: false, scales: {x: {type: "linear", title: {display: true, text: "position"}}}}});
}

// A histogram of target - reference.
export function histogramChart(el, diffs, bins = 40) {
  const finite = diffs.filter(Number.isFinite);
  const c = canvas(el, `histogram of the differences, ${finite.length} values`);
  if (!c || !finite.length) return;
  let lo = Math.min(...finite), hi = Math.max(...finite);
  if (lo === hi) { lo -= 0.5; hi += 0.5; }
  const width = (hi - lo) / bins;
  const counts = new Array(bins).fill(0);
  for (const d of finite) counts[Math.min(bins - 1, Math.floor((d - lo) / width))]++;
  make(el, c, {type: "bar", data: {labels: counts.map((_, i) => (lo + (i + 0.5) * width).toPrecision(3)),
    datasets: [{label: "count", data: counts, backgroundColor: TARGET, barPercentage: 1, categoryPercentage: 1}]},
    options: {plugins: {legend: {display: false}}, scales: {x: {title: {display: true, text: "target − reference"}}}}});
}

// One series of an output's history: its values, its band, and the points
// out of the band in red (with a larger cross point: not colour alone).
export function historyChart(el, series, higherIsBetter) {
  const pts = series.points.map((p, i) => ({...p, i}));
  const c = canvas(el, `${series.board_type} ${series.board}: ${pts.length} runs`);
  if (!c) return;
  const val = pts.map(p => ({x: p.i, y: p.value}));
  make(el, c, {type: "line", data: {labels: pts.map(p => p.commit || p.run), datasets: [
      {label: "band low", data: pts.map(p => ({x: p.i, y: p.low})), borderColor: "transparent", pointRadius: 0, fill: false},
      {label: "usual band", data: pts.map(p => ({x: p.i, y: p.high})), borderColor: "transparent", backgroundColor: BAND, pointRadius: 0, fill: "-1"},
      {label: "median", data: pts.map(p => ({x: p.i, y: p.median})), borderColor: GOOD, borderDash: [4, 4], pointRadius: 0, borderWidth: 1},
      {label: higherIsBetter ? "PCC" : "max error", data: val, borderColor: TARGET, borderWidth: 1.5,
       pointBackgroundColor: pts.map(p => (p.out ? BAD : TARGET)), pointStyle: pts.map(p => (p.out ? "crossRot" : "circle")),
       pointRadius: pts.map(p => (p.out ? 7 : 3)), pointBorderColor: pts.map(p => (p.out ? BAD : TARGET)), pointBorderWidth: 2}]},
    options: {parsing: false, spanGaps: true, scales: {x: {type: "linear", ticks: {callback: v => (pts[v] ? pts[v].commit || "" : "")}}},
      plugins: {legend: {labels: {filter: item => item.text !== "band low"}}}}});
}
