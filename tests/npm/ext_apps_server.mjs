// An MCP Apps server built the way @modelcontextprotocol/ext-apps documents it: the TypeScript SDK's
// McpServer with ext-apps' registerAppTool / registerAppResource. Plain ESM, no build step; run with
// the Node 22 this package installs.
//
//   node ext_apps_server.mjs            stdio, both eras (serveStdio picks the era the client opens with)
//   node ext_apps_server.mjs --http     streamable HTTP on a free loopback port, both eras; prints
//                                       "listening on http://127.0.0.1:PORT/mcp" to stderr
//
// Tools: `show_chart` names its page `ui://charts/chart.html`; `refresh_chart` is app-only (the page calls
// it); `ui_support` answers what the server heard of the client's MCP Apps support (getUiCapability) and
// the extensions the client declared.

import http from "node:http";

import {
  EXTENSION_ID,
  getUiCapability,
  RESOURCE_MIME_TYPE,
  registerAppResource,
  registerAppTool,
} from "@modelcontextprotocol/ext-apps/server";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { z } from "zod";

const PAGE = "ui://charts/chart.html";
const HTML = `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Chart</title></head>
<body><div id="chart">a chart – drawn by the page ✓</div>
<script type="module">/* an App from @modelcontextprotocol/ext-apps would connect here */</script>
</body>
</html>
`;

function build() {
  const server = new McpServer(
    { name: "ext-apps-charts", version: "1.0.0" },
    { capabilities: { extensions: { [EXTENSION_ID]: {} } } },
  );

  registerAppTool(
    server,
    "show_chart",
    {
      title: "Show chart",
      description: "Draw a chart of a series",
      inputSchema: z.object({ series: z.string() }),
      outputSchema: z.object({ series: z.string(), points: z.array(z.number()) }),
      _meta: { ui: { resourceUri: PAGE } },
    },
    async ({ series }) => ({
      content: [{ type: "text", text: `chart of ${series}` }],
      structuredContent: { series, points: [1, 2, 3] },
    }),
  );

  registerAppTool(
    server,
    "refresh_chart",
    {
      description: "Refresh the chart (called by the page, not the model)",
      inputSchema: z.object({ series: z.string() }),
      _meta: { ui: { resourceUri: PAGE, visibility: ["app"] } },
    },
    async ({ series }) => ({ content: [{ type: "text", text: `refreshed ${series}` }] }),
  );

  server.registerTool(
    "ui_support",
    { description: "What this server heard of the client's MCP Apps support" },
    async (ctx) => {
      // 2026-07-28: the request's envelope; the handshake era: what `initialize` declared.
      const envelope = ctx.mcpReq.envelope ?? {};
      const capabilities =
        envelope["io.modelcontextprotocol/clientCapabilities"] ?? server.server.getClientCapabilities();
      const ui = getUiCapability(capabilities) ?? null;
      const extensions = capabilities?.extensions ?? null;
      return { content: [{ type: "text", text: JSON.stringify({ ui, extensions }) }] };
    },
  );

  registerAppResource(server, "Chart", PAGE, { description: "The chart page" }, async () => ({
    contents: [
      {
        uri: PAGE,
        mimeType: RESOURCE_MIME_TYPE,
        text: HTML,
        _meta: { ui: { csp: { connectDomains: ["https://api.example.com"] }, prefersBorder: true } },
      },
    ],
  }));

  return server;
}

// Node's http server in front of the SDK's web-standard handler (what @modelcontextprotocol/node adapts).
async function serveHttp() {
  const handler = createMcpHandler(build);
  const server = http.createServer(async (req, res) => {
    const gone = new AbortController(); // the client went away: end what the handler streams to it
    res.on("close", () => gone.abort());
    try {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      const request = new Request(`http://${req.headers.host}${req.url}`, {
        method: req.method,
        headers: Object.entries(req.headers).flatMap(([k, v]) => [v].flat().map((x) => [k, x])),
        body: req.method === "GET" || req.method === "HEAD" ? undefined : Buffer.concat(chunks),
        signal: gone.signal,
      });
      const response = await handler.fetch(request);
      res.writeHead(response.status, Object.fromEntries(response.headers));
      if (response.body) {
        for await (const chunk of response.body) res.write(chunk);
      }
      res.end();
    } catch (error) {
      if (!gone.signal.aborted) process.stderr.write(`request failed: ${error?.stack ?? error}\n`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    }
  });
  server.listen(0, "127.0.0.1", () => {
    process.stderr.write(`listening on http://127.0.0.1:${server.address().port}/mcp\n`);
  });
}

if (process.argv.includes("--http")) {
  await serveHttp();
} else {
  serveStdio(build);
}
