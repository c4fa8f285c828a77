// The scales and SVG charts of the loadgen HTML report (line charts, bars, hover tips). html.rs
// puts this file and report.js, in that order, inside one strict-mode function: they share its
// names (esc, thousands, charts, logLatency... are report.js's), so neither is a script alone.

  // ------------------------------------------------------------------ scales and charts
  function niceStep(span, n) {
    const raw = span / Math.max(1, n), mag = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * mag >= raw) return m * mag;
    return 10 * mag;
  }

  // Maps values of one axis to 0..1 and names its ticks. Types: lin, log (base 10), log2 (ticks
  // given), pct (percentiles on HdrHistogram's 1/(1-p) axis, 0% to 99.999%).
  function scale(ax, vals, px) {
    const type = ax.type || 'lin';
    vals = vals.filter(v => Number.isFinite(v) && (v > 0 || type === 'lin' || type === 'pct'));
    let t = v => v, lo, hi, ticks;
    if (type === 'pct') {
      t = p => Math.min(5, -Math.log10(Math.max(1e-5, 1 - p / 100)));
      lo = 0;
      hi = Math.max(2, Math.min(5, Math.ceil(Math.max(0, ...vals.map(t)) - 1e-9)));
      ticks = [0, 90, 99, 99.9, 99.99, 99.999].filter(p => t(p) <= hi + 1e-9);
    } else if (type === 'log' || type === 'log2') {
      const base = type === 'log' ? 10 : 2;
      t = v => Math.log(v) / Math.log(base);
      const tv = vals.map(t);
      lo = tv.length ? Math.min(...tv) : 0;
      hi = tv.length ? Math.max(...tv) : 1;
      if (type === 'log' && ax.tight && tv.length) {
        // The data's own range, not whole decades: points within one decade spread out.
        const pad = Math.max(0.03, (hi - lo) * 0.08);
        lo -= pad; hi += pad;
        ticks = [];
        for (let e = Math.floor(lo); e <= Math.ceil(hi); e++) {
          for (const m of [1, 1.5, 2, 3, 5, 7]) {
            const v = m * Math.pow(10, e);
            if (t(v) >= lo - 1e-9 && t(v) <= hi + 1e-9) ticks.push(+v.toPrecision(6));
          }
        }
        while (ticks.length > Math.max(2, px / 34)) ticks = ticks.filter((_, k) => k % 2 === 0);
      } else if (type === 'log') {
        lo = Math.floor(lo + 1e-9);
        hi = Math.max(lo + 1, Math.ceil(hi - 1e-9));
        ticks = [];
        for (let e = lo; e <= hi; e++) {
          for (const m of hi - lo <= 2 ? [1, 2, 5] : [1]) {
            const v = m * Math.pow(10, e);
            if (t(v) <= hi + 1e-9) ticks.push(+v.toPrecision(6));
          }
        }
      } else {
        if (hi - lo < 1e-9) { lo -= 1; hi += 1; }
        const pad = (hi - lo) * 0.04;
        lo -= pad; hi += pad;
        ticks = [...new Set(ax.ticks || [])].sort((a, b) => a - b);
        while (ticks.length > Math.max(2, px / 34)) ticks = ticks.filter((_, k) => k % 2 === 0);
      }
    } else {
      lo = ax.min != null ? ax.min : Math.min(0, ...vals);
      const max = vals.length ? Math.max(...vals) : lo + 1;
      const step = niceStep(Math.max(max - lo, 1e-9), Math.max(2, Math.floor(px / 60)));
      hi = lo + Math.max(1, Math.ceil((max - lo) / step - 1e-9)) * step;
      ticks = [];
      for (let v = lo; v <= hi + step / 1e6; v += step) ticks.push(+v.toPrecision(10));
    }
    return { pos: v => (t(v) - lo) / (hi - lo || 1), ticks, fmt: ax.fmt || String };
  }

  const svgOpen = (W, H, label) =>
    `<svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(label)}">`;
  const widthOf = box => Math.max(300, Math.round(box.clientWidth || 640));

  function legend(items) {
    return '<div class="legend">' + items.filter(s => s.name).map(s => s.sym
      ? `<span><b style="color:${s.color}">${s.sym}</b> ${esc(s.name)}</span>`
      : `<span><i style="border-top-color:${s.color};border-top-style:` +
        `${s.dash === 'dot' ? 'dotted' : s.dash ? 'dashed' : 'solid'}"></i>${esc(s.name)}</span>`).join('') + '</div>';
  }

  // A line chart. o: {x, y: axes {type, label, fmt, min, ticks}; series: [{name, color, dash,
  // dots, points: [[x, y, hover text, point colour, label]]}]; marks: [{x, shape: tri|dia, row, color,
  // tip}] drawn along the bottom; notes: [{x, y, text}]; hline: {y}; legend}.
  function drawXY(box, o) {
    const W = widthOf(box), H = Math.round(Math.max(240, Math.min(400, W * 0.55)));
    const m = { l: 62, r: 16, t: 14, b: 44 }, pw = W - m.l - m.r, ph = H - m.t - m.b;
    const logX = o.x.type === 'log' || o.x.type === 'log2', logY = o.y.type === 'log';
    const ok = p => Number.isFinite(p[0]) && Number.isFinite(p[1]) && (!logY || p[1] > 0) &&
      (!logX || p[0] > 0);
    const all = o.series.flatMap(s => s.points).filter(ok);
    const xs = scale(o.x, all.map(p => p[0]), pw);
    const bands = (o.bands || []).filter(b => ok([1, b.lo]) && ok([1, b.hi]));
    const ys = scale(o.y, all.map(p => p[1]).concat(o.hline ? [o.hline.y] : [],
      bands.flatMap(b => [b.lo, b.hi])), ph);
    const X = v => +(m.l + xs.pos(v) * pw).toFixed(1);
    const Y = v => +(m.t + ph - ys.pos(v) * ph).toFixed(1);
    let s = svgOpen(W, H, o.label || '');
    for (const v of ys.ticks) {
      const y = Y(v);
      s += `<line class="grid" x1="${m.l}" x2="${W - m.r}" y1="${y}" y2="${y}"/>` +
        `<text class="tick" x="${m.l - 6}" y="${y + 4}" text-anchor="end">${esc(ys.fmt(v))}</text>`;
    }
    let lastX = -1e9;
    for (const v of xs.ticks) {
      const x = X(v);
      s += `<line class="grid" x1="${x}" x2="${x}" y1="${m.t}" y2="${m.t + ph}"/>`;
      if (x - lastX < 30) continue;   // keep tick labels apart on narrow screens
      lastX = x;
      const anchor = x > W - m.r - 24 ? 'end' : 'middle';   // the last label stays on the page
      s += `<text class="tick" x="${x}" y="${m.t + ph + 16}" text-anchor="${anchor}">` +
        `${esc(xs.fmt(v))}</text>`;
    }
    s += `<path class="axis" fill="none" d="M${m.l} ${m.t}V${m.t + ph}H${W - m.r}"/>` +
      `<text x="${m.l + pw / 2}" y="${H - 6}" text-anchor="middle">${esc(o.x.label)}</text>` +
      `<text transform="translate(14 ${m.t + ph / 2}) rotate(-90)" text-anchor="middle">` +
      `${esc(o.y.label)}</text>`;
    const hov = [];
    // A 95% CI: a shaded band across the plot, under the lines; its tip at its left end.
    for (const b of bands) {
      const y1 = Y(b.hi), y2 = Y(b.lo);
      s += `<rect class="band" x="${m.l}" y="${y1}" width="${pw}" height="${Math.max(1, y2 - y1)}" ` +
        `fill="${b.color}" fill-opacity="0.15"/>`;
      hov.push({ x: m.l + 4, y: (y1 + y2) / 2, tip: b.tip });
    }
    if (o.hline) {
      // Its label goes in the legend, where no point can cover it.
      const y = Y(o.hline.y);
      s += `<line class="hline" x1="${m.l}" x2="${W - m.r}" y1="${y}" y2="${y}" stroke="${RED}" ` +
        'stroke-dasharray="6 4" stroke-width="1.5"/>';
    }
    for (const se of o.series) {
      const p = se.points.filter(ok);
      if (se.line !== false && p.length > 1) {
        s += `<polyline fill="none" stroke="${se.line || se.color}" stroke-width="${se.width || 2}"` +
          (se.dash ? ` stroke-dasharray="${se.dash}"` : '') + ' stroke-linejoin="round" points="' +
          p.map(q => X(q[0]) + ',' + Y(q[1])).join(' ') + '"/>';
      }
      for (const q of p) {
        if (se.dots || p.length === 1) {
          s += `<circle cx="${X(q[0])}" cy="${Y(q[1])}" r="${se.r || 3}" fill="${q[3] || se.color}"/>`;
        }
        if (q[4]) s += `<text class="tick" x="${X(q[0]) + 7}" y="${Y(q[1]) - 6}">${esc(q[4])}</text>`;
        hov.push({ x: X(q[0]), y: Y(q[1]), tip: q[2] });
      }
    }
    for (const k of o.marks || []) {
      if (!ok([k.x, 1])) continue;
      const x = X(k.x), y = m.t + ph - 8 - (k.row || 0) * 12;
      s += k.shape === 'dia'
        ? `<path d="M${x} ${y - 5}l5 5-5 5-5-5z" fill="${k.color}"/>`
        : `<path d="M${x} ${y - 5}l5 9h-10z" fill="${k.color}"/>`;
      hov.push({ x, y, tip: k.tip });
    }
    for (const n of o.notes || []) {
      if (!ok([n.x, n.y])) continue;
      const x = X(n.x), y = Y(n.y);
      s += `<circle cx="${x}" cy="${y}" r="7" fill="none" stroke="${n.color || RED}" stroke-width="2"/>` +
        `<text x="${Math.min(x, W - m.r - 40)}" y="${Math.max(y - 12, 12)}" text-anchor="middle" ` +
        `fill="${n.color || RED}">${esc(n.text)}</text>`;
    }
    s += '<circle class="hot" r="6" cx="-99" cy="-99"/></svg>';
    box.innerHTML = s + legend(o.legend || o.series);
    hover(box, hov, W);
  }

  // Horizontal bars, the name above each bar (long names fit at any width). o: {x: {label, fmt},
  // bars: [{name, value, color, text, tip}]}.
  function drawBars(box, o) {
    const W = widthOf(box), row = 38, m = { l: 6, r: 16, t: 4, b: 40 }, valW = 118;
    const H = m.t + row * o.bars.length + m.b, pw = W - m.l - m.r - valW, ph = row * o.bars.length;
    const xs = scale({ type: 'lin', min: 0 }, o.bars.map(b => b.value), pw);
    let s = svgOpen(W, H, o.x.label);
    for (const v of xs.ticks) {
      const x = +(m.l + xs.pos(v) * pw).toFixed(1);
      s += `<line class="grid" x1="${x}" x2="${x}" y1="${m.t}" y2="${m.t + ph}"/>` +
        `<text class="tick" x="${x}" y="${m.t + ph + 16}" text-anchor="${v ? 'middle' : 'start'}">` +
        `${esc(o.x.fmt(v))}</text>`;
    }
    s += `<text x="${m.l + pw / 2}" y="${H - 6}" text-anchor="middle">${esc(o.x.label)}</text>`;
    const hov = [];
    o.bars.forEach((b, i) => {
      const y = m.t + i * row, w = Math.max(1, +(xs.pos(b.value) * pw).toFixed(1));
      s += `<text x="${m.l}" y="${y + 13}">${esc(b.name)}</text>` +
        `<rect x="${m.l}" y="${y + 18}" width="${w}" height="14" rx="2" fill="${b.color}"/>` +
        `<text x="${m.l + w + 6}" y="${y + 30}">${esc(b.text)}</text>`;
      hov.push({ x: m.l + w, y: y + 25, box: [m.l, y, W - m.r, y + row], tip: b.tip });
    });
    s += '<circle class="hot" r="6" cx="-99" cy="-99"/></svg>';
    box.innerHTML = s;
    hover(box, hov, W);
  }

  // Hover (or touch) shows the nearest point's values in the #tip box.
  function hover(box, pts, W) {
    const svg = box.querySelector('svg'), hot = svg.querySelector('.hot'), tip = $('tip');
    const hide = () => { tip.hidden = true; hot.setAttribute('cx', -99); };
    const move = e => {
      const r = svg.getBoundingClientRect(), k = W / r.width;
      const mx = (e.clientX - r.left) * k, my = (e.clientY - r.top) * k;
      let best = null, bd = 1600 * k * k;
      for (const p of pts) {
        const inBox = p.box && mx >= p.box[0] && mx <= p.box[2] && my >= p.box[1] && my <= p.box[3];
        const d = inBox ? 0 : (p.x - mx) ** 2 + (p.y - my) ** 2;
        if (d < bd) { bd = d; best = p; }
      }
      if (!best) return hide();
      hot.setAttribute('cx', best.x);
      hot.setAttribute('cy', best.y);
      tip.textContent = best.tip;
      tip.hidden = false;
      let x = e.clientX + 14, y = e.clientY + 14;
      if (x + tip.offsetWidth > innerWidth - 4) x = e.clientX - tip.offsetWidth - 14;
      if (y + tip.offsetHeight > innerHeight - 4) y = e.clientY - tip.offsetHeight - 14;
      tip.style.left = Math.max(4, x) + 'px';
      tip.style.top = Math.max(4, y) + 'px';
    };
    svg.addEventListener('pointermove', move);
    svg.addEventListener('pointerdown', move);
    svg.addEventListener('pointerleave', hide);
  }

  const chartBox = (id, title) =>
    `<div class="chart">${title ? `<h3>${title}</h3>` : ''}<div id="c-${id}"></div></div>`;
  const addChart = (id, draw) => charts.push({ id: 'c-' + id, draw });
  const latencyAxis = label => ({ type: logLatency ? 'log' : 'lin', min: 0, label, fmt: tickUs });
  const controls = () => '<label class="controls"><input type="checkbox" class="loglat"' +
    (logLatency ? ' checked' : '') + '> latency axes on a log scale</label>';
