// The world of one run of the ACP test: its own daemon socket, state, XDG directories and git
// repository, the scripted model served by `arbor fake-model`, and `arbor acp` processes with
// the official ACP TypeScript SDK as their client (an editor). Everything it starts it stops,
// and it fails the run when a process of its own is left behind.

import { spawn, execFileSync } from "node:child_process";
import { Readable, Writable } from "node:stream";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import * as acp from "@agentclientprotocol/sdk/unstable";

export { acp };

// What the SDK complained of: it logs a message it could not take (a notification whose
// params fail its schema is logged and dropped) with console.error. The test fails on any.
export const complaints = [];
const consoleError = console.error.bind(console);
console.error = (...args) => {
  if (typeof args[0] === "string" && /^(Invalid message|Error handling notification|Got response to unknown request)/.test(args[0])) {
    complaints.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
  }
  consoleError(...args);
};

// Bounds every wait: it only turns a hang into a failure, it measures nothing.
export const HANG = 60_000;

export function arborBin() {
  const bin = process.env.ARBOR_BIN;
  if (!bin || !path.isAbsolute(bin) || !fs.existsSync(bin)) {
    throw new Error(`set ARBOR_BIN to the absolute path of the arbor binary (got ${JSON.stringify(bin)})`);
  }
  return bin;
}

export class World {
  constructor() {
    this.bin = arborBin();
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), "arbor-acp-node-"));
    // Short, for the 108-byte limit of a socket path.
    this.sockDir = fs.mkdtempSync("/tmp/aa");
    this.sock = path.join(this.sockDir, "arbor.sock");
    this.repo = path.join(this.root, "repo");
    this.procs = [];
    const j = (p) => path.join(this.root, p);
    this.vars = {
      HOME: j("home"),
      ARBOR_SOCKET: this.sock,
      ARBOR_STATE_DIR: j("state"),
      XDG_CONFIG_HOME: j("config"),
      XDG_STATE_HOME: j("xstate"),
      XDG_DATA_HOME: j("data"),
      XDG_RUNTIME_DIR: path.join(this.sockDir, "run"),
      ARBOR_KERNEL_PYTHON: "/usr/bin/python3",
      ARBOR_MODEL: "scripted",
      // No git config but the repository's; git would take an address from EMAIL.
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_CONFIG_NOSYSTEM: "1",
    };
    fs.mkdirSync(this.vars.HOME, { recursive: true, mode: 0o700 });
  }

  // The process environment with every ARBOR_*, XDG_* and GIT_* variable replaced by ours.
  env() {
    const out = {};
    for (const [k, v] of Object.entries(process.env)) {
      if (/^(ARBOR_|XDG_|GIT_)/.test(k) || k in this.vars || k === "EMAIL") continue;
      out[k] = v;
    }
    // The kernels must be real: a missing one fails instead of being skipped.
    return { ...out, ARBOR_REQUIRE_KERNEL: "1", ...this.vars };
  }

  git(...args) {
    return execFileSync("git", args, { cwd: this.repo, env: this.env(), encoding: "utf8" });
  }

  initRepo() {
    fs.mkdirSync(this.repo, { recursive: true });
    this.git("init", "-q", "-b", "main");
    this.git("config", "user.name", "Test User");
    this.git("config", "user.email", "test@example.com");
    fs.writeFileSync(path.join(this.repo, "README.md"), "# test repo\n");
    fs.writeFileSync(path.join(this.repo, "calc.py"), "def add(a, b):\n    return a + b\n");
    this.git("add", ".");
    this.git("commit", "-q", "-m", "initial");
  }

  arbor(...args) {
    return execFileSync(this.bin, args, { cwd: this.repo, env: this.env(), encoding: "utf8", timeout: HANG });
  }

  // One session as `arbor ls --json` shows it.
  session(id) {
    const all = JSON.parse(this.arbor("ls", "--json"));
    const s = all.find((x) => x.id === id);
    if (!s) throw new Error(`session ${id} is not in arbor ls --json`);
    return s;
  }

  // Starts `arbor fake-model` on the script and takes the URL it prints on its first line.
  async startModel(script) {
    const p = spawn(this.bin, ["fake-model", "--script", script], { env: this.env(), stdio: ["ignore", "pipe", "pipe"] });
    this.model = p;
    this.procs.push(p);
    p.stderr.on("data", (b) => this.log("fake-model", b));
    const lines = readline.createInterface({ input: p.stdout });
    const url = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("fake-model printed no URL")), HANG);
      lines.once("line", (l) => { clearTimeout(timer); resolve(l); });
      p.once("exit", (code) => reject(new Error(`fake-model exited ${code} before printing its URL`)));
    });
    if (!url.startsWith("http://")) throw new Error(`fake-model printed ${JSON.stringify(url)}, want its URL`);
    lines.on("line", () => {}); // keep draining
    this.vars.ARBOR_MODEL_BASE_URL = url;
    return url;
  }

  log(who, chunk) {
    fs.appendFileSync(path.join(this.root, "stderr.log"), `[${who}] ${chunk}`);
  }

  // Starts `arbor acp` in the repository with an SDK client connection to it.
  startACP() {
    const child = spawn(this.bin, ["acp"], { cwd: this.repo, env: this.env(), stdio: ["pipe", "pipe", "pipe"] });
    this.procs.push(child);
    child.stderr.on("data", (b) => this.log(`acp ${child.pid}`, b));
    const editor = new Editor(child);
    return editor;
  }

  // Processes of this run still alive: its daemon (--socket / ARBOR_SOCKET), kernels (their
  // files and working directories lie in the run's directories) and acp processes.
  owned() {
    const out = [];
    for (const pid of fs.readdirSync("/proc")) {
      if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
      try {
        const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim();
        if (!cmdline) continue; // a zombie or a kernel thread
        let cwd = "";
        try { cwd = fs.readlinkSync(`/proc/${pid}/cwd`); } catch {}
        let environ = "";
        try { environ = fs.readFileSync(`/proc/${pid}/environ`, "utf8"); } catch {}
        const mine = [this.root, this.sockDir].some((d) => cmdline.includes(d) || cwd === d || cwd.startsWith(d + "/")) ||
          environ.split("\0").includes(`ARBOR_SOCKET=${this.sock}`);
        if (mine) out.push({ pid: Number(pid), cmdline });
      } catch {}
    }
    return out;
  }

  // Stops the daemon as a user would, then the model, and reports what survived.
  async close() {
    const t0 = Date.now();
    const mark = (what) => this.log("test", `close: ${what} at ${Date.now() - t0} ms\n`);
    for (const p of this.procs) {
      if (p !== this.model && p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
    }
    if (fs.existsSync(this.sock)) {
      try { this.arbor("daemon", "stop"); } catch (e) { this.log("test", `arbor daemon stop: ${e}\n`); }
    }
    mark("daemon stopped");
    if (this.model && this.model.exitCode === null) {
      this.model.kill("SIGINT");
      await Promise.race([new Promise((r) => this.model.once("exit", r)), expiry(10_000)]);
    }
    mark("model stopped");
    let left = this.owned();
    for (const deadline = Date.now() + 20_000; left.length && Date.now() < deadline; left = this.owned()) await sleep(200);
    mark(`owned checked (${left.length} left)`);
    for (const p of left) { try { process.kill(p.pid, "SIGKILL"); } catch {} }
    fs.rmSync(this.sockDir, { recursive: true, force: true });
    return left;
  }
}

