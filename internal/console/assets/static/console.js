// jobfabric console: live refresh of a page's live part, forms sent with
// the session's CSRF token, and the cluster grid's selection. No inline
// script anywhere: the Content-Security-Policy allows only this file.
(function () {
  'use strict';
  var live = document.getElementById('live');
  var detail = document.getElementById('detail');
  var toast = document.getElementById('toast');
  var etag = null;
  var busy = false;
  var selected = null;

  function csrf() {
    var m = document.querySelector('meta[name="csrf-token"]');
    return m ? m.content : '';
  }

  function toLogin(why) {
    var here = location.pathname + location.search;
    location.assign('/console/login?next=' + encodeURIComponent(here) + '&why=' + encodeURIComponent(why || 'session ended'));
  }

  // refresh fetches the page's live part and swaps it in when it changed.
  function refresh() {
    if (!live || busy || document.hidden) return Promise.resolve();
    busy = true;
    var h = { 'X-Console-Part': 'live' };
    if (etag) h['If-None-Match'] = etag;
    return fetch(location.pathname + location.search, { headers: h, credentials: 'same-origin', cache: 'no-store' })
      .then(function (r) {
        if (r.status === 401) { toLogin('your session ended; log in again'); return; }
        if (r.status === 304 || !r.ok) return;
        etag = r.headers.get('ETag');
        return r.text().then(function (html) {
          live.innerHTML = html;
          if (selected) select(selected, '');
          document.body.setAttribute('data-refreshed', String(Date.now()));
        });
      })
      .catch(function () {})
      .then(function () { busy = false; });
  }

  if (live) {
    var every = parseInt(live.getAttribute('data-refresh'), 10);
    if (every > 0) {
      setInterval(refresh, every);
      document.addEventListener('visibilitychange', function () { if (!document.hidden) refresh(); });
    }
  }

  function say(out, text, ok) {
    var el = out || toast;
    el.textContent = text;
    el.className = ok ? 'ok' : 'err';
    if (!out) setTimeout(function () { toast.textContent = ''; }, 8000);
  }

  // Forms of class "api" are sent by script: JSON back, the API's error
  // as the CLI words it, then the live part is refreshed at once.
  document.addEventListener('submit', function (e) {
    var f = e.target;
    if (!f.classList || !f.classList.contains('api')) return;
    e.preventDefault();
    var body = new URLSearchParams(new FormData(f));
    if (e.submitter && e.submitter.name) body.set(e.submitter.name, e.submitter.value);
    // A form inside the live part may be swapped out: it answers in the toast.
    var out = live && live.contains(f) ? null : f.querySelector('output');
    fetch(f.getAttribute('action'), {
      method: 'POST', body: body, credentials: 'same-origin',
      headers: { 'X-CSRF-Token': csrf(), 'Accept': 'application/json' }
    }).then(function (r) {
      return r.json().then(function (j) {
        if (r.status === 401) { toLogin(j.error && j.error.message); return; }
        if (r.ok) {
          say(out, j.message, true);
          etag = null;
          refresh();
        } else {
          say(out, j.text || (j.error && j.error.message) || ('error ' + r.status), false);
        }
      });
    }).catch(function (err) { say(out, 'request failed: ' + err, false); });
  });

  // Grid geometry (internal/console/cluster.go): GPU k of a server is at
  // x = PAD + k * (CELL + GAP) inside the server's group.
  var PAD = 2, CELL = 10, GAP = 1;
  var SVGNS = 'http://www.w3.org/2000/svg';

  // jobsOf reads a server's data-jobs: one entry per GPU, "-" when free,
  // "a+b" when slices or shares of several jobs share it.
  function jobsOf(srv) {
    return (srv.getAttribute('data-jobs') || '').split(' ').map(function (x) { return x.split('+'); });
  }

  // select outlines a job's GPUs, marks its row, and shows it in the
  // detail panel.
  function select(id, where) {
    selected = id;
    var old = document.querySelectorAll('.sel');
    for (var i = 0; i < old.length; i++) {
      if (old[i].tagName.toLowerCase() === 'rect') old[i].remove(); else old[i].classList.remove('sel');
    }
    var servers = document.querySelectorAll('g.srv[data-jobs]');
    for (var s = 0; s < servers.length; s++) {
      var gpus = jobsOf(servers[s]);
      for (var k = 0; k < gpus.length; k++) {
        if (gpus[k].indexOf(id) < 0) continue;
        var r = document.createElementNS(SVGNS, 'rect');
        r.setAttribute('class', 'sel');
        r.setAttribute('x', PAD + k * (CELL + GAP));
        r.setAttribute('y', PAD);
        r.setAttribute('width', CELL);
        r.setAttribute('height', CELL);
        servers[s].appendChild(r);
      }
    }
    var row = document.getElementById('job-' + id);
    if (row) row.classList.add('sel');
    if (!detail) return;
    detail.textContent = where ? where + ' · ' : '';
    var a = document.createElement('a');
    a.href = '/console/jobs/' + encodeURIComponent(id);
    a.textContent = 'job ' + id;
    detail.appendChild(a);
    if (row) {
      var cols = row.querySelectorAll('td');
      var parts = [];
      for (var c = 1; c < cols.length; c++) parts.push(cols[c].textContent);
      detail.appendChild(document.createTextNode(': ' + parts.join(' · ')));
    }
  }

  // A click on a server picks the GPU under the pointer and its job, and
  // fills in the drain form.
  document.addEventListener('click', function (e) {
    var t = e.target;
    if (!t.closest) return;
    var srv = t.closest('g.srv[data-jobs]');
    if (!srv) return;
    var name = srv.getAttribute('data-s');
    var input = document.getElementById('drain-server');
    if (input) input.value = name;
    var p = new DOMPoint(e.clientX, e.clientY).matrixTransform(srv.getScreenCTM().inverse());
    var gpus = jobsOf(srv);
    var k = Math.max(0, Math.min(gpus.length - 1, Math.floor((p.x - PAD) / (CELL + GAP))));
    var ids = gpus[k].filter(function (x) { return x !== '-'; });
    if (ids.length) select(ids[0], name + ' gpu' + k);
    else if (detail) detail.textContent = name + ' gpu' + k + ': free';
  });
})();
