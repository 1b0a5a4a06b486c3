// vistkit studio: drag-or-keyboard ranking. The server reads the hidden "ranking" input:
// the display positions of the stories, best first. No build step, no dependencies.
(function () {
  "use strict";
  var list = document.getElementById("ranking-list");
  var field = document.getElementById("ranking");
  if (!list || !field) { return; }
  function items() { return Array.prototype.slice.call(list.querySelectorAll("li.story")); }
  function sync() {
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
  var form = document.getElementById("task-form");
  form.addEventListener("submit", function () {
    sync();
    var button = document.getElementById("submit");
    // a double click must not send twice (the server would store it once anyway)
    window.setTimeout(function () { button.disabled = true; }, 0);
  });
  sync();
})();
