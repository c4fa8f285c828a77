// The loadgen HTML report: reads the result embedded in #data and draws its tables and SVG
// charts. Hand-written, no library. Each chart is drawn at its box's width (viewBox in pixels)
// and redrawn when the window is resized, so its text stays readable on a phone and a desktop.
// The body gets data-ready="1" when everything is drawn, data-error="..." when something failed.
// html.rs puts charts.js (the scales and SVG charts) and this file inside one strict-mode
// function; charts.js comes first, and the names of both are shared.
  const COLORS = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1',
    '#ff9da7', '#9c755f', '#bab0ac'];
  const RED = '#b3261e', ORANGE = '#e67e00', GREEN = '#2e7d32', GREY = '#5b6474';
  const color = i => COLORS[i % COLORS.length];
  const $ = id => document.getElementById(id);
  const esc = s => String(s).replace(/[&<>"']/g, c => '&#' + c.charCodeAt(0) + ';');
  const thousands = n => String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  // As the text report: 87.3µs, 1.24ms, 2.10s.
  const micros = us => us >= 1e6 ? (us / 1e6).toFixed(2) + 's'
    : us >= 1e3 ? (us / 1e3).toFixed(2) + 'ms' : us.toFixed(1) + 'µs';
  // Axis ticks: 100µs, 2.5ms, 1s; 20k, 1.5M.
  const tickUs = us => us >= 1e6 ? +(us / 1e6).toPrecision(3) + 's'
    : us >= 1e3 ? +(us / 1e3).toPrecision(3) + 'ms' : +us.toPrecision(3) + 'µs';
  const tickNum = v => v >= 1e6 ? +(v / 1e6).toPrecision(3) + 'M'
    : v >= 1e3 ? +(v / 1e3).toPrecision(3) + 'k' : String(+v.toPrecision(4));
  const pctText = p => +p.toFixed(4) + '%';
  const charts = [];
  let logLatency = true;

  // Names shown for runs (or sweeps): the label a script gave them, else the kind, numbered
  // when kinds repeat.
  function names(list) {
    return list.map(r => {
      if (r.label) return r.label;
      const same = list.filter(o => o.kind === r.kind);
      return same.length > 1 ? r.kind + ' #' + (same.indexOf(r) + 1) : r.kind;
    });
  }

  function settingsLine(R) {
    const s = R.settings;
    const stop = s.requests != null ? thousands(s.requests) + ' requests'
      : s.duration_s != null ? s.duration_s + 's' : '';
    const rate = s.rate != null ? `, fixed rate ${s.rate}/s (${s.arrival})` : '';
    const sw = (R.sweeps || [])[0];
    const conns = sw ? 'connections swept: ' + sw.steps.map(x => x.connections).join(',')
      : s.connections + ' connections';
    return `${conns} x ${s.pipeline} in flight, ${s.threads} threads, ${stop} after ` +
      `${s.warmup_s}s warm-up, keys ${s.keys} ${s.dist}, ${s.mode} mode` +
      `${s.verify ? ', verify' : ''}${rate}, ${s.seeds ? 'seeds ' + s.seeds.join(',') : 'seed ' + s.seed}, timeout ${s.timeout_ms}ms, ` +
      `interval ${s.interval_ms}ms${s.query ? ', query: ' + s.query : ''}` +
      `${s.mix ? ', mix ' + s.mix : ''}${s.txn ? ', ' + s.txn + ' writes per transaction' : ''}`;
  }

  function header(R) {
    const m = R.machine || {};
    let h = '<h1>loadgen report</h1><p class="meta">' + esc(R.started_at) + ' · loadgen ' +
      esc(R.loadgen_version) + ' · ' + esc(m.cores) + ' cores, ' + esc(m.os) +
      (m.hostname ? ' on ' + esc(m.hostname) : '') +
      (R.instance ? ' · ' + esc(R.instance) : '') + '</p>' +
      '<div class="settings" id="settings">settings ' + esc(settingsLine(R)) + '</div>';
    if (R.interrupted) h += '<div class="banner">interrupted: results cover the time until Ctrl-C</div>';
    return h;
  }

  // ------------------------------------------------------------------ summary per run
  const cell = (id, value, text, cls) =>
    `<td id="${id}" data-value="${esc(value)}"${cls ? ` class="${cls}"` : ''}>${text}</td>`;

  function serverCell(r, i) {
    const s = r.server_observed;
    if (!s) return `<td id="server-${i}" class="note">not read</td>`;
    if (s.delta == null) {
      return `<td id="server-${i}" class="note">counter unavailable: ${esc(s.note || '')}</td>`;
    }
    return `<td id="server-${i}" data-value="${s.delta}" data-matches="${s.matches}">` +
      `${esc(s.source)} = ${thousands(s.delta)} (loadgen sent ${thousands(s.expected)}), ` +
      (s.matches && s.shared ? '<span class="note">includes the other generators\' (--instance)</span>'
        : s.matches ? '<span class="ok">matches</span>' : '<span class="bad">counts differ</span>') +
      (s.redirects ? `<br><span class="note">redirects followed: ${thousands(s.redirects.moved)} MOVED, ` +
        `${thousands(s.redirects.ask)} ASK, ${thousands(s.redirects.tryagain)} TRYAGAIN, ` +
        `${thousands(s.redirects.clusterdown || 0)} CLUSTERDOWN; slot map read ${thousands(s.redirects.map_reads || 0)} times</span>` : '') +
      (s.members || []).map((m, k) => `<br><span id="server-${i}-member-${k}" data-value="${m.delta}" ` +
        `data-matches="${m.matches}">${esc(m.server)}: ${thousands(m.delta)} (loadgen sent ${thousands(m.expected)}), ` +
        (m.not_comparable ? `<span class="note">not comparable: ${esc(m.note || '')}</span>`
          : m.matches ? '<span class="ok">matches</span>' : '<span class="bad">counts differ</span>') +
        (m.latency ? `<span id="server-${i}-member-${k}-latency" data-value="${m.latency.p99}">, ` +
          `share ${(m.share * 100).toFixed(1)}%, p50 ${micros(m.latency.p50)} ` +
          `p99 ${micros(m.latency.p99)} max ${micros(m.latency.max)}</span>` : '') + '</span>').join('') +
      '</td>';
  }

  // `server 1, timeout 2`: the error kinds that occurred.
  const errorKinds = errors => Object.entries(errors || {}).filter(e => e[1] > 0)
    .map(e => e[0] + ' ' + thousands(e[1]));
  // `synchronous_commit=off, fsync=on`: the server's durability settings of a run that writes.
  const durabilityText = r => Object.entries(r.durability || {}).map(e => e[0] + '=' + e[1]).join(', ');

  // `, TLS 1.3 <cipher> (certificate verified)` or `, plain`, with the socket path before it,
  // as the text report's connect line says it.
  const over = r => {
    const path = r.socket ? ` over ${r.transport} ${r.socket}` : '';
    if (!r.tls) return path + ', plain';
    const checked = { full: 'certificate and host name verified', ca: 'certificate chain verified, host name not' };
    return `${path}, ${r.tls.version} ${r.tls.cipher} (${checked[r.tls.verified] || 'certificate not verified'})`;
  };

  // ` ±1.2%` after the QPS, from its 95% CI.
  const plusMinus = r => {
    const c = r.precision && r.precision.qps;
    if (!c || c.high == null || !(r.qps > 0)) return '';
    const pct = (c.high - c.low) / 2 / r.qps * 100;
    return '<span class="note"> ±' +
      (pct >= 10 ? pct.toFixed(0) : pct >= 1 ? pct.toFixed(1) : pct.toFixed(2)) + '%</span>';
  };

  // The run's percentiles' 95% CIs, or why it has none.
  function ciCell(r, i) {
    const p = r.precision;
    if (p.qps.none) return `<td id="ci-${i}" class="note">none: ${esc(p.qps.none)}</td>`;
    const parts = [['p50', 'p50'], ['p90', 'p90'], ['p99', 'p99'], ['p999', 'p99.9']].map(([k, n]) =>
      p[k].none ? `${n} none` : `${n} ${micros(p[k].low)} to ${micros(p[k].high)}`);
    const why = ['p50', 'p90', 'p99', 'p999'].map(k => p[k].none).find(x => x);
    return `<td id="ci-${i}" data-qps-low="${p.qps.low}" data-qps-high="${p.qps.high}">` +
      esc(parts.join(', ')) + ` <span class="note">(${p.qps.batches} batches of ` +
      `${p.qps.batch_intervals} intervals${why ? '; ' + esc(why) : ''})</span></td>`;
  }

  function card(r, i, name) {
    const errs = errorKinds(r.errors);
    const rows = [];
    const row = (label, td) => rows.push(`<tr><th>${label}</th>${td}</tr>`);
    // The verdict first, as a badge: whether these numbers can be trusted, and why not.
    const v = r.verdict;
    if (v) row('verdict', `<td id="verdict-${i}" data-valid="${v.valid}" class="${v.valid ? 'ok' : 'bad'}">` +
      esc(v.valid ? 'valid: no reason to doubt these numbers' : 'NOT VALID: ' + v.reasons.join('; ')) + '</td>');
    row('QPS', cell('qps-' + i, r.qps, thousands(r.qps) + plusMinus(r), 'big'));
    if (r.precision) row('95% CI', ciCell(r, i));
    row('requests', `<td>${thousands(r.requests)} in ${r.duration_s.toFixed(2)}s` +
      (r.interrupted ? ' <span class="bad">interrupted</span>' : '') + '</td>');
    row('hits', cell('hits-' + i, r.hits, thousands(r.hits)));
    row('misses', cell('misses-' + i, r.misses, thousands(r.misses)));
    row('errors', cell('errors-' + i, r.error_total, thousands(r.error_total) +
      (errs.length ? ' (' + esc(errs.join(', ')) + ')' : ''), r.error_total ? 'bad' : ''));
    if (r.reconnects) row('reconnects', cell('reconnects-' + i, r.reconnects, thousands(r.reconnects)));
    if (r.retries) row('retries', cell('retries-' + i, r.retries, thousands(r.retries) +
      ' requests sent again after a deadlock or serialization failure (--retries)'));
    if (r.unsure) row('writes in doubt', cell('unsure-' + i, r.unsure, thousands(r.unsure) +
      ' (their connection broke before the reply: applied or not, unknown)', 'bad'));
    row('server count', serverCell(r, i));
    if (durabilityText(r)) row('durability', `<td id="durability-${i}">${esc(durabilityText(r))}</td>`);
    const cpu = r.client_cpu;
    row('client CPU', cell('cpu-' + i, cpu.per_request_us,
      `${cpu.per_request_us.toFixed(2)}µs per request, workers ${Math.round(cpu.utilization * 100)}% busy` +
      (cpu.saturated ? ' <span class="bad">saturated: loadgen is the likely bottleneck ' +
        '(add -t threads or -p pipelining)</span>' : '') +
      (cpu.kernel_share != null ? `, ${Math.round(cpu.kernel_share * 100)}% in the kernel` : '')));
    const sc = r.server_cpu;
    if (sc) {
      row('server CPU', sc.per_request_us != null
        ? cell('server-cpu-' + i, sc.per_request_us, `${sc.per_request_us.toFixed(1)}µs per request in ` +
          esc(sc.process || 'the server') + (sc.cpu_bound_qps
            ? ` &rArr; CPU-bound at ~${thousands(sc.cpu_bound_qps)} qps` : ''))
        : `<td id="server-cpu-${i}" class="note">not measured: ${esc(sc.note || '')}</td>`);
    }
    if (r.rate) {
      const x = r.rate;
      row('rate', `<td>asked ${thousands(x.asked)}/s, achieved ${thousands(x.achieved)}/s, ` +
        `${thousands(x.late)} sent more than 1ms late` +
        (x.kept ? '' : ' <span class="bad">the generator did not keep the rate</span>') + '</td>');
    }
    if (r.connected || r.connect_failed) {
      row('connect', `<td>${thousands(r.connected)} connections in ${(r.connect_s || 0).toFixed(2)}s` +
        `<span id="over-${i}">${esc(over(r))}</span>` + (r.connect_failed ? ` <span class="bad">${thousands(r.connect_failed)} failed` +
          (r.connect_error ? ': ' + esc(r.connect_error) : '') + '</span>' : '') + '</td>');
    }
    if (r.stopped_early) row('stopped', `<td class="bad">${esc(r.stopped_early)}</td>`);
    // Percentiles as chips that wrap, so a card stays readable at any width.
    const chips = (label, p, ids) => row(label, '<td class="qs">' + [['min', 'min'], ['p50', 'p50'],
      ['p90', 'p90'], ['p99', 'p99'], ['p999', 'p99.9'], ['max', 'max']].map(([k, name]) =>
      `<span>${name} <b${ids ? ` id="${k}-${i}" data-value="${p[k]}"` : ''}>${micros(p[k])}</b></span>`)
      .join('') + '</td>');
    chips('latency', r.latency_us, true);
    if (r.rate) {
      chips('service', r.service_us, false);
      if (r.lag_us) chips('lag', r.lag_us, false);
    }
    const samples = r.error_samples && r.error_samples.length
      ? `<details><summary>error samples (${r.error_samples.length})</summary><ul>` +
        r.error_samples.map(e => `<li>${esc(e)}</li>`).join('') + '</ul></details>' : '';
    return `<section class="card" id="run-${i}"><h3><span class="sw" style="background:${color(i)}">` +
      `</span>${esc(name)}</h3><div class="target">${esc(r.target)} (${esc(r.kind)})</div>` +
      `<table class="kv">${rows.join('')}</table>${samples}</section>`;
  }

  // ------------------------------------------------------------------ per op of a mix (writes, mget:N)
  const OPS = ['read', 'update', 'insert', 'delete', 'upsert', 'mget'];

  // The server's count of one op beside loadgen's; the number shown first is the server's.
  function opServerCell(s, id) {
    if (!s || s.delta == null) {
      return `<td id="${id}" class="note">${s ? 'counter unavailable' : 'not counted'}</td>`;
    }
    return `<td id="${id}" data-value="${s.delta}" data-expected="${s.expected}" ` +
      `data-matches="${s.matches}">${thousands(s.delta)}<span class="note"> (loadgen sent ` +
      `${thousands(s.expected)}) </span>` +
      (s.matches ? '<span class="ok">matches</span>' : '<span class="bad">counts differ</span>') + '</td>';
  }

  // Under a run's op table: writes in doubt per op, and failed connects (no op: nothing sent).
  function opNotes(r, i) {
    const unsure = OPS.filter(op => r.ops[op] && r.ops[op].unsure)
      .map(op => op + ' ' + thousands(r.ops[op].unsure));
    const retried = OPS.filter(op => r.ops[op] && r.ops[op].retries)
      .map(op => op + ' ' + thousands(r.ops[op].retries));
    const connects = (r.errors || {}).connect || 0;
    return (retried.length ? `<p class="note" id="ops-${i}-retries">retries ` +
      `(sent again after a deadlock or serialization failure): ${esc(retried.join(', '))}</p>` : '') +
      (unsure.length ? `<p class="note bad" id="ops-${i}-unsure">writes in doubt ` +
      `(connection broke before the reply): ${esc(unsure.join(', '))}</p>` : '') +
      (connects ? `<p class="note" id="ops-${i}-connect">connect errors ${thousands(connects)}: ` +
        'no request sent, charged to no op</p>' : '');
  }

  // One table per run whose mix writes (none for read-only runs: their page is unchanged).
  function opSection(runs, nm) {
    const writing = runs.map((r, i) => [r, i]).filter(([r]) => r.ops && Object.keys(r.ops).length);
    if (!writing.length) return '';
    let h = '<h2>Per op</h2>';
    for (const [r, i] of writing) {
      const dur = durabilityText(r);
      h += `<h3><span class="sw" style="background:${color(i)}"></span>${esc(nm[i])}</h3>` +
        (dur ? `<p class="note" id="ops-${i}-durability">durability ${esc(dur)}</p>` : '') +
        `<div class="scroll"><table class="steps" id="ops-${i}"><tr><th>op</th><th>requests</th>` +
        '<th>qps</th><th>hits</th><th>misses</th><th>errors</th><th>p50</th><th>p99</th>' +
        '<th>p99.9</th><th>server count</th></tr>' +
        OPS.filter(op => r.ops[op]).map(op => {
          const o = r.ops[op], id = `op-${i}-${op}-`, errs = errorKinds(o.errors);
          const n = k => cell(id + k, o[k], thousands(o[k]));
          const lat = (k, q) => cell(id + k, o.latency_us[q], micros(o.latency_us[q]));
          return `<tr><td>${op}</td>` + n('requests') + n('qps') + n('hits') + n('misses') +
            cell(id + 'errors', o.error_total, thousands(o.error_total) +
              (errs.length ? `<span class="note"> (${esc(errs.join(', '))})</span>` : ''),
            o.error_total ? 'bad' : '') +
            lat('p50', 'p50') + lat('p99', 'p99') + lat('p999', 'p999') +
            opServerCell(o.server_observed, id + 'server') + '</tr>';
        }).join('') + '</table></div>' + opNotes(r, i);
    }
    return h;
  }

  // ------------------------------------------------------------------ sections
  const fromPercentiles = p => p && p.count
    ? [[0, p.min], [50, p.p50], [90, p.p90], [99, p.p99], [99.9, p.p999]] : [];

  function spectrumChart(runs, nm, spectra) {
    const series = [];
    runs.forEach((r, i) => {
      const has = spectra[i] && spectra[i].length;
      const sp = has ? spectra[i] : fromPercentiles(r.latency_us);
      const tip = what => q => [q[0], q[1], `${nm[i]}${what}\n${pctText(q[0])}: ${micros(q[1])}`];
      const paced = !!r.rate;
      series.push({ name: nm[i] + (paced ? ' latency' : ''), color: color(i), dots: !has,
        points: sp.map(tip(paced ? ' latency' : '')) });
      if (paced) {
        series.push({ name: nm[i] + ' service', color: color(i), dash: '7 4', dots: true,
          points: fromPercentiles(r.service_us).map(tip(' service time')) });
        if (r.lag_us) {
          series.push({ name: nm[i] + ' lag', color: color(i), dash: '2 3', dots: true,
            points: fromPercentiles(r.lag_us).map(tip(' lag')) });
        }
      }
    });
    const leg = runs.some(r => r.rate) ? runs.map((r, i) => ({ name: nm[i], color: color(i) }))
      .concat([{ name: 'latency', color: GREY }, { name: 'service time', color: GREY, dash: 1 },
        { name: 'lag', color: GREY, dash: 'dot' }]) : series;
    return { label: 'latency by percentile', legend: leg,
      x: { type: 'pct', label: 'percentile (1/(1-p) scale)', fmt: pctText },
      y: latencyAxis('latency'), series };
  }

  // QPS, p50 and p99 per interval. A final interval much shorter than the others (replies to
  // requests sent before the end) is drawn as a point of its own, not as a drop of the line.
  // merged[i] > 1: a long run's intervals were merged that many to a point (mean QPS, worst
  // p50 and p99, errors summed); the tips say so.
  function timelineCharts(runs, nm, intervalS, merged) {
    const qps = [], lat = [], marks = [];
    runs.forEach((r, i) => {
      const rows = r.timeline || [], per = (merged || [])[i] || 1;
      const len = k => rows[k].t_s - (k ? rows[k - 1].t_s : 0);
      const full = rows.filter((t, k) => len(k) >= intervalS / 2);
      const short = rows.filter((t, k) => len(k) < intervalS / 2);
      const what = t => short.includes(t) ? `${nm[i]}, last ${Math.round(len(rows.indexOf(t)) * 1e3)}ms ` +
        '(replies to requests sent before the end)' : per > 1
        ? `${nm[i]}, up to ${per} intervals ending ${t.t_s}s (mean QPS, worst p50 and p99)`
        : `${nm[i]}, interval ending ${t.t_s}s`;
      const qtip = t => `${what(t)}\n${thousands(t.qps)} qps, ${thousands(t.errors)} errors, ` +
        `${thousands(t.reconnects || 0)} reconnects\n${t.connections || 0} connections, ` +
        `${t.in_flight || 0} in flight`;
      const ltip = t => `${what(t)}\np50 ${micros(t.p50_us)}, p99 ${micros(t.p99_us)}`;
      const q = t => [t.t_s, t.qps, qtip(t)];
      qps.push({ name: nm[i], color: color(i), points: full.map(q) },
        { line: false, dots: true, color: color(i), points: short.map(q) });
      const answered = t => t.hits + t.misses > 0;
      const p99 = t => [t.t_s, t.p99_us, ltip(t)], p50 = t => [t.t_s, t.p50_us, ltip(t)];
      lat.push({ color: color(i), points: full.filter(answered).map(p99) },
        { color: color(i), dash: '5 4', width: 1.5, points: full.filter(answered).map(p50) },
        { line: false, dots: true, color: color(i), points: short.filter(answered).map(p99) });
      for (const t of rows) {
        if (t.errors > 0) {
          marks.push({ x: t.t_s, shape: 'tri', color: RED,
            tip: `${what(t)}: ${thousands(t.errors)} errors` });
        }
        if (t.reconnects > 0) {
          marks.push({ x: t.t_s, shape: 'dia', row: 1, color: ORANGE,
            tip: `${what(t)}: ${thousands(t.reconnects)} reconnects` });
        }
      }
    });
    // Each run's 95% CIs as bands: of its QPS, and of its p50 and p99.
    const ci = (r, k) => r.precision && r.precision[k] && r.precision[k].high != null
      ? r.precision[k] : null;
    const qbands = [], lbands = [];
    runs.forEach((r, i) => {
      const c = ci(r, 'qps');
      if (c) qbands.push({ lo: c.low, hi: c.high, color: color(i), tip: `${nm[i]}: 95% CI of the ` +
        `run's QPS ${thousands(c.low)} to ${thousands(c.high)}` });
      for (const [k, name] of [['p50', 'p50'], ['p99', 'p99']]) {
        const c = ci(r, k);
        if (c) lbands.push({ lo: c.low, hi: c.high, color: color(i), tip: `${nm[i]}: 95% CI of ` +
          `the run's ${name} ${micros(c.low)} to ${micros(c.high)}` });
      }
    });
    const runLegend = runs.map((r, i) => ({ name: nm[i], color: color(i) }));
    const leg = runLegend.slice();
    if (marks.some(k => k.shape === 'tri')) leg.push({ name: 'errors', sym: '▲', color: RED });
    if (marks.some(k => k.shape === 'dia')) leg.push({ name: 'reconnects', sym: '◆', color: ORANGE });
    const time = { type: 'lin', min: 0, label: 'seconds since the warm-up ended', fmt: v => v + 's' };
    addChart('tl-qps', b => drawXY(b, { label: 'QPS per interval', x: time, series: qps, marks,
      bands: qbands,
      legend: leg, y: { type: 'lin', min: 0, label: 'lookups/s', fmt: tickNum } }));
    addChart('tl-lat', b => drawXY(b, { label: 'p50 and p99 per interval', x: time, series: lat,
      bands: lbands,
      legend: runLegend.concat([{ name: 'p99', color: GREY }, { name: 'p50', color: GREY, dash: 1 }]),
      y: latencyAxis('latency') }));
  }

  function runSections(runs, nm, spectra, settings, merged) {
    let h = '<h2>Summary</h2><div class="cards">' + runs.map((r, i) => card(r, i, nm[i])).join('') +
      '</div>' + opSection(runs, nm);
    if (runs.length > 1) {
      const base = runs[0].qps;
      h += '<h2>Comparison</h2><div class="charts">' + chartBox('bars-qps', 'Lookups per second') +
        chartBox('bars-p99', 'p99 latency') + '</div>';
      addChart('bars-qps', b => drawBars(b, { x: { label: 'lookups/s', fmt: tickNum },
        bars: runs.map((r, i) => ({ name: nm[i], value: r.qps, color: color(i),
          text: thousands(r.qps) + (base > 0 ? ` (${(r.qps / base).toFixed(2)}x)` : ''),
          tip: `${nm[i]}\n${thousands(r.qps)} qps` +
            (base > 0 ? `, ${(r.qps / base).toFixed(2)}x the first` : '') })) }));
      addChart('bars-p99', b => drawBars(b, { x: { label: 'p99 latency', fmt: tickUs },
        bars: runs.map((r, i) => ({ name: nm[i], value: r.latency_us.p99, color: color(i),
          text: micros(r.latency_us.p99),
          tip: `${nm[i]}\np50 ${micros(r.latency_us.p50)}, p99 ${micros(r.latency_us.p99)}, ` +
            `p99.9 ${micros(r.latency_us.p999)}` })) }));
    }
    const paced = runs.some(r => r.rate);
    h += '<h2>Latency by percentile</h2>' + controls() + (paced
      ? '<p class="note">Fixed rate: latency counts from each request\'s due time (coordinated ' +
        'omission corrected); service time from when it was sent; lag is the difference.</p>' : '') +
      chartBox('spectrum', '');
    addChart('spectrum', b => drawXY(b, spectrumChart(runs, nm, spectra)));
    h += '<h2>Over time</h2><div class="charts">' + chartBox('tl-qps', 'QPS per interval') +
      chartBox('tl-lat', 'p50 (dashed) and p99 per interval') + '</div>';
    timelineCharts(runs, nm, (settings.interval_ms || 1000) / 1000, merged);
    return h;
  }

  // A step's verdict in its table row: valid, or NOT VALID with its reasons on hover.
  function stepVerdict(id, v) {
    if (!v) return '<td></td>';
    return `<td id="${id}" data-valid="${v.valid}" class="${v.valid ? 'ok' : 'bad'}" title="${esc(v.reasons.join('; '))}">` +
      (v.valid ? 'valid' : '! NOT VALID') + '</td>';
  }

  // A sweep's own verdict: its invalid steps, and client CPU per request rising with the load.
  function verdictBadge(id, v) {
    if (!v) return '';
    return `<p id="${id}" data-valid="${v.valid}" class="${v.valid ? 'ok' : 'bad'}">` +
      esc(v.valid ? 'verdict: valid' : 'verdict: NOT VALID: ' + v.reasons.join('; ')) + '</p>';
  }

  function sweepSection(sweeps) {
    const nm = names(sweeps);
    let h = '<h2>Sweep: QPS and p99 by connection count</h2>' + controls() + '<div class="charts">' +
      chartBox('sw-qps', 'QPS by connections') + chartBox('sw-p99', 'p99 latency by connections') +
      '</div>';
    const counts = sweeps.flatMap(s => s.steps.map(st => st.connections));
    const x = { type: 'log2', ticks: counts, label: 'connections', fmt: String };
    const tip = (sw, i, st) => `${nm[i]}, ${st.connections} connections\n${thousands(st.qps)} qps, ` +
      `p50 ${micros(st.p50_us)}, p99 ${micros(st.p99_us)}, ${thousands(st.errors)} errors` +
      (st.connections === sw.peak_connections ? '\npeak' : '');
    addChart('sw-qps', b => drawXY(b, { label: 'QPS by connections', x,
      y: { type: 'lin', min: 0, label: 'lookups/s', fmt: tickNum },
      series: sweeps.map((sw, i) => ({ name: nm[i], color: color(i), dots: true,
        points: sw.steps.map(st => [st.connections, st.qps, tip(sw, i, st)]) })),
      notes: sweeps.map((sw, i) => ({ x: sw.peak_connections, y: sw.peak_qps, color: color(i),
        text: 'peak ' + tickNum(sw.peak_qps) })) }));
    addChart('sw-p99', b => drawXY(b, { label: 'p99 by connections', x, y: latencyAxis('p99 latency'),
      series: sweeps.map((sw, i) => ({ name: nm[i], color: color(i), dots: true,
        points: sw.steps.map(st => [st.connections, st.p99_us, tip(sw, i, st)]) })) }));
    sweeps.forEach((sw, i) => {
      h += `<h3><span class="sw" style="background:${color(i)}"></span>${esc(nm[i])}</h3>` +
        `<div class="target">${esc(sw.target)} (${esc(sw.kind)})</div>` +
        `<p id="sweep-${i}-peak" data-value="${sw.peak_qps}" data-connections="${sw.peak_connections}">` +
        `peak <b>${thousands(sw.peak_qps)} qps</b> at ${sw.peak_connections} connections</p>` +
        verdictBadge(`sweep-${i}-verdict`, sw.verdict) +
        '<div class="scroll"><table class="steps"><tr><th>connections</th><th>qps</th><th>p50</th>' +
        '<th>p99</th><th>errors</th><th></th><th>verdict</th></tr>' + sw.steps.map((st, j) => '<tr>' +
          `<td>${st.connections}</td>` + cell(`sweep-${i}-${j}-qps`, st.qps, thousands(st.qps)) +
          `<td>${micros(st.p50_us)}</td>` + cell(`sweep-${i}-${j}-p99`, st.p99_us, micros(st.p99_us)) +
          `<td>${thousands(st.errors)}</td><td>${st.connections === sw.peak_connections ? '&larr; peak' : ''}` +
          '</td>' + stepVerdict(`sweep-${i}-${j}-verdict`, st.verdict) + '</tr>').join('') + '</table></div>';
    });
    return h;
  }

  function sloSection(slos, bounds) {
    const nm = names(slos);
    let h = '<h2>SLO search: each step tried</h2>' + controls();
    slos.forEach((slo, i) => {
      const pname = String(slo.slo).split(' ')[0];
      const bracket = slo.fail_rate != null
        ? ` Bracket: pass ${thousands(slo.pass_rate || 0)}/s, fail ${thousands(slo.fail_rate)}/s` +
          (slo.stopped ? ` (${esc(slo.stopped)})` : '') + '.' : '';
      h += `<h3><span class="sw" style="background:${color(i)}"></span>${esc(nm[i])}: ${esc(slo.slo)}</h3>` +
        `<div class="target">${esc(slo.target)} (${esc(slo.kind)})</div>` +
        `<p id="slo-${i}-best" data-value="${slo.best_rate == null ? '' : slo.best_rate}">` +
        (slo.best_rate != null
          ? `best <b>${thousands(slo.best_rate)}/s</b> meets ${esc(slo.slo)}`
          : `<span class="bad">no rate tried meets ${esc(slo.slo)}</span>`) +
        ` (closed-loop maximum ${thousands(slo.max_qps)}/s).${bracket}</p>` + chartBox('slo-' + i, '');
      const steps = slo.steps.map((st, j) => {
        const x = st.rate != null ? st.rate : st.achieved_qps;
        return [x, st.percentile_us, `step ${j + 1}: ` +
          (st.rate != null ? `rate ${thousands(st.rate)}/s` : 'closed loop') +
          `\nachieved ${thousands(st.achieved_qps)}/s\n${pname} ${micros(st.percentile_us)}: ` +
          (st.pass ? 'pass' : 'fail') + (st.retry ? ' (run again)' : ''), st.pass ? GREEN : RED,
          String(j + 1)];
      });
      addChart('slo-' + i, b => drawXY(b, { label: 'SLO steps', series: [{ name: '', color: color(i),
        line: '#c4c8d0', width: 1, dots: true, r: 5, points: steps }], x: { type: 'lin', min: 0, label: 'offered rate (closed loop: achieved), requests/s',
          fmt: tickNum },
        y: Object.assign(latencyAxis(pname + ' latency'), { tight: true }),
        hline: bounds[i] != null ? { y: bounds[i] } : null,
        legend: [{ name: 'pass', sym: '●', color: GREEN }, { name: 'fail', sym: '●', color: RED }]
          .concat(bounds[i] != null ? [{ name: 'bound ' + micros(bounds[i]), color: RED, dash: true }] : []) }));
      h += '<div class="scroll"><table class="steps"><tr><th>step</th><th>rate</th><th>achieved</th>' +
        `<th>${esc(pname)}</th><th>result</th><th>verdict</th></tr>` + slo.steps.map((st, j) => `<tr><td>${j + 1}</td>` +
          `<td>${st.rate != null ? thousands(st.rate) + '/s' : 'closed loop'}</td>` +
          cell(`slo-${i}-${j}-qps`, st.achieved_qps, thousands(st.achieved_qps) + '/s') +
          `<td>${micros(st.percentile_us)}</td><td class="${st.pass ? 'ok' : 'bad'}">` +
          (st.pass ? 'pass' : 'fail') + (st.retry ? ' (run again)' : '') + '</td>' +
          stepVerdict(`slo-${i}-${j}-verdict`, st.verdict) + '</tr>').join('') +
        '</table></div>';
    });
    return h;
  }

  // ------------------------------------------------------------------ page
  function drawAll() {
    for (const c of charts) {
      const b = $(c.id);
      if (b) c.draw(b);
    }
  }

  // Timeline rows from columns ({t_s: [...], qps: [...], ...}), as pages carry them.
  const rowsOf = c => (c && c.t_s ? c.t_s : []).map((_, k) => {
    const r = {};
    for (const f of Object.keys(c)) r[f] = c[f][k];
    return r;
  });

  // Draws the page for D (what #data holds: {result, spectra, slo_bounds_us, timelines,
  // merged}). loadgenReport.render(D) draws it again from newer data.
  function render(D) {
    const R = D.result, runs = R.runs || [];
    // Files of earlier pages have the rows in the runs themselves.
    if (D.timelines) runs.forEach((r, i) => { r.timeline = rowsOf(D.timelines[i]); });
    charts.length = 0;
    let h = header(R);
    const sweeps = R.sweeps || [], slos = R.slo || [];
    if (sweeps.length) h += sweepSection(sweeps);
    if (slos.length) h += sloSection(slos, D.slo_bounds_us || []);
    if (!sweeps.length && !slos.length && runs.length) {
      h += runSections(runs, names(runs), D.spectra || [], R.settings, D.merged);
    }
    if (!runs.length) h += '<p class="note">No run finished: the file holds no results.</p>';
    show(h);
  }

  // Puts the page's HTML in place, wires the log-scale boxes and draws the charts.
  function show(h) {
    $('report').innerHTML = h;
    for (const c of document.querySelectorAll('.loglat')) {
      c.addEventListener('change', e => {
        logLatency = e.target.checked;
        for (const o of document.querySelectorAll('.loglat')) o.checked = logLatency;
        drawAll();
      });
    }
    drawAll();
  }
  // ------------------------------------------------------------------ live page
  // The live page of `--metrics` (#live holds what /live.json serves): per target the totals
  // so far and the last interval, and the timeline charts, redrawn from each fetch. Numbers
  // carry data-at, the end of the interval they describe (unix ms), as /metrics stamps them.
  function liveCard(t, i) {
    const n = t.rows.t_s.length;
    const last = n ? { p50_us: t.rows.p50_us[n - 1], p99_us: t.rows.p99_us[n - 1] } : null;
    const at = `data-at="${t.at_ms}"`;
    const rows = [];
    const row = (label, td) => rows.push(`<tr><th>${label}</th>${td}</tr>`);
    row('QPS', `<td id="live-qps-${i}" data-value="${t.qps}" ${at} class="big">` +
      `${thousands(t.qps)}</td>`);
    row('requests', `<td id="live-requests-${i}" data-value="${t.requests}" ${at}>` +
      `${thousands(t.requests)}</td>`);
    row('hits', cell('live-hits-' + i, t.hits, thousands(t.hits)));
    row('misses', cell('live-misses-' + i, t.misses, thousands(t.misses)));
    row('errors', cell('live-errors-' + i, t.errors, thousands(t.errors), t.errors ? 'bad' : ''));
    if (t.reconnects) row('reconnects', cell('live-reconnects-' + i, t.reconnects, thousands(t.reconnects)));
    if (last) row('last interval', `<td>p50 <b>${micros(last.p50_us)}</b>, p99 <b>${micros(last.p99_us)}</b></td>`);
    row('now', `<td>${thousands(t.connections)} connections, ${thousands(t.in_flight)} in flight` +
      (t.rate != null ? `, rate ${thousands(t.rate)}/s asked` : '') + '</td>');
    return `<section class="card" id="run-${i}"><h3><span class="sw" style="background:${color(i)}">` +
      `</span>${esc(t.name)}</h3><div class="target">${esc(t.target)} (${esc(t.kind)})</div>` +
      `<table class="kv">${rows.join('')}</table></section>`;
  }

  let polls = 0;   // fetches of live.json answered (the page says how many: data-polls)

  function drawLive(L, note) {
    charts.length = 0;
    const ts = L.targets || [];
    const at = Math.max(0, ...ts.map(t => t.at_ms));
    let h = '<h1>loadgen live</h1><p class="meta" id="live-status" data-at="' + at + '" ' +
      `data-polls="${polls}">` +
      (L.done ? 'run ended' : 'running') + ' · started ' + esc(L.started_at) + ' · loadgen ' +
      esc(L.version) + (at ? ' · numbers of ' + esc(new Date(at).toISOString()) : '') + '</p>';
    if (L.settings) {
      h += '<div class="settings" id="settings">settings ' + esc(settingsLine({ settings: L.settings })) +
        '</div>';
    }
    if (note) h += `<div class="banner">${esc(note)}</div>`;
    h += '<p class="note">Totals include the warm-up, as on /metrics; the report at the end ' +
      'counts the measured part only.</p>';
    if (!ts.length) {
      h += '<p class="note">No interval has ended yet.</p>';
    } else {
      h += '<h2>So far</h2><div class="cards">' + ts.map(liveCard).join('') + '</div>' +
        '<h2>Over time</h2>' + controls() + '<div class="charts">' +
        chartBox('tl-qps', 'QPS per interval') +
        chartBox('tl-lat', 'p50 (dashed) and p99 per interval') + '</div>';
      const runs = ts.map(t => ({ label: t.name, kind: t.kind, timeline: rowsOf(t.rows) }));
      timelineCharts(runs, names(runs), L.interval_ms / 1000, ts.map(t => t.merged));
    }
    show(h);
  }

  // Fetches live.json once per interval; when the run has ended the page reloads, and the
  // server then sends the run's report (or, when there is none, this page saying so).
  function live(L) {
    drawLive(L);
    // Ended without a report to show (a set-up error): nothing more will come.
    if (L.done) return;
    const every = Math.max(100, L.interval_ms || 1000);
    let failed = 0, last = L;
    const poll = () => fetch('live.json', { cache: 'no-store' })
      .then(r => { if (!r.ok) throw new Error('HTTP ' + r.status); return r.json(); })
      .then(n => {
        failed = 0;
        polls += 1;
        last = n;
        if (n.done) { location.reload(); return; }
        drawLive(n);
        setTimeout(poll, every);
      })
      .catch(() => {
        failed += 1;
        drawLive(last, 'loadgen does not answer: the run has ended (its report is beside the ' +
          'result JSON) or loadgen stopped' + (failed < 5 ? '; trying again' : ''));
        if (failed < 5) setTimeout(poll, every * failed);
      });
    setTimeout(poll, every);
  }
  window.loadgenReport = { render, live };

  function main() {
    if ($('live')) live(JSON.parse($('live').textContent));
    else render(JSON.parse($('data').textContent));
    let width = innerWidth, timer = 0;
    addEventListener('resize', () => {
      clearTimeout(timer);
      timer = setTimeout(() => { if (innerWidth !== width) { width = innerWidth; drawAll(); } }, 120);
    });
  }

  const fail = e => { document.body.dataset.error = String((e && e.message) || e); };
  addEventListener('error', e => fail(e.error || e.message));
  try {
    main();
    document.body.dataset.ready = '1';
  } catch (e) {
    fail(e);
    const p = document.createElement('p');
    p.className = 'bad';
    p.textContent = 'The report could not be drawn: ' + e.message;
    $('report').prepend(p);
  }
