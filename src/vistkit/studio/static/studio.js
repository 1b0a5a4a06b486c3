// vistkit studio: drag-or-keyboard ranking, submission that keeps the answer when it fails (and keeps it from
// changing while it is sent), an answer in progress kept in the browser over a reload, Back/Forward or a closed
// tab, and photos that do not load shown as such. The server reads the hidden
// "ranking" input: the display positions of the stories, best first, filled in only by this script (without it a
// ranking task says it needs this script, and sends no ranking). No build step, no dependencies; the other tasks
// work without this script (a plain form post).
(function () {
  "use strict";

  // "?saved=1" says that the previous answer was just stored: shown once, not again on a reload or a return later
  if (/(^|[?&])saved=1(&|$)/.test(window.location.search.slice(1)) && window.history && window.history.replaceState) {
    window.history.replaceState(window.history.state, "", window.location.pathname);
  }

  // photos: one still on its way says so (a slow photo host showed empty grey boxes without a word, so the
  // stories were ranked without the photos), and a broken-image icon becomes a box that says so
  function photoLoading(img, n, total) {
    var note = document.createElement("span");
    note.className = "photo-loading";
    note.setAttribute("aria-hidden", "true");  // the photo's own text (alt) names it: no second name to hear
    note.textContent = "Photo " + n + " of " + total + " is loading\u2026";
    if (img.parentNode) { img.parentNode.insertBefore(note, img.nextSibling); }
    return function () { if (note.parentNode) { note.parentNode.removeChild(note); } };
  }
  function photoFailed(img, n, total) {
    var box = document.createElement("div");
    box.className = "nophoto";
    box.setAttribute("role", "img");
    box.textContent = "Photo " + n + " of " + total + " could not be loaded";
    box.setAttribute("aria-label", box.textContent);
    if (img.parentNode) { img.parentNode.replaceChild(box, img); }
  }
  var photos = Array.prototype.slice.call(document.querySelectorAll("ol.photos img"));
  photos.forEach(function (img, i) {
    if (img.complete && img.naturalWidth === 0) {
      photoFailed(img, i + 1, photos.length);
    } else {
      var loaded = img.complete ? function () {} : photoLoading(img, i + 1, photos.length);
      img.addEventListener("load", loaded);
      img.addEventListener("error", function () { loaded(); photoFailed(img, i + 1, photos.length); });
    }
  });

  var form = document.getElementById("task-form");
  var list = document.getElementById("ranking-list");
  var field = document.getElementById("ranking");

  // the answer in progress, kept in this browser (localStorage; sessionStorage where that is refused) for this
  // link's current task only: the page is sent "no-store", so a reload, Back/Forward or a closed tab opened again
  // gave the task back blank (ranking in the shown order, no choice checked). The key holds a hash of the link,
  // never the link itself, so another annotator on a shared computer neither sees the answer (their link has
  // another key) nor finds this link in the storage. Dropped once the answer is stored, when this link shows
  // another task or none, and after DRAFT_DAYS days whatever the link.
  var DRAFT = "vistkit-draft ";
  var BUSY = "Your answer is being sent: it can be changed again only if it is not saved.";
  var DRAFT_DAYS = 30;
  var assignment = form ? form.querySelector("input[name=assignment]") : null;
  var linkPath = form ? form.getAttribute("action").replace(/\/submit$/, "")
    : (/^\/a\/[^\/]+$/.test(window.location.pathname) ? window.location.pathname : null);
  // cyrb53: a 53-bit hash of the link (not reversible to it; two links of one computer never share a key in practice)
  function hash(text) {
    var h1 = 0xdeadbeef, h2 = 0x41c6ce57;
    for (var i = 0; i < text.length; i++) {
      var c = text.charCodeAt(i);
      h1 = Math.imul(h1 ^ c, 2654435761);
      h2 = Math.imul(h2 ^ c, 1597334677);
    }
    h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
    h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
    return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(36);
  }
  var draftPrefix = linkPath ? DRAFT + hash(window.location.host + linkPath) + " " : null;
  var draftKey = form && draftPrefix && assignment ? draftPrefix + assignment.value : null;
  var oldKey = form && assignment ? DRAFT + form.getAttribute("action") + " " + assignment.value : null;
  function usable(name) {
    try {
      var store = window[name];
      var probe = DRAFT + "probe";
      store.setItem(probe, "1");
      store.removeItem(probe);
      return store;
    } catch (e) { return null; }  // storage off or refused (private windows, blocked site data)
  }
  var store = usable("localStorage") || usable("sessionStorage");
  function radios() {
    return form ? Array.prototype.slice.call(form.querySelectorAll("input[type=radio]")) : [];
  }
  function saveDraft() {
    if (!store || !draftKey) { return; }
    var draft = { ranking: field ? field.value : null, choices: {}, at: Date.now() };
    radios().forEach(function (r) { if (r.checked) { draft.choices[r.name] = r.value; } });
    try { store.setItem(draftKey, JSON.stringify(draft)); } catch (e) { /* full or refused: nothing kept */ }
  }
  function dropDraft() {
    if (store && draftKey) { try { store.removeItem(draftKey); } catch (e) { /* nothing to drop */ } }
  }
  function parse(text) {
    try {
      var value = JSON.parse(text || "null");
      return value && typeof value === "object" ? value : null;
    } catch (e) { return null; }
  }
  // drops this link's drafts of other tasks (stored, or the task gone) and everyone's drafts past DRAFT_DAYS;
  // returns this task's draft (or one an earlier version kept in this tab), or null
  function loadDraft() {
    var draft = null;
    if (oldKey) {  // what an earlier version kept in this tab, under the link itself: moved to the new key
      try {
        draft = parse(window.sessionStorage.getItem(oldKey));
        window.sessionStorage.removeItem(oldKey);
      } catch (e) { draft = null; }
    }
    if (!store) { return draft; }
    var oldest = Date.now() - DRAFT_DAYS * 86400000;
    try {
      for (var k = store.length - 1; k >= 0; k--) {
        var key = store.key(k);
        if (!key || key.indexOf(DRAFT) !== 0 || key === draftKey) { continue; }
        var kept = parse(store.getItem(key));
        var mine = draftPrefix !== null && key.indexOf(draftPrefix) === 0;
        if (mine || !kept || typeof kept.at !== "number" || kept.at < oldest) { store.removeItem(key); }
      }
      draft = (draftKey ? parse(store.getItem(draftKey)) : null) || draft;
    } catch (e) { return draft; }
    return draft;
  }

  function items() { return list ? Array.prototype.slice.call(list.querySelectorAll("li.story")) : []; }
  function sync() {
    if (!list || !field) { return; }
    field.value = items().map(function (li) { return li.getAttribute("data-pos"); }).join(",");
    saveDraft();
  }
  function say(text) {
    var status = document.getElementById("rank-status");
    if (status) { status.textContent = text; }
  }
  // moves a story one place; the focus stays on what moved it (its arrow button, or the story itself)
  var moving = false;
  function move(li, delta, from) {
    if (sending) { say(BUSY); return; }
    var all = items();
    var i = all.indexOf(li);
    var j = i + delta;
    var label = "Story " + li.getAttribute("data-label");
    if (j < 0 || j >= all.length) {
      say(label + " is already " + (j < 0 ? "first" : "last") + ".");
      return;
    }
    moving = true;  // a focused story moved in the page may lose the focus for a moment: it stays picked up
    try {
      if (delta < 0) { list.insertBefore(li, all[j]); } else { list.insertBefore(all[j], li); }
    } finally { moving = false; }
    sync();
    (from || li).focus();
    say(label + " is now in place " + (j + 1) + ".");
  }
  // picks a story up (its arrow keys then move it) or puts it down, and says so: a screen reader heard nothing
  function grab(li, on) {
    var label = "Story " + li.getAttribute("data-label");
    li.classList.toggle("grabbed", on);
    li.setAttribute("aria-grabbed", String(on));
    say(on ? label + " picked up, in place " + (items().indexOf(li) + 1) + ": \u2191/\u2193 move it, Space puts it down."
      : label + " put down in place " + (items().indexOf(li) + 1) + ".");
  }
  function restoreRanking(saved) {
    if (typeof saved !== "string") { return; }
    var byPos = {};
    items().forEach(function (li) { byPos[li.getAttribute("data-pos")] = li; });
    var order = saved.split(",");
    var seen = {};
    var whole = order.length === items().length && order.every(function (p) {
      var ok = Object.prototype.hasOwnProperty.call(byPos, p) && !seen[p];
      seen[p] = true;
      return ok;
    });
    if (whole) { order.forEach(function (p) { list.appendChild(byPos[p]); }); }
  }
  var draft = loadDraft();
  if (draft && draft.choices && typeof draft.choices === "object") {
    radios().forEach(function (r) {
      if (Object.prototype.hasOwnProperty.call(draft.choices, r.name) && draft.choices[r.name] === r.value) {
        r.checked = true;
      }
    });
  }
  if (form) { form.addEventListener("change", saveDraft); }
  if (list && field) {
    var needsScript = document.getElementById("needs-script");
    if (needsScript && needsScript.parentNode) { needsScript.parentNode.removeChild(needsScript); }
    if (draft) { restoreRanking(draft.ranking); }
    items().forEach(function (li) {
      var up = li.querySelector("button.up");
      var down = li.querySelector("button.down");
      up.addEventListener("click", function () { move(li, -1, up); });
      down.addEventListener("click", function () { move(li, 1, down); });
      li.addEventListener("keydown", function (ev) {
        if (ev.target !== li) { return; }
        var grabbed = li.classList.contains("grabbed");
        if (ev.key === " " || ev.key === "Enter") {
          grab(li, !grabbed);
          ev.preventDefault();
        } else if (ev.key === "ArrowUp" || ev.key === "ArrowDown") {
          var delta = ev.key === "ArrowUp" ? -1 : 1;
          if (ev.altKey || grabbed) {
            move(li, delta);
          } else {
            var all = items();
            var next = all[all.indexOf(li) + delta];
            if (next) { next.focus(); }
          }
          ev.preventDefault();
        } else if (ev.key === "Escape" && grabbed) {
          grab(li, false);
        }
      });
      // a story picked up stays so only while it has the focus: back to it later, the arrows move the focus again
      li.addEventListener("focusout", function (ev) {
        if (!moving && ev.target === li && li.classList.contains("grabbed")) { grab(li, false); }
      });
      li.addEventListener("dragstart", function (ev) {
        if (sending) { ev.preventDefault(); say(BUSY); return; }
        li.classList.add("dragging");
        ev.dataTransfer.effectAllowed = "move";
        ev.dataTransfer.setData("text/plain", li.getAttribute("data-pos"));
      });
      li.addEventListener("dragend", function () { li.classList.remove("dragging"); sync(); });
    });
    list.addEventListener("dragover", function (ev) {
      ev.preventDefault();
      var dragging = list.querySelector("li.dragging");
      if (!dragging) { return; }
      var after = null;
      items().forEach(function (li) {
        if (li === dragging) { return; }
        var box = li.getBoundingClientRect();
        if (after === null && ev.clientY < box.top + box.height / 2) { after = li; }
      });
      if (after) { list.insertBefore(dragging, after); } else { list.appendChild(dragging); }
    });
    list.addEventListener("drop", function (ev) { ev.preventDefault(); sync(); });
    sync();
  }

  // submission: sent in the background, so that a failure (no network, a server that answers an error or not at
  // all) leaves the annotator on this page with their answer, told why, and Submit works again. The server stores
  // a resent answer once. A browser without fetch posts the form as a page does without this script.
  if (!form) { return; }
  var button = document.getElementById("submit");
  var notice = document.getElementById("send-status");
  var sending = false;
  var buttonText = button ? button.textContent : "";
  // while it is being sent the answer cannot change: a change then was shown but not sent (the answer stored was
  // the one before it, without a word)
  form.addEventListener("click", function (ev) {
    if (sending && ev.target && ev.target.type === "radio") { ev.preventDefault(); }
  }, true);
  var WAIT_MS = 30000;
  function ready() {
    sending = false;
    if (button) { button.disabled = false; button.removeAttribute("aria-busy"); button.textContent = buttonText; }
  }
  // why it was not saved; ``again``: sending it again may work, else a link reloads the page (a task that is
  // no longer theirs, a form gone stale: the page then shows where they are, with their answer if still theirs)
  // ``unsure``: the answer may have been stored (a timeout: the server may still have saved it)
  function failed(why, again, unsure) {
    ready();
    if (notice) {
      notice.textContent = (unsure ? "Not confirmed: " : "Not saved: ") + why + "." +
        (again ? " Your answer is still here; press \u201cSubmit and continue\u201d again." : " ");
      if (!again) {
        var reload = document.createElement("a");
        reload.href = window.location.pathname;
        reload.textContent = "Reload the page";
        notice.appendChild(reload);
      }
      notice.hidden = false;
      notice.focus();
    }
  }
  window.addEventListener("pageshow", function () { ready(); });  // back to a page kept in memory: usable again

  // a lost connection (or no answer in time) does not say whether the server stored the answer: it may have
  // (the connection broke after the server stored it), and the page kept saying "Not saved". The page asks the
  // server (POST .../stored with the answer it sent, which stores nothing) at once, then every CHECK_MS and
  // whenever the browser is back online, for CHECK_TRIES tries: stored, it moves on as a saved submission does
  // ("Saved."). Not stored: a submission that was not answered in time may still be, so the page goes on asking;
  // after a lost connection it stops (what it said, "Not saved", stands).
  var CHECK_MS = 5000;
  var CHECK_TRIES = 120;
  var stopCheck = function () {};
  function checkStored(body, next, late) {
    var tries = 0;
    var timer = null;
    var over = false;
    function stop() {
      over = true;
      window.clearTimeout(timer);
      window.removeEventListener("online", ask);
    }
    var asking = false;  // one question at a time (the "online" event may come while one is on its way)
    function later() { asking = false; if (!over) { window.clearTimeout(timer); timer = window.setTimeout(ask, CHECK_MS); } }
    function ask() {
      if (over || asking) { return; }
      asking = true;
      window.clearTimeout(timer);
      if (++tries > CHECK_TRIES) { stop(); return; }
      window.fetch(form.getAttribute("action").replace(/\/submit$/, "/stored"), {
        method: "POST",
        body: body,
        headers: { "Accept": "application/json" },
        credentials: "same-origin",
        redirect: "manual"
      }).then(function (response) {
        return response.json().then(function (data) { return [response, data]; }, function () { return [response, null]; });
      }).then(function (answer) {
        asking = false;
        if (over) { return; }
        var stored = answer[0].ok && answer[1] ? answer[1].stored : null;
        if (stored === "same") {
          stop();
          dropDraft();
          window.location.replace(next);
        } else if (stored === "none") {
          if (late) { later(); } else { stop(); }
        } else if (stored === "other") {
          stop();
          failed("this task was already submitted with another answer (in another tab or window)", false);
        } else if (answer[1] && typeof answer[1].error === "string" && answer[1].error &&
                   answer[0].status >= 400 && answer[0].status < 500 &&
                   answer[0].status !== 408 && answer[0].status !== 429) {
          // the studio refused the form for good (the task went to someone else, the link was withdrawn): asking
          // again cannot change it, and "moves on by itself" would never come true
          stop();
          failed(answer[1].error, false);
        } else {
          later();  // a server error or something between you and the study: asked again later
        }
      }, later);
    }
    stopCheck = stop;
    window.addEventListener("online", ask);
    ask();
  }
  form.addEventListener("submit", function (ev) {
    sync();
    if (sending) { ev.preventDefault(); return; }  // a double click sends once
    if (!window.fetch || !window.FormData || !window.URLSearchParams) {
      window.setTimeout(function () { if (button) { button.disabled = true; } }, 0);
      return;
    }
    ev.preventDefault();
    stopCheck();  // sent again: its own answer says what happened
    sending = true;
    if (button) { button.disabled = true; button.setAttribute("aria-busy", "true"); button.textContent = "Sending\u2026"; }
    if (notice) { notice.hidden = true; notice.textContent = ""; }
    var action = form.getAttribute("action");
    var next = action.replace(/\/submit$/, "") + "?saved=1";
    var controller = window.AbortController ? new window.AbortController() : null;
    var timer = window.setTimeout(function () { if (controller) { controller.abort(); } }, WAIT_MS);
    var body = new window.URLSearchParams(new window.FormData(form));
    window.fetch(action, {
      method: "POST",
      body: body,
      headers: { "Accept": "application/json" },
      credentials: "same-origin",
      redirect: "manual",  // never followed: a redirect (a sign-in proxy) is told apart from a lost connection
      signal: controller ? controller.signal : undefined
    }).then(function (response) {
      return response.json().then(function (data) { return [response, data]; }, function () { return [response, null]; });
    }).then(function (answer) {
      window.clearTimeout(timer);
      var response = answer[0];
      var data = answer[1] || {};
      if (response.ok && data.saved) {
        dropDraft();
        // the next task takes the answered one's place in the history: Back leaves the study (where the link was
        // opened from) at once, not after one press per task answered, each showing the current task again
        window.location.replace(next);
        return;
      }
      if (response.type === "opaqueredirect") {  // the studio never redirects a submission: a proxy in front did
        failed("the submission was sent on to another page, as when a sign-in in front of the study has ended; " +
          "open this page's link in a new tab, sign in if asked, then come back", true);
        return;
      }
      var status = response.status;
      // not the studio's JSON, with a success or sign-in status: a network's sign-in or filter page
      if (answer[1] === null && (status < 400 || status === 401 || status === 403 || status === 407)) {
        failed("the answer came from something between you and the study (status " + status + "), such as a " +
          "network's sign-in page; open this page's link in a new tab, sign in there if asked, then come back", true);
        return;
      }
      var why = typeof data.error === "string" && data.error ? data.error : "the server answered " + status;
      failed(why, status >= 500 || status === 408 || status === 429 || status === 0);
    }, function () {
      window.clearTimeout(timer);
      var late = controller && controller.signal.aborted;
      failed(late
        ? "the server did not answer within " + WAIT_MS / 1000 + " seconds, so it may or may not have stored " +
          "your answer (sent again, it is stored once; this page moves on by itself once it learns it is stored)"
        : "the server could not be reached (check your connection; this page moves on by itself if it learns " +
          "that the server stored your answer after all)", true, late);
      checkStored(body, next, late);
    });
  });
})();
