// The dashboard's only script: keyboard shortcuts, the sync log stream, the preview scroll.
// Text from the server is always inserted as text (textContent), never as HTML.
(function () {
  "use strict";

  // "/" jumps to the search box from anywhere but a text field
  document.addEventListener("keydown", function (event) {
    var typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
    if (event.key === "/" && !typing && !event.ctrlKey && !event.metaKey) {
      var box = document.getElementById("q");
      if (box) { event.preventDefault(); box.focus(); box.select(); }
      else { window.location.href = "/search"; }
    }
  });

  function follow(log) {
    if (log.dataset.following) { return; }
    log.dataset.following = "1";
    var button = document.getElementById("sync-button");
    if (button) { button.disabled = true; }
    var source = new EventSource(log.dataset.stream);
    source.addEventListener("line", function (event) {
      log.appendChild(document.createTextNode(event.data + "\n"));
      log.scrollTop = log.scrollHeight;
    });
    source.addEventListener("end", function (event) {
      source.close();
      var end = document.getElementById("sync-end");
      if (end) {
        end.textContent = event.data === "ok" ? "sync finished" : "sync finished with problems (see above)";
        end.className = event.data === "ok" ? "ok" : "bad";
        end.hidden = false;
      }
      if (button) { button.disabled = false; }
    });
  }

  // times come as <time datetime="ISO">... UTC</time>: shown in the reader's own time zone
  function localTime(time) {
    var moment = new Date(time.getAttribute("datetime"));
    if (!isNaN(moment)) {
      time.textContent = moment.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
      time.title = time.getAttribute("datetime");
    }
  }

  function start(root) {
    root.querySelectorAll("[data-stream]").forEach(follow);
    root.querySelectorAll("time[datetime]").forEach(localTime);
    var hit = root.querySelector ? root.querySelector("#hit") : null;
    if (hit) { hit.scrollIntoView({ block: "center" }); }
  }

  document.addEventListener("DOMContentLoaded", function () {
    start(document);
    if (window.htmx) { window.htmx.onLoad(start); }
  });
})();
