// politecrawl: completions for the search box, from /api/suggest (OpenSearch suggestions).
// Progressive: without this file the box is a plain form field, and the page works the same.
"use strict";
(function () {
  var boxes = document.querySelectorAll("input[data-suggest]");
  Array.prototype.forEach.call(boxes, function (box, n) {
    var list = document.createElement("datalist");
    list.id = "suggestions-" + n;
    box.parentNode.appendChild(list);
    box.setAttribute("list", list.id);
    var timer = null, asked = "";
    box.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        var q = box.value;
        if (q.length < 2 || q === asked) return;
        asked = q;
        fetch(box.getAttribute("data-suggest") + "?q=" + encodeURIComponent(q), {credentials: "omit"})
          .then(function (r) { return r.ok ? r.json() : [q, []]; })
          .then(function (data) {
            if (box.value !== q) return;
            while (list.firstChild) list.removeChild(list.firstChild);
            (data[1] || []).forEach(function (s) {
              var o = document.createElement("option");
              o.value = s;
              list.appendChild(o);
            });
          })
          .catch(function () {});
      }, 150);
    });
  });
})();
