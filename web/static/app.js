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
    const conv = list && list.dataset.view === 'conv';
    follow(url, {
      event(d) {
        if (conv && d.conv) {
          if (!placeConv(list, d, onLast) && notice) notice.hidden = false;
          bump(head && head.querySelector('[data-count]'), d.count);
          return;
        }
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

  // Conversation view (h27a; web/conversation_live.go says where each
  // event goes): a live event joins the conversation — a turn/start opens a
  // turn, a turn/end closes it, a result goes under its call and the
  // duplicate tool/call into it, bookkeeping into the turn's quiet fold.
  // Returns false when the event belongs to a later page.
  function placeConv(list, d, onLast) {
    const c = d.conv;
    const existing = document.getElementById('e-' + d.seq);
    if (existing) {
      // Already on the page (the stream overlaps the page's read).
      if (c.place !== 'turn' && c.place !== 'call') {
        const frag = fragment(c.place === 'fold' ? d.html : c.html);
        localTimes(frag);
        existing.replaceWith(frag);
      }
      return true;
    }
    if (!onLast) return false;
    const empty = document.getElementById('no-events');
    if (empty) empty.hidden = true;
    const insert = (parent, html) => {
      const frag = fragment(html);
      localTimes(frag);
      const el = frag.firstElementChild;
      if (el) el.classList.add('is-new');
      parent.appendChild(frag);
      return el;
    };
    const turns = list.querySelectorAll(':scope > section.turn');
    const last = turns[turns.length - 1] || null;
    const open = last && !last.querySelector(':scope > footer.turn-end') ? last : null;
    // The open turn's items, else a section between turns.
    const items = () => {
      let t = open;
      if (!t) {
        t = document.createElement('section');
        t.className = 'turn';
        const h = document.createElement('header');
        h.className = 'turn-head';
        const n = document.createElement('span');
        n.className = 'turn-name';
        n.textContent = 'Between turns';
        h.append(n);
        const it = document.createElement('div');
        it.className = 'turn-items';
        t.append(h, it);
        list.appendChild(t);
      }
      return t.querySelector(':scope > .turn-items');
    };
    const call = c.callId ? list.querySelector('.call[data-call-id="' + CSS.escape(c.callId) + '"]') : null;
    switch (c.place) {
      case 'turn':
        insert(list, c.html);
        return true;
      case 'end': {
        if (open) insert(open, c.html);
        else insert(items().parentElement, c.html);
        return true;
      }
      case 'result': {
        const box = call && call.querySelector(':scope > .call-results');
        if (box && !box.firstElementChild) {
          const el = insert(box, c.html);
          if (el && el.classList.contains('is-failed')) call.classList.add('is-failed');
          return true;
        }
        insert(items(), d.html);
        return true;
      }
      case 'call': {
        if (call && !call.querySelector(':scope > .anchor')) {
          const a = document.createElement('span');
          a.className = 'anchor';
          a.id = 'e-' + d.seq;
          a.dataset.seq = String(d.seq);
          call.prepend(a);
          return true;
        }
        insert(items(), d.html);
        return true;
      }
      case 'fold': {
        // After an ended turn, its closing notes; else the open turn's.
        let box;
        if (!open && last) {
          box = last.querySelector(':scope > .turn-after');
          if (!box) {
            box = document.createElement('div');
            box.className = 'turn-after';
            last.appendChild(box);
          }
        } else {
          box = items();
        }
        const fold = box.lastElementChild;
        if (fold && fold.matches('details.bk')) {
          insert(fold.querySelector('.bk-items'), d.html);
          extendFold(fold, c.kind);
        } else {
          insert(box, c.html);
        }
        return true;
      }
      default:
        insert(items(), c.html);
        return true;
    }
  }

  // extendFold counts one more event of kind in a bookkeeping fold, and
  // writes its summary as the server does (most frequent kind first).
  function extendFold(fold, kind) {
    let kinds = [];
    try { kinds = JSON.parse(fold.dataset.kinds || '[]'); } catch (e) { kinds = []; }
    const k = kinds.find((x) => x[0] === kind);
    if (k) k[1]++;
    else kinds.push([kind, 1]);
    fold.dataset.kinds = JSON.stringify(kinds);
    const total = kinds.reduce((n, x) => n + x[1], 0);
    const order = kinds.map((x, i) => [x, i]).sort((a, b) => b[0][1] - a[0][1] || a[1] - b[1]).map((x) => x[0]);
    const n = fold.querySelector('.bk-n');
    if (n) {
      n.textContent = total.toLocaleString('en-US');
      if (n.nextSibling) n.nextSibling.textContent = total === 1 ? ' bookkeeping event ' : ' bookkeeping events ';
    }
    const text = fold.querySelector('.bk-kinds');
    if (text) text.textContent = order.map((x) => x[1] > 1 ? x[0] + ' ×' + x[1].toLocaleString('en-US') : x[0]).join(' · ');
  }
  // End of the conversation view's block.

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
