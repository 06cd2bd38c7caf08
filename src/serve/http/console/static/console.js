// pap console: follows the inbox live (server-sent events). Pages work without this file.
// New messages are built from text nodes only: nothing a message holds is parsed as HTML.
"use strict";
(function () {
  var list = document.getElementById("inbox");
  if (!list || !window.EventSource) {
    return;
  }
  var after = list.getAttribute("data-after") || "0";
  var source = new EventSource("/inbox/stream?after=" + encodeURIComponent(after));
  source.addEventListener("message", function (e) {
    var m;
    try {
      m = JSON.parse(e.data);
    } catch (err) {
      return;
    }
    var item = document.createElement("li");
    item.className = "message new " + String(m.level || "");
    var meta = document.createElement("div");
    meta.className = "meta";
    meta.textContent = "#" + m.id + " · " + m.ts + " · " + m.author + " · " + m.kind;
    var content = document.createElement("div");
    content.className = "content";
    content.textContent = m.content;
    item.appendChild(meta);
    item.appendChild(content);
    list.insertBefore(item, list.firstChild);
    var empty = document.querySelector("p.empty");
    if (empty) {
      empty.remove();
    }
  });
})();
