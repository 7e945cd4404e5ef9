// dshq Usage page: draws the charts and lists from usage.report data as SVG
// and text nodes (DOM calls only: no HTML sink, so no Trusted Types policy),
// and asks again when the live feed commits an event that may state usage.
(function () {
  'use strict';
  const SVG = 'http://www.w3.org/2000/svg';
  // Ten categorical colors that stay apart from each other (Tableau 10):
  // a chart stacks at most maxSeries series, the smallest folded into
  // "other", so no two series share a color.
  const palette = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];
  const maxSeries = palette.length;
  const OTHER = 'other';
  const params = new URLSearchParams(location.search);
  if (!params.has('tz') && window.Intl) {
    const tz = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (tz && tz !== 'UTC') {
      params.set('tz', tz);
      location.replace('/usage?' + params.toString());
      return;
    }
  }

  const el = (name, attrs, text) => {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const num = (n) => Number(n || 0).toLocaleString('en-US');
  const money = (t) => t.totalCost === null || t.totalCost === undefined ? 'no price'
    : '$' + t.totalCost.toFixed(2) + (t.unpricedModels && t.unpricedModels.length ? ' + unpriced' : '');
  const short = (n) => (n >= 1e9 ? (n / 1e9).toFixed(1) + 'B' : n >= 1e6 ? (n / 1e6).toFixed(1) + 'M' : n >= 1e3 ? (n / 1e3).toFixed(1) + 'k' : String(Math.round(n * 100) / 100)).replace(/\.0(?=[kMB]$)/, '');

  // chart draws one stacked bar chart of value(row) per day and stack key.
  const stackKey = (data, r) => (data.stack === 'machine' ? r.machine : r.model) || '(none)';
  // stackOrder is the series in order of their tokens, one color per
  // series in both charts; past maxSeries the smallest are one "other".
  function stackOrder(data) {
    const totals = new Map();
    for (const r of data.days) totals.set(stackKey(data, r), (totals.get(stackKey(data, r)) || 0) + r.totalTokens);
    const keys = [...totals.keys()].sort((a, b) => totals.get(b) - totals.get(a) || (a < b ? -1 : 1));
    return keys.length > maxSeries ? [...keys.slice(0, maxSeries - 1), OTHER] : keys;
  }
  // niceStep is the smallest 1, 2, 2.5 or 5 × 10^n at or above v: the
  // axis's four steps read as round numbers.
  function niceStep(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v * (1 - 1e-9)) return m * p;
    return 10 * p;
  }
  const money4 = (v) => v === 0 ? '$0' : v < 0.01 ? '$' + Number(v.toPrecision(2)) : '$' + v.toFixed(2);

  function chart(box, data, keys, value, unit) {
    const days = [...new Set(data.days.map((r) => r.day))].sort();
    const cell = new Map();
    const shown = new Set(keys);
    for (const r of data.days) {
      const k = shown.has(stackKey(data, r)) ? stackKey(data, r) : OTHER;
      cell.set(r.day + '\u0000' + k, (cell.get(r.day + '\u0000' + k) || 0) + value(r));
    }
    let max = 0;
    for (const d of days) max = Math.max(max, keys.reduce((s, k) => s + (cell.get(d + '\u0000' + k) || 0), 0));
    const top = max > 0 ? 4 * niceStep(max / 4) : 0;
    const W = 920, H = 240, L = 64, B = 28, T = 10;
    const svg = el('svg', { viewBox: `0 0 ${W} ${H + 40 + 18 * Math.ceil(keys.length / 4)}`, class: 'chart-svg' });
    svg.appendChild(el('line', { x1: L, y1: T + H - B, x2: W, y2: T + H - B, class: 'axis' }));
    for (let i = 0; i <= 4; i++) {
      const y = T + (H - B) * (1 - i / 4);
      svg.appendChild(el('line', { x1: L, y1: y, x2: W, y2: y, class: 'grid' }));
      svg.appendChild(el('text', { x: L - 6, y: y + 4, class: 'tick', 'text-anchor': 'end' }, unit === '$' ? money4(top * i / 4) : short(top * i / 4)));
    }
    const slot = days.length ? (W - L) / days.length : 0;
    const bw = Math.max(2, Math.min(48, slot * 0.7));
    days.forEach((d, i) => {
      let y = T + H - B;
      const x = L + i * slot + (slot - bw) / 2;
      keys.forEach((k, j) => {
        const v = cell.get(d + '\u0000' + k) || 0;
        if (!v || !top) return;
        const h = (H - B - T) * v / top;
        y -= h;
        const rect = el('rect', { x: x, y: y, width: bw, height: Math.max(h, 0.5), fill: palette[j % palette.length], 'data-day': d, 'data-key': k });
        rect.appendChild(el('title', {}, `${d} · ${k}: ${unit === '$' ? '$' + v.toFixed(4) : num(v) + ' tokens'}`));
        svg.appendChild(rect);
      });
      if (days.length <= 16 || i % Math.ceil(days.length / 16) === 0) {
        svg.appendChild(el('text', { x: x + bw / 2, y: T + H - B + 16, class: 'tick', 'text-anchor': 'middle' }, d.slice(5)));
      }
    });
    keys.forEach((k, j) => {
      const lx = L + (j % 4) * 215, ly = T + H + 10 + 18 * Math.floor(j / 4);
      svg.appendChild(el('rect', { x: lx, y: ly - 9, width: 10, height: 10, fill: palette[j % palette.length] }));
      svg.appendChild(el('text', { x: lx + 16, y: ly, class: 'legend' }, k));
    });
    if (!days.length) svg.appendChild(el('text', { x: W / 2, y: H / 2, class: 'tick', 'text-anchor': 'middle' }, 'No usage in this range'));
    box.replaceChildren(svg);
  }

  function table(tbody, rows, label, link) {
    const trs = rows.map((r) => {
      const tr = document.createElement('tr');
      const name = document.createElement('td');
      name.className = 'mono';
      const text = label(r) || '(no workspace)';
      if (link) {
        const a = document.createElement('a');
        a.href = '/s/' + encodeURIComponent(text);
        a.textContent = text;
        name.appendChild(a);
      } else {
        name.textContent = text;
      }
      const tok = document.createElement('td');
      tok.className = 'num';
      tok.textContent = num(r.totalTokens);
      const cost = document.createElement('td');
      cost.className = 'num';
      cost.textContent = money(r);
      tr.append(name, tok, cost);
      return tr;
    });
    tbody.replaceChildren(...trs);
  }

  function render(data) {
    const keys = stackOrder(data);
    chart(document.getElementById('chart-tokens'), data, keys, (r) => r.totalTokens, 'tokens');
    chart(document.getElementById('chart-cost'), data, keys, (r) => r.totalCost || 0, '$');
    table(document.getElementById('top-sessions'), data.sessions || [], (r) => r.sessionId, true);
    table(document.getElementById('top-projects'), data.projects || [], (r) => r.project, false);
    document.getElementById('total-tokens').textContent = num(data.totals.totalTokens);
    document.getElementById('total-cost').textContent = money(data.totals);
    document.getElementById('total-calls').textContent = num(data.totals.calls);
    document.getElementById('usage-totals').dataset.generation = String(data.generation);
  }

  let data = JSON.parse(document.getElementById('usage-data').dataset.json);
  render(data);

  const status = document.getElementById('usage-status');
  const show = (state, text) => { status.hidden = false; status.dataset.state = state; status.textContent = text; };
  let want = 0, busy = false;
  async function refresh() {
    if (busy || want <= data.generation) return;
    busy = true;
    try {
      const q = new URLSearchParams(params);
      q.set('gen', String(want));
      const res = await fetch('/usage/data?' + q.toString(), { headers: { Accept: 'application/json' } });
      if (res.ok) {
        data = await res.json();
        render(data);
      }
    } finally {
      busy = false;
      if (want > data.generation) setTimeout(refresh, 250);
    }
  }
  const url = document.body.dataset.usageLive;
  if (url && window.EventSource) {
    const es = new EventSource(url);
    es.addEventListener('usage', (e) => { want = Math.max(want, JSON.parse(e.data).generation); refresh(); });
    es.addEventListener('status', (e) => {
      const s = JSON.parse(e.data);
      if (s.bus === 'connected') show('live', 'Feed connected'); else show('reconnecting', 'reconnecting…');
    });
    es.addEventListener('resync', () => { es.close(); location.reload(); });
    es.onerror = () => show('reconnecting', 'reconnecting…');
  }
})();
