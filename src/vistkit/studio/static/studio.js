// vistkit studio: drag-or-keyboard ranking, submission that keeps the answer when it fails, and photos that do
// not load shown as such. The server reads the hidden "ranking" input: the display positions of the stories,
// best first. No build step, no dependencies; the page works without this script (a plain form post).
(function () {
  "use strict";

  // "?saved=1" says that the previous answer was just stored: shown once, not again on a reload or a return later
  if (/(^|[?&])saved=1(&|$)/.test(window.location.search.slice(1)) && window.history && window.history.replaceState) {
    window.history.replaceState(window.history.state, "", window.location.pathname);
  }

  // photos: a broken-image icon becomes a box that says so
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
      img.addEventListener("error", function () { photoFailed(img, i + 1, photos.length); });
    }
  });

  var list = document.getElementById("ranking-list");
  var field = document.getElementById("ranking");
  function items() { return list ? Array.prototype.slice.call(list.querySelectorAll("li.story")) : []; }
  function sync() {
    if (!list || !field) { return; }
    field.value = items().map(function (li) { return li.getAttribute("data-pos"); }).join(",");
  }
  function move(li, delta) {
    var all = items();
    var i = all.indexOf(li);
    var j = i + delta;
    if (j < 0 || j >= all.length) { return; }
    if (delta < 0) { list.insertBefore(li, all[j]); } else { list.insertBefore(all[j], li); }
    sync();
    li.focus();
    var status = document.getElementById("rank-status");
    if (status) { status.textContent = "Story " + li.getAttribute("data-label") + " is now in place " + (j + 1) + "."; }
  }
  if (list && field) {
    items().forEach(function (li) {
      li.querySelector("button.up").addEventListener("click", function () { move(li, -1); });
      li.querySelector("button.down").addEventListener("click", function () { move(li, 1); });
      li.addEventListener("keydown", function (ev) {
        if (ev.target !== li) { return; }
        var grabbed = li.classList.contains("grabbed");
        if (ev.key === " " || ev.key === "Enter") {
          li.classList.toggle("grabbed");
          li.setAttribute("aria-grabbed", String(!grabbed));
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
        } else if (ev.key === "Escape") {
          li.classList.remove("grabbed");
        }
      });
      li.addEventListener("dragstart", function (ev) {
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
  var form = document.getElementById("task-form");
  if (!form) { return; }
  var button = document.getElementById("submit");
  var notice = document.getElementById("send-status");
  var sending = false;
  var WAIT_MS = 30000;
  function ready() {
    sending = false;
    if (button) { button.disabled = false; button.removeAttribute("aria-busy"); }
  }
  function failed(why, again) {
    ready();
    if (notice) {
      notice.textContent = "Not saved: " + why + "." +
        (again ? " Your answer is still here; press \u201cSubmit and continue\u201d again." : "");
      notice.hidden = false;
      notice.focus();
    }
  }
  window.addEventListener("pageshow", function () { ready(); });  // back to a page kept in memory: usable again
  form.addEventListener("submit", function (ev) {
    sync();
    if (sending) { ev.preventDefault(); return; }  // a double click sends once
    if (!window.fetch || !window.FormData || !window.URLSearchParams) {
      window.setTimeout(function () { if (button) { button.disabled = true; } }, 0);
      return;
    }
    ev.preventDefault();
    sending = true;
    if (button) { button.disabled = true; button.setAttribute("aria-busy", "true"); }
    if (notice) { notice.hidden = true; notice.textContent = ""; }
    var action = form.getAttribute("action");
    var next = action.replace(/\/submit$/, "") + "?saved=1";
    var controller = window.AbortController ? new window.AbortController() : null;
    var timer = window.setTimeout(function () { if (controller) { controller.abort(); } }, WAIT_MS);
    window.fetch(action, {
      method: "POST",
      body: new window.URLSearchParams(new window.FormData(form)),
      headers: { "Accept": "application/json" },
      credentials: "same-origin",
      redirect: "error",
      signal: controller ? controller.signal : undefined
    }).then(function (response) {
      return response.json().then(function (data) { return [response, data]; }, function () { return [response, null]; });
    }).then(function (answer) {
      window.clearTimeout(timer);
      var response = answer[0];
      var data = answer[1] || {};
      if (response.ok && data.saved) {
        window.location.assign(next);
        return;
      }
      var why = typeof data.error === "string" && data.error ? data.error : "the server answered " + response.status;
      var status = response.status;
      failed(why, status >= 500 || status === 408 || status === 429 || status === 0);
    }, function () {
      window.clearTimeout(timer);
      failed(controller && controller.signal.aborted
        ? "the server did not answer within " + WAIT_MS / 1000 + " seconds"
        : "the server could not be reached (check your connection)", true);
    });
  });
})();
