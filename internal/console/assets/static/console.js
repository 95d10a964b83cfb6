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
          if (selected) select(selected);
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

  // select highlights a job's GPUs and its row, and shows it in the
  // detail panel.
  function select(id) {
    selected = id;
    var old = document.querySelectorAll('.sel');
    for (var i = 0; i < old.length; i++) old[i].classList.remove('sel');
    var cells = document.querySelectorAll('[data-j="' + id + '"]');
    for (var k = 0; k < cells.length; k++) cells[k].classList.add('sel');
    var row = document.getElementById('job-' + id);
    if (row) row.classList.add('sel');
    if (!detail) return;
    detail.textContent = '';
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

  document.addEventListener('click', function (e) {
    var t = e.target;
    if (!t.closest) return;
    var cell = t.closest('[data-j]');
    var srv = t.closest('[data-s]');
    if (cell) select(cell.getAttribute('data-j'));
    else if (srv && detail) detail.textContent = srv.getAttribute('data-s') + ': no job on this GPU';
    if (cell && srv && detail) detail.insertBefore(document.createTextNode(srv.getAttribute('data-s') + ' · '), detail.firstChild);
    var input = document.getElementById('drain-server');
    if (srv && input) input.value = srv.getAttribute('data-s');
  });
})();
