// The MCP client of internal/mcpserver's tests: the official TypeScript SDK
// drives `confine mcp` over stdio. argv[2] is a JSON plan:
//   {command, args, env, cwd, elicit, steps: [{tool, args, cancel_on}]}
// Each step's outcome is one JSON line on stdout. A step with cancel_on
// prints {"event":"running"} once a progress message holds that text,
// waits for a line on stdin, aborts the call (notifications/cancelled),
// prints {"event":"cancelled"} and waits for another line before going on.
// With elicit, the client answers the server's elicitation as a human
// would: it runs the `confine approve` command the message shows (its
// "confine" is plan.command) and pastes the token it prints.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const lines = createInterface({ input: process.stdin });
const waiting = [];
const queued = [];
lines.on("line", (l) => (waiting.length ? waiting.shift()(l) : queued.push(l)));
const nextLine = () => new Promise((res) => (queued.length ? res(queued.shift()) : waiting.push(res)));
const out = (v) => process.stdout.write(JSON.stringify(v) + "\n");

const transport = new StdioClientTransport({
  command: plan.command,
  args: plan.args,
  env: plan.env,
  cwd: plan.cwd,
  stderr: "inherit",
});
const client = new Client({ name: "confine-test", version: "1.0.0" }, plan.elicit ? { capabilities: { elicitation: {} } } : undefined);
if (plan.elicit) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    const m = /run\n  (.*)\n/.exec(req.params.message);
    const words = m ? m[1].trim().split(/\s+/) : [];
    if (words[0] !== "confine" || words[1] !== "approve") return { action: "decline" };
    const token = execFileSync(plan.command, words.slice(1), { env: plan.env, encoding: "utf8" }).trim();
    return { action: "accept", content: { token } };
  });
}
await client.connect(transport);
const { tools } = await client.listTools();
out({ event: "tools", tools: tools.map((t) => t.name).sort(), schemas: Object.fromEntries(tools.map((t) => [t.name, t.inputSchema])) });

for (const [i, step] of plan.steps.entries()) {
  const progress = [];
  const ac = new AbortController();
  let fired = false;
  let gate = Promise.resolve();
  const onprogress = (p) => {
    progress.push(p.message ?? "");
    if (step.cancel_on && !fired && progress.join("").includes(step.cancel_on)) {
      fired = true;
      gate = (async () => {
        out({ step: i, event: "running" });
        await nextLine();
        ac.abort("cancelled by the test");
      })();
    }
  };
  try {
    const result = await client.callTool({ name: step.tool, arguments: step.args }, undefined, {
      signal: ac.signal,
      onprogress,
      resetTimeoutOnProgress: true,
      timeout: 600000,
    });
    out({ step: i, name: step.name, result, progress });
  } catch (e) {
    await gate;
    out({ step: i, name: step.name, event: fired ? "cancelled" : "error", error: String(e && e.message ? e.message : e), progress });
    if (fired) await nextLine();
  }
}
await client.close();
out({ event: "done" });
process.exit(0);
