// Loaded by Locust's index page (mcpfast.locust.webui adds the <script>): while the MCP tab is
// open, the page ./mcp (charts, phases, failures, generator, capacity search) is shown below the
// tab's table, in a frame of its own inside the table's container, so Locust's page removes it
// with the tab. Nothing else of Locust's page is touched; should a Locust release draw its tabs
// otherwise, the table still shows and the page stays one link away (the Download Data tab).
(function () {
  "use strict";
  var FRAME = "mcpfast-mcp-frame";

  function sync() {
    var frame = document.getElementById(FRAME);
    if (new URLSearchParams(location.search).get("tab") !== "mcp") {
      if (frame) { frame.remove(); }
      return;
    }
    var table = document.querySelector("#root table");
    if (!table || !table.parentElement) { return; }
    var holder = table.parentElement;
    if (!frame || frame.parentElement !== holder) {
      if (frame) { frame.remove(); }
      frame = document.createElement("iframe");
      frame.id = FRAME;
      frame.title = "MCP latency (µs histograms)";
      frame.src = "./mcp?embed=1";
      frame.setAttribute("scrolling", "no");
      frame.style.cssText = "display:block;width:100%;border:0;min-height:200px";
      holder.appendChild(frame);
    }
    try {
      // the body's own height: the document's would be at least the frame's, and grow with it
      var height = frame.contentDocument && frame.contentDocument.body && frame.contentDocument.body.offsetHeight;
      if (height) { frame.style.height = (height + 16) + "px"; }
    } catch (e) { /* not loaded yet */ }
  }

  setInterval(sync, 500);
})();