// Editor is the ACP client side, as an editor is: it records every session/update in order,
// answers permission requests with the option it is told, and writes the files it is asked to
// (as an editor saving a buffer would).
export class Editor {
  constructor(child) {
    this.child = child;
    this.updates = []; // {params, at} in arrival order
    this.asked = []; // session/request_permission params
    this.written = []; // fs/write_text_file params
    this.permit = "apply"; // the option to select; "" cancels the request
    this.waiters = new Set();
    this.exited = new Promise((r) => child.once("exit", (code, signal) => r({ code, signal })));
    const app = acp.client({ name: "arbor-acp-node-test" })
      .onNotification(acp.methods.client.session.update, ({ params }) => {
        this.updates.push(params);
        for (const w of this.waiters) w();
      })
      .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
        this.asked.push(params);
        if (!this.permit) return { outcome: { outcome: "cancelled" } };
        return { outcome: { outcome: "selected", optionId: this.permit } };
      })
      .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
        this.written.push(params);
        fs.writeFileSync(params.path, params.content);
        return {};
      })
      .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => ({ content: fs.readFileSync(params.path, "utf8") }));
    const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
    this.conn = app.connect(stream);
    this.agent = this.conn.agent;
  }

  request(method, params) {
    return withTimeout(this.agent.request(method, params), HANG, method);
  }

  initialize() {
    return this.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
      clientInfo: { name: "arbor-acp-node-test", version: "1" },
    });
  }

  prompt(sessionId, text) {
    return this.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
  }

  // Waits until an update from index `from` on satisfies ok; returns its index.
  async waitFor(what, from, ok) {
    const deadline = Date.now() + HANG;
    for (;;) {
      for (let i = from; i < this.updates.length; i++) if (ok(this.updates[i])) return i;
      if (Date.now() > deadline) throw new Error(`no update ${what} (updates: ${kinds(this.updates.slice(from)).join(" ")})`);
      await new Promise((r) => {
        const w = () => { this.waiters.delete(w); r(); };
        this.waiters.add(w);
        setTimeout(w, 50);
      });
    }
  }

  // The editor goes away: its end of stdin closes and the process ends.
  async stop() {
    this.child.stdin.end();
    const r = await Promise.race([this.exited, expiry(20_000).then(() => null)]);
    if (!r) { this.child.kill("SIGKILL"); return this.exited; }
    return r;
  }
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// expiry resolves after ms without keeping the process alive (for races against an exit).
function expiry(ms) {
  return new Promise((r) => setTimeout(r, ms).unref());
}

export function withTimeout(p, ms, what) {
  let timer;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms); }),
  ]);
}

// kinds names each update as kind[:status], for the order assertions and their messages.
export function kinds(ns) {
  return ns.map((n) => {
    const u = n.update;
    if (u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update") return `${u.sessionUpdate}:${u.status ?? ""}`;
    return u.sessionUpdate;
  });
}

export function blockText(c) {
  return c && c.type === "text" ? c.text : "";
}

// toolText is the text of a tool call's content blocks (its code, its output).
export function toolText(content) {
  return (content ?? []).map((c) => (c.type === "content" ? blockText(c.content) : "")).join("");
}
