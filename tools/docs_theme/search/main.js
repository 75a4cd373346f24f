// jsprof's docs site: search that works offline and from file:// (the site opened straight
// from site/ after `make docs`). MkDocs' own search starts a Web Worker and fetches
// search_index.json, both refused to a file:// page; here the index arrives as a classic
// script (search/search_index.js, written by tools/mkdocs_offline.py) and lunr runs in the
// page. The index is built once, on the first query.
(function () {
  "use strict";
  var MIN_LENGTH = 3;
  var index = null;
  var docs = {};

  function joinUrl(base, path) {
    if (path.charAt(0) === "/") return path;
    return base.charAt(base.length - 1) === "/" ? base + path : base + "/" + path;
  }

  function escapeHtml(value) {
    return String(value).replace(/&/g, "&amp;").replace(/"/g, "&quot;")
      .replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function load(path, done) {
    var s = document.createElement("script");
    s.src = joinUrl(base_url, path);
    s.onload = done;
    s.onerror = function () { console.error("jsprof docs: could not load " + path); };
    document.head.appendChild(s);
  }

  function build() {
    var data = window.jsprofSearchIndex;
    if (data.config && data.config.separator) {
      lunr.tokenizer.separator = new RegExp(data.config.separator);
    }
    index = lunr(function () {
      this.field("title");
      this.field("text");
      this.ref("location");
      for (var i = 0; i < data.docs.length; i++) {
        var doc = data.docs[i];
        this.add(doc);
        docs[doc.location] = doc;
      }
    });
  }

  function search(query) {
    if (index === null) build();
    var results = [];
    index.search(query).forEach(function (hit) {
      var doc = docs[hit.ref];
      if (doc) {
        results.push({location: doc.location, title: doc.title,
                      summary: doc.text.substring(0, 200)});
      }
    });
    return results;
  }

  function show(results) {
    var box = document.getElementById("mkdocs-search-results");
    box.textContent = "";
    if (!results.length) {
      var p = document.createElement("p");
      p.textContent = box.getAttribute("data-no-results-text") || "No results found";
      box.appendChild(p);
      return;
    }
    var html = "";
    for (var i = 0; i < results.length; i++) {
      var r = results[i];
      html += '<article><h3><a href="' + escapeHtml(joinUrl(base_url, r.location)) + '">' +
        escapeHtml(r.title) + "</a></h3><p>" + escapeHtml(r.summary) + "</p></article>";
    }
    box.insertAdjacentHTML("beforeend", html);
  }

  function doSearch() {
    var query = document.getElementById("mkdocs-search-query").value;
    if (query.length < MIN_LENGTH) {
      document.getElementById("mkdocs-search-results").textContent = "";
      return;
    }
    var results;
    try {
      results = search(query);
    } catch (e) {  // lunr's query syntax (`foo:`, a lone `~`): search the words alone
      results = search(query.replace(/[:~^*+\-]/g, " "));
    }
    show(results);
  }

  function start() {
    var input = document.getElementById("mkdocs-search-query");
    if (!input) return;
    input.addEventListener("keyup", doSearch);
    var m = /[?&]q=([^&]*)/.exec(window.location.search);
    if (m) {
      input.value = decodeURIComponent(m[1].replace(/\+/g, "%20"));
      doSearch();
    }
    document.body.setAttribute("data-search-ready", "1");
  }

  load("search/lunr.js", function () { load("search/search_index.js", start); });
})();
