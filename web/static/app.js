// dshq web UI: local times, and the live updates of the session list and
// of a session's transcript (Server-Sent Events). Pages work without it.
// Rows and events arrive as HTML rendered by the server's templates (every
// log value escaped there); they enter the page through the one Trusted
// Types policy the Content-Security-Policy allows.
'use strict';

(() => {
  const policy = window.trustedTypes
    ? window.trustedTypes.createPolicy('dshq', { createHTML: (s) => s })
    : { createHTML: (s) => s };

  function fragment(html) {
    const t = document.createElement('template');
    t.innerHTML = policy.createHTML(html);
    return t.content;
  }

  const pad = (n, w = 2) => String(n).padStart(w, '0');
  function localTimes(root) {
    for (const el of root.querySelectorAll('time[datetime]')) {
      const d = new Date(el.getAttribute('datetime'));
      if (isNaN(d)) continue;
      el.textContent = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
        `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
    }
  }

  // The status pill: live, behind, or down.
  const pill = document.getElementById('live-status');
  function setStatus(kind, text) {
    if (!pill) return;
    pill.hidden = false;
    pill.className = 'live-status is-' + kind;
    pill.textContent = text;
    pill.dataset.state = kind;
  }

  function follow(url, handlers) {
    let es = null;
    let lastId = '';
    let epoch = '';
    let watchdog = 0;
    let retry = 0;
    const quiet = 7000;

    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => {
        setStatus('down', 'Connection lost — reconnecting…');
        reopen();
      }, quiet);
    };
    const reopen = () => {
      if (es) es.close();
      clearTimeout(retry);
      retry = setTimeout(open, 1000);
    };
    const open = () => {
      const u = lastId ? url + '&resume=' + encodeURIComponent(lastId) : url;
      es = new EventSource(u);
      arm();
      es.onerror = () => {
        setStatus('down', 'Connection lost — reconnecting…');
        if (es.readyState === EventSource.CLOSED) reopen();
      };
      const on = (name, fn) => es.addEventListener(name, (ev) => {
        if (ev.lastEventId) lastId = ev.lastEventId;
        arm();
        let data = {};
        try { data = JSON.parse(ev.data); } catch (e) { return; }
        fn(data);
      });
      on('status', (d) => {
        if (d.epoch) {
          if (epoch && d.epoch !== epoch) { location.reload(); return; }
          epoch = d.epoch;
        }
        if (d.bus !== 'connected') setStatus('down', 'dshq bus unreachable — reconnecting…');
        else if (d.pending > 0) setStatus('behind', `Catching up · ${d.pending} behind`);
        else setStatus('live', 'Feed connected'); // the page's updates, not a session's lease
      });
      on('resync', () => { setStatus('behind', 'Reloading…'); location.reload(); });
      for (const [name, fn] of Object.entries(handlers)) on(name, fn);
    };
    open();
  }

  function bump(el, n) {
    if (!el) return;
    const cur = Number((el.textContent || '0').replace(/,/g, '')) || 0;
    if (n > cur) el.textContent = n.toLocaleString('en-US');
  }

  function sessionPage(url) {
    const list = document.getElementById('events');
    const head = document.querySelector('.session-head');
    const onLast = list && list.dataset.lastPage === 'true';
    const notice = document.getElementById('new-events');
    follow(url, {
      event(d) {
        const existing = document.getElementById('e-' + d.seq);
        const frag = fragment(d.html);
        const node = frag.firstElementChild;
        localTimes(frag);
        if (existing) {
          existing.replaceWith(frag);
        } else if (onLast && list) {
          node.classList.add('is-new');
          list.appendChild(frag);
          const empty = document.getElementById('no-events');
          if (empty) empty.hidden = true;
        } else if (notice) {
          notice.hidden = false;
        }
        bump(head && head.querySelector('[data-count]'), d.count);
      },
      surface(d) {
        const ev = document.getElementById('e-' + d.seq);
        if (!ev) return;
        ev.classList.remove('is-current', 'is-shadowed', 'is-log-only', 'is-invalid');
        ev.classList.add('is-' + d.to);
        for (const b of ev.querySelectorAll('[data-sf]')) {
          b.hidden = false;
          b.className = 'sf sf-' + d.to;
          b.textContent = d.to;
        }
        if (d.replacedBy != null && !ev.querySelector('.shadowed-by')) {
          const div = document.createElement('div');
          div.className = 'shadowed-by';
          div.append('Shadowed by ');
          const a = document.createElement('a');
          a.href = '#e-' + d.replacedBy;
          a.textContent = '#' + d.replacedBy;
          div.append(a);
          const h = ev.querySelector('.ev-head');
          if (h) h.after(div);
        }
      },
      title(d) {
        const t = head && head.querySelector('[data-title]');
        if (t) { t.textContent = d.title; document.title = d.title + ' · dshq'; }
      },
      lease(d) {
        const b = head && head.querySelector('[data-live]');
        if (b) b.hidden = !d.live;
      },
    });
  }

  function rowOf(id) {
    return document.querySelector('tr[data-sid="' + CSS.escape(id) + '"]');
  }

  function sessionsPage(url) {
    const table = document.getElementById('sessions');
    const rows = document.getElementById('session-rows');
    const first = table && table.dataset.firstPage === 'true';
    follow(url, {
      session(d) {
        if (!first || !rows || rowOf(d.id)) return;
        const frag = fragment(d.html);
        localTimes(frag);
        const tr = frag.firstElementChild;
        if (tr) tr.classList.add('is-new');
        rows.prepend(frag);
        const empty = document.getElementById('no-sessions');
        if (empty) empty.hidden = true;
      },
      title(d) {
        const r = rowOf(d.id);
        const t = r && r.querySelector('[data-title]');
        if (t) { t.textContent = d.title; t.classList.remove('untitled'); }
      },
      lease(d) {
        const r = rowOf(d.id);
        if (!r) return;
        r.classList.toggle('is-live', d.live);
        const b = r.querySelector('[data-live]');
        if (b) b.hidden = !d.live;
      },
    });
    // Event counts of live rows: the feed's event messages are too heavy to
    // follow for a whole list, so live rows are refreshed every 3 s.
    setInterval(async () => {
      if (document.hidden) return;
      const live = [...document.querySelectorAll('tr.is-live[data-sid]')].map((r) => r.dataset.sid);
      if (!live.length) return;
      const q = live.map((id) => 'id=' + encodeURIComponent(id)).join('&');
      try {
        const res = await fetch('/api/counts?' + q, { credentials: 'same-origin' });
        if (!res.ok) return;
        const counts = await res.json();
        for (const [id, c] of Object.entries(counts)) {
          const r = rowOf(id);
          if (!r) continue;
          const n = r.querySelector('[data-count]');
          if (n) n.textContent = c.count.toLocaleString('en-US');
          // The summary's columns (the projection keeps them as it applies).
          const set = (sel, v) => { const el = r.querySelector(sel); if (el && v != null) el.textContent = typeof v === 'number' ? v.toLocaleString('en-US') : v; };
          set('[data-turns]', c.turns);
          set('[data-calls]', c.calls);
          set('[data-failed]', c.failed);
          set('[data-span]', c.span);
          const f = r.querySelector('[data-failed]');
          if (f && c.failed != null) f.parentElement.hidden = c.failed === 0;
          const a = r.querySelector('[data-activity]');
          if (a && c.activity) { a.setAttribute('datetime', c.activity); a.title = c.activity; a.textContent = c.activity; localTimes(r); }
          if (c.title) {
            const t = r.querySelector('[data-title]');
            if (t) { t.textContent = c.title; t.classList.remove('untitled'); }
          }
        }
      } catch (e) { /* the status pill reports the connection */ }
    }, 3000);
  }

  function start() {
    localTimes(document);
    const url = document.body.dataset.liveUrl;
    const kind = document.body.dataset.liveKind;
    if (!url || !window.EventSource) return;
    if (kind === 'session') sessionPage(url);
    else if (kind === 'sessions') sessionsPage(url);
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
