"""The console's style sheet and its one script, served from /admin/static/ (no build step, no CDN)."""

from __future__ import annotations

CSS = """
:root { --fg: #1d2330; --muted: #6b7280; --line: #e3e6ec; --accent: #2f5bd3; --bad: #b42318; --ok: #067647;
        --warn: #b54708; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); }
body { margin: 0; background: #f7f8fa; }
header { display: flex; align-items: center; gap: 1.5rem; padding: .6rem 1.5rem; background: #111827; color: #fff; }
header .brand { font-weight: 600; }
header nav a { color: #cbd5e1; text-decoration: none; margin-right: 1rem; }
header nav a.here { color: #fff; border-bottom: 2px solid #fff; }
header .who { margin-left: auto; display: flex; gap: .6rem; align-items: center; color: #cbd5e1; }
main { padding: 1.2rem 1.5rem; max-width: 1300px; }
h1 { font-size: 1.3rem; margin: 0 0 1rem; }
h2 { font-size: 1rem; margin: 0 0 .5rem; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); }
th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top;
         font-size: .9rem; }
th { background: #f1f3f7; font-weight: 600; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: .85rem; }
pre { background: #fff; border: 1px solid var(--line); padding: .6rem; overflow-x: auto; white-space: pre-wrap; }
.state-up, .outcome-allowed, .outcome-listed, .pin-pinned { color: var(--ok); font-weight: 600; }
.state-down, .state-failed, .outcome-denied, .outcome-hidden, .pin-held, .pin-rejected {
  color: var(--bad); font-weight: 600; }
.state-starting, .state-connecting, .outcome-confirm, .pin-flagged, .pin-changed, .outcome-held {
  color: var(--warn); font-weight: 600; }
.muted { color: var(--muted); }
.facts { display: flex; gap: 2rem; margin-bottom: 1rem; flex-wrap: wrap; }
.facts div span { display: block; color: var(--muted); font-size: .8rem; }
form.inline { display: inline; }
form.filters { display: flex; gap: .5rem; flex-wrap: wrap; align-items: end; margin-bottom: 1rem; }
form.filters label, form.stack label { display: flex; flex-direction: column; font-size: .8rem; color: var(--muted); }
form.stack { display: grid; gap: .6rem; max-width: 640px; margin-bottom: 1rem; }
input, select, textarea, button { font: inherit; padding: .3rem .45rem; }
button { background: var(--accent); color: #fff; border: 0; border-radius: 4px; cursor: pointer; }
button.reject, button.quiet { background: #6b7280; }
a.button { display: block; text-align: center; background: var(--accent); color: #fff; padding: .5rem .8rem;
  border-radius: 4px; text-decoration: none; margin-bottom: 1rem; }
.diff .add { background: #e7f6ec; display: block; } .diff .del { background: #fdecea; display: block; }
.notice { padding: .5rem .8rem; background: #eef4ff; border: 1px solid #c7d7fe; margin-bottom: 1rem; }
.error { padding: .5rem .8rem; background: #fdecea; border: 1px solid #f5c2c0; margin-bottom: 1rem; }
.card { background: #fff; border: 1px solid var(--line); padding: 1rem; margin-bottom: 1rem; }
.login { max-width: 360px; margin: 10vh auto; }
details summary { cursor: pointer; }
h2.section { margin-top: 1.6rem; }
.charts { display: flex; flex-wrap: wrap; gap: .6rem; margin-bottom: .6rem; }
svg.chart { background: #fff; border: 1px solid var(--line); max-width: 100%; height: auto; }
svg.chart text { font-size: 10px; fill: var(--muted); }
svg.chart text.title { font-size: 11px; font-weight: 600; fill: var(--fg); }
svg.chart text.title .now { fill: var(--accent); }
svg.chart line.grid { stroke: var(--line); stroke-width: 1; }
svg.chart polyline { fill: none; stroke-width: 1.6; stroke-linejoin: round; }
svg.chart .line-0 { stroke: #2f5bd3; fill: #2f5bd3; } svg.chart polyline.line-0 { fill: none; }
svg.chart .line-1 { stroke: #b42318; fill: #b42318; } svg.chart polyline.line-1 { fill: none; }
svg.chart .line-2 { stroke: #067647; fill: #067647; } svg.chart polyline.line-2 { fill: none; }
svg.chart .line-3 { stroke: #b54708; fill: #b54708; } svg.chart polyline.line-3 { fill: none; }
svg.chart .line-4 { stroke: #7a5af8; fill: #7a5af8; } svg.chart polyline.line-4 { fill: none; }
svg.chart .line-5 { stroke: #0e9384; fill: #0e9384; } svg.chart polyline.line-5 { fill: none; }
svg.chart text.legend { stroke: none; }
svg.timeline { border: 0; background: transparent; display: block; width: 100%; height: auto; }
.windows a { margin-right: .2rem; } .windows a.here { font-weight: 600; color: var(--fg); text-decoration: none; }
svg.timeline .state-up { fill: #a6e3b8; } svg.timeline .state-warn { fill: #fedf89; }
svg.timeline .state-bad { fill: #f97066; } svg.timeline .state-muted { fill: #d0d5dd; }
svg.timeline .restart { fill: #b42318; }
.timelines { background: #fff; border: 1px solid var(--line); padding: .4rem .6rem; }
.columns { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
.failing { color: var(--bad); font-weight: 400; font-size: .8rem; }
.icons img.icon { vertical-align: middle; margin-right: .35rem; object-fit: contain; }
.icon-src { display: block; color: var(--muted); font-size: .75rem; word-break: break-all; }
.title { margin-left: .4rem; }
pre.stderr-tail { margin: .4rem 0 0; max-height: 12rem; overflow-y: auto; font-size: .78rem; background: #fbfbfc; }
"""

JS = """
// Live parts of a page: an element with data-live="URL" follows that server-sent event stream.
// "replace" events carry the element's new content, "prepend" events rows to put on top; both are HTML
// the server rendered and escaped.
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("[data-live]").forEach(function (element) {
    var source = new EventSource(element.dataset.live);
    source.addEventListener("open", function () { element.dataset.connected = "yes"; });
    source.addEventListener("replace", function (event) { element.innerHTML = event.data; });
    source.addEventListener("prepend", function (event) { element.insertAdjacentHTML("afterbegin", event.data); });
  });
  document.querySelectorAll("input[data-filter]").forEach(function (box) {
    var rows = document.querySelectorAll(box.dataset.filter);
    box.addEventListener("input", function () {
      var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
      rows.forEach(function (row) {
        var text = row.textContent.toLowerCase();
        row.hidden = !words.every(function (word) { return text.indexOf(word) >= 0; });
      });
    });
  });
});
"""
