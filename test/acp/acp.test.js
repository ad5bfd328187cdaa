// `arbor acp` end to end with the official ACP TypeScript SDK (@agentclientprotocol/sdk) as the
// client, against the real binary, its daemon and the scripted model (script.json): what an
// editor speaking ACP version 1 sees, step by step. Each step builds on the one before; once
// one fails the rest are skipped.
//
// Usage: ARBOR_BIN=/abs/path/to/arbor node --test (or run.sh).

import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { World, acp, complaints, kinds, blockText, toolText, sleep, withTimeout, HANG } from "./harness.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const M = acp.methods.agent;

// The rank of a tool call's status: it only moves forward.
const rank = { pending: 0, in_progress: 1, completed: 2, failed: 2 };

test("arbor acp through the ACP TypeScript SDK", { timeout: 240_000 }, async (t) => {
  const w = new World();
  let failed = false;
  // A step with { todo } asserts what is right but is known to fail: its failure is reported
  // as a todo and does not stop the steps after it.
  const step = (name, fn, opts = {}) =>
    t.test(name, { skip: failed && "an earlier step failed", todo: opts.todo }, async (st) => {
      try {
        await fn(st);
      } catch (e) {
        if (!opts.todo) failed = true;
        throw e;
      }
    });
  t.after(async () => {
    const left = await w.close();
    if (failed || left.length) {
      const log = path.join(w.root, "stderr.log");
      if (fs.existsSync(log)) console.error(`--- ${log} (tail) ---\n${fs.readFileSync(log, "utf8").slice(-6000)}`);
      for (const f of ["daemon.log"]) {
        const p = path.join(w.vars.ARBOR_STATE_DIR, f);
        if (fs.existsSync(p)) console.error(`--- ${p} (tail) ---\n${fs.readFileSync(p, "utf8").slice(-4000)}`);
      }
    }
    assert.deepEqual(left, [], "processes of this run left behind after `arbor daemon stop`");
    if (!failed) fs.rmSync(w.root, { recursive: true, force: true });
  });

  w.initRepo();
  await w.startModel(path.join(here, "script.json"));
  const calc = path.join(w.repo, "calc.py");
  let ed = w.startACP();
  let sid; // the ACP session of the flow
  let branch;

  await step("initialize: version 1 negotiated, an unknown one refused with the one spoken, capabilities real", async () => {
    await assert.rejects(ed.request(M.initialize, { protocolVersion: 0, clientCapabilities: {} }), (e) => {
      assert.match(String(e.message), /version 0 is not spoken here: Arbor speaks version 1/);
      return true;
    });
    const init = await ed.initialize();
    assert.equal(init.protocolVersion, 1);
    assert.equal(acp.PROTOCOL_VERSION, 1);
    const caps = init.agentCapabilities;
    assert.equal(caps.loadSession, true);
    assert.ok(caps.sessionCapabilities?.list, "session/list advertised");
    assert.ok(caps.sessionCapabilities?.fork, "session/fork advertised");
    assert.notEqual(caps.promptCapabilities?.image, true, "images are not taken, so not advertised");
    assert.equal(init.agentInfo?.name, "arbor");
  });

  await step("session/new: a root session on its own branch, idle, in review mode", async () => {
    const ns = await ed.request(M.session.new, { cwd: w.repo, mcpServers: [] });
    sid = ns.sessionId;
    assert.ok(sid);
    assert.equal(ns.modes?.currentModeId, "review");
    branch = ns._meta?.arbor?.branch;
    assert.match(String(branch), /^arbor\/session-/);
    const s = w.session(sid);
    assert.equal(s.state, "idle");
    assert.equal(s.branch, branch);
  });

  await step("prompt: a cell that edits a file and spawns a child; updates in order; permission granted; written through fs/write_text_file", async () => {
    const mark = ed.updates.length;
    ed.permit = "apply";
    const res = await ed.prompt(sid, "acp edit: document add, and count in a helper");
    assert.equal(res.stopReason, "end_turn");
    const ups = ed.updates.slice(mark);
    const seq = kinds(ups);
    // The cell's tool call comes before any of its updates; its status only moves forward
    // (pending → in progress → completed; an update a later one superseded while the client
    // read may be folded into it); the child shows as a plan entry; the answer comes after the
    // cell completed.
    let cellID = "", last = -1, completedAt = -1, answerAt = -1, planAt = -1;
    const seen = new Set();
    ups.forEach((n, i) => {
      const u = n.update;
      if (u.sessionUpdate === "tool_call") {
        seen.add(u.toolCallId);
        if (u.kind === "execute" && !cellID) {
          cellID = u.toolCallId;
          last = rank[u.status ?? "pending"];
          if (u.status === "completed") completedAt = i;
        }
      } else if (u.sessionUpdate === "tool_call_update") {
        assert.ok(seen.has(u.toolCallId), `a tool_call_update of ${u.toolCallId} before its tool_call: ${seq.join(" ")}`);
        if (u.toolCallId === cellID && u.status) {
          assert.ok(rank[u.status] >= last, `the cell's status went back to ${u.status}: ${seq.join(" ")}`);
          last = rank[u.status];
          if (u.status === "completed") completedAt = i;
        }
      } else if (u.sessionUpdate === "plan" && planAt < 0) planAt = i;
      else if (u.sessionUpdate === "agent_message_chunk" && answerAt < 0) answerAt = i;
    });
    assert.ok(cellID, `no execute tool_call: ${seq.join(" ")}`);
    assert.ok(completedAt >= 0, `the cell never completed: ${seq.join(" ")}`);
    assert.ok(planAt >= 0, `no plan update for the child: ${seq.join(" ")}`);
    assert.ok(answerAt > completedAt, `the answer (at ${answerAt}) before the cell completed (at ${completedAt}): ${seq.join(" ")}`);

    let code = "", out = "", plan = "", answer = "";
    for (const n of ups) {
      const u = n.update;
      if (u.sessionUpdate === "tool_call" && u.toolCallId === cellID) code = toolText(u.content);
      if ((u.sessionUpdate === "tool_call_update" || u.sessionUpdate === "tool_call") && u.toolCallId === cellID && u.status === "completed") out = toolText(u.content);
      if (u.sessionUpdate === "plan") plan += u.entries.map((e) => `${e.content} [${e.status}]`).join("\n") + "\n";
      if (u.sessionUpdate === "agent_message_chunk") answer += blockText(u.content);
      assert.equal(n.sessionId, sid);
      assert.equal(n._meta?.arbor?.session, sid, `an update without _meta.arbor.session: ${JSON.stringify(n)}`);
    }
    assert.match(code, /open\('calc\.py', 'w'\)/);
    assert.match(out, /edited calc\.py and started/);
    assert.match(plan, /counter: acp child: count to three/);
    // The child runs on after the parent's turn (rlm returned its handle): its entry follows
    // its state, pending → in progress → completed, in plan updates sent as it changes.
    const childDone = await ed.waitFor("with the child's plan entry completed", mark, (n) =>
      n.update.sessionUpdate === "plan" && n.update.entries.some((e) => /^counter:/.test(e.content) && e.status === "completed"));
    let childRank = -1;
    for (const n of ed.updates.slice(mark, childDone + 1)) {
      if (n.update.sessionUpdate !== "plan") continue;
      const e = n.update.entries.find((x) => /^counter:/.test(x.content));
      assert.ok(e, `a plan without the child: ${JSON.stringify(n.update.entries)}`);
      const r = { pending: 0, in_progress: 1, completed: 2 }[e.status];
      assert.ok(r >= childRank, `the child's plan entry went back to ${e.status}`);
      childRank = r;
      assert.match(String(e._meta?.arbor?.branch), /^arbor\/acp-child-/);
    }
    assert.match(answer, /I documented add/);
    // Event updates name their event's seq (a fork point).
    assert.ok(ups.some((n) => Number.isInteger(n._meta?.arbor?.seq)), "no update carries _meta.arbor.seq");
    const tree = res._meta?.arbor?.tree;
    assert.ok(Array.isArray(tree) && tree.length >= 2, `the prompt's _meta.arbor.tree: ${JSON.stringify(res._meta)}`);

    // Permission asked once, with the diff of calc.py, then granted.
    assert.equal(ed.asked.length, 1);
    const ask = ed.asked[0];
    assert.equal(ask.sessionId, sid);
    assert.ok(ask.options.some((o) => o.optionId === "apply" && o.kind === "allow_once"));
    assert.ok(ask.options.some((o) => o.optionId === "keep" && o.kind === "reject_once"));
    const diff = ask.toolCall.content.find((c) => c.type === "diff");
    assert.ok(diff, `the permission request has no diff: ${JSON.stringify(ask.toolCall)}`);
    assert.equal(diff.path, calc);
    assert.match(diff.newText, /Sum of a and b/);
    assert.equal(diff.oldText, "def add(a, b):\n    return a + b\n");
    // Written through the client, and on the user's branch.
    assert.equal(ed.written.length, 1, JSON.stringify(ed.written));
    assert.equal(ed.written[0].path, calc);
    assert.match(ed.written[0].content, /Sum of a and b/);
    assert.match(fs.readFileSync(calc, "utf8"), /Sum of a and b/);
    assert.match(w.git("log", "--format=%s", "-1"), /arbor/);
    assert.equal(w.git("status", "--porcelain", "--untracked-files=no"), "", "the user's tree is not clean after the accept");
    // The apply shows as an edit tool call that completed.
    const apply = ups.filter((n) => String(n.update.toolCallId ?? "").startsWith("arbor-apply-"));
    assert.ok(apply.length > 0 && apply.at(-1).update.status === "completed", `the apply tool call: ${JSON.stringify(apply.map((n) => n.update.status))}`);
  });

  await step("permission refused (keep): the user's file unchanged, the change stays on the session branch", async () => {
    const mark = ed.updates.length;
    const before = fs.readFileSync(calc, "utf8");
    const head = w.git("rev-parse", "HEAD");
    ed.permit = "keep";
    const res = await ed.prompt(sid, "acp again: add sub");
    assert.equal(res.stopReason, "end_turn");
    assert.equal(ed.asked.length, 2);
    assert.equal(ed.written.length, 1, "a refused change was written through the client");
    assert.equal(fs.readFileSync(calc, "utf8"), before, "a refused change reached the user's file");
    assert.equal(w.git("rev-parse", "HEAD"), head, "a refused change reached the user's branch");
    assert.match(w.arbor("diff", sid), /def sub/, "the refused change is not on the session branch");
    const apply = ed.updates.slice(mark).filter((n) => String(n.update.toolCallId ?? "").startsWith("arbor-apply-"));
    const lastApply = apply.at(-1)?.update;
    assert.equal(lastApply?.status, "failed");
    assert.match(toolText(lastApply?.content), /kept on arbor\/session-/);
  });

  await step("session/cancel of a long cell: stopReason cancelled, the session takes the next prompt", async () => {
    await ed.request(M.session.setMode, { sessionId: sid, modeId: "branch" });
    const mark = ed.updates.length;
    const long = ed.prompt(sid, "acp long: print forever");
    long.catch(() => {});
    await ed.waitFor("with the long cell's output", mark, (n) =>
      n.update.sessionUpdate === "tool_call_update" && /tick 3/.test(toolText(n.update.content)));
    const t0 = Date.now();
    await ed.agent.notify(M.session.cancel, { sessionId: sid });
    const res = await withTimeout(long, 60_000, "the cancelled prompt");
    assert.equal(res.stopReason, "cancelled");
    t.diagnostic(`session/cancel → prompt answered: ${Date.now() - t0} ms`);
    const after = await ed.prompt(sid, "acp hello again");
    assert.equal(after.stopReason, "end_turn");
    assert.ok(ed.updates.slice(mark).some((n) => n.update.sessionUpdate === "agent_message_chunk" && /hello from arbor/.test(blockText(n.update.content))));
  });

  // The editor goes away while a slow cell runs (how: "close" ends its stdin, as an editor
  // quitting does; "kill" is SIGKILL): the turn goes on in the daemon to its end.
  const leaveMidTurn = async (how, text) => {
    const mark = ed.updates.length;
    ed.prompt(sid, text).catch(() => {});
    await ed.waitFor("with the slow cell running", mark, (n) =>
      n.update.sessionUpdate === "tool_call_update" && /slow start/.test(toolText(n.update.content)));
    if (how === "kill") {
      ed.child.kill("SIGKILL");
      await ed.exited;
      ed.conn.close();
    } else {
      const r = await ed.stop();
      assert.equal(r.code, 0, `arbor acp exited ${JSON.stringify(r)} when its client went away`);
    }
    assert.equal(w.session(sid).state, "running", "the turn stopped when the editor went away");
    const deadline = Date.now() + HANG;
    while (w.session(sid).state !== "idle") {
      assert.ok(Date.now() < deadline, "the session did not finish its turn after the editor went away");
      await sleep(200);
    }
  };

  // A new `arbor acp` loads the session: its whole history replayed before the answer.
  const loadHistory = async (wantUsers, slowTurns) => {
    ed = w.startACP();
    await ed.initialize();
    const load = await ed.request(M.session.load, { sessionId: sid, cwd: w.repo, mcpServers: [] });
    assert.equal(load.modes?.currentModeId, "branch", "the mode set before the disconnect is kept");
    const replay = ed.updates.slice();
    const users = replay.filter((n) => n.update.sessionUpdate === "user_message_chunk").map((n) => blockText(n.update.content));
    assert.deepEqual(users.map((u) => wantUsers.find((p) => u.startsWith(p)) ?? u), wantUsers, `the replayed user messages: ${JSON.stringify(users)}`);
    const answers = replay.filter((n) => n.update.sessionUpdate === "agent_message_chunk").map((n) => blockText(n.update.content));
    assert.ok(answers.some((a) => /I documented add/.test(a)), JSON.stringify(answers));
    assert.equal(answers.filter((a) => /the slow cell finished/.test(a)).length, slowTurns, `the answers of the turns finished after the editor left: ${JSON.stringify(answers)}`);
    // Replayed faster than read, a cell's updates may be folded into its tool_call.
    const slowDone = replay.filter((n) => (n.update.sessionUpdate === "tool_call" || n.update.sessionUpdate === "tool_call_update") &&
      n.update.status === "completed" && /slow done/.test(toolText(n.update.content)));
    assert.equal(new Set(slowDone.map((n) => n.update.toolCallId)).size, slowTurns, "the replay lacks a slow cell's completion");
    // In the order it happened. A tool call is placed where its cell started (the seq after
    // "@" in its id) and may carry a later event's seq, its updates folded in, so a tool call
    // counts at its start and its updates not at all; every other update's seq is above the
    // one before.
    let prev = 0;
    const dump = () => replay.map((n) => `${n._meta?.arbor?.seq} ${n._meta?.arbor?.event} ${kinds([n])} ${n.update.toolCallId ?? ""}`).join("\n");
    for (const n of replay) {
      const u = n.update;
      if (u.sessionUpdate === "tool_call_update") continue;
      const s = u.sessionUpdate === "tool_call" && /@\d+$/.test(u.toolCallId) ? Number(u.toolCallId.split("@").at(-1)) : n._meta?.arbor?.seq;
      if (s === undefined) continue;
      assert.ok(s >= prev, `replayed seq ${s} after ${prev}:\n${dump()}`);
      prev = s;
    }
    assert.ok(replay.every((n) => n.sessionId === sid));
    return replay;
  };

  const history = ["acp edit", "acp again", "acp long", "acp hello again", "acp slow"];
  await step("disconnect mid-turn: the editor closes while a slow cell runs; the turn finishes in the daemon", () =>
    leaveMidTurn("close", "acp slow: a cell that takes a while"));

  let replay;
  await step("session/load from a new process replays the whole history, the turn finished after the disconnect included", async () => {
    replay = await loadHistory(history, 1);
  });

  await step("session/list lists the session of the repository", async () => {
    const list = await ed.request(M.session.list, { cwd: w.repo });
    const s = list.sessions.find((x) => x.sessionId === sid);
    assert.ok(s, `session/list lacks ${sid}: ${JSON.stringify(list.sessions)}`);
    assert.equal(s.cwd, w.repo);
    assert.match(s.title ?? "", /^acp edit/);
    assert.equal(s._meta?.arbor?.branch, branch);
  });

  let fk;
  await step("session/fork at an event (_meta.arbor.atSeq): a new session on another branch with the code up to there", async () => {
    const at = replay.find((n) => n.update.sessionUpdate === "agent_message_chunk" && /I documented add/.test(blockText(n.update.content)))?._meta?.arbor?.seq;
    assert.ok(Number.isInteger(at), "the answer's update has no _meta.arbor.seq");
    fk = await ed.request(M.session.fork, { sessionId: sid, cwd: w.repo, mcpServers: [], _meta: { arbor: { atSeq: at } } });
    assert.ok(fk.sessionId && fk.sessionId !== sid, `fork: ${JSON.stringify(fk)}`);
    assert.equal(fk._meta?.arbor?.forkSeq, at);
    assert.equal(fk._meta?.arbor?.forkOf, sid);
    const f = w.session(fk.sessionId);
    assert.notEqual(f.branch, branch);
    assert.match(f.branch, /^arbor\//);
    const mark = ed.updates.length;
    const res = await ed.prompt(fk.sessionId, "acp hello fork");
    assert.equal(res.stopReason, "end_turn");
    const mine = ed.updates.slice(mark);
    assert.ok(mine.some((n) => n.sessionId === fk.sessionId && n.update.sessionUpdate === "agent_message_chunk" && /hello from arbor/.test(blockText(n.update.content))));
    assert.ok(mine.every((n) => n.sessionId === fk.sessionId), "the fork's turn sent updates of another session");
    // The fork's branch has the first turn's change, not the later one's.
    const forkCalc = fs.readFileSync(path.join(f.worktree, "calc.py"), "utf8");
    assert.match(forkCalc, /Sum of a and b/);
    assert.doesNotMatch(forkCalc, /def sub/);
    // And the original is untouched by the fork's turn.
    assert.equal(w.session(sid).state, "idle");
  });

  // A fork's log begins at the fork ("forked from X at event N"): its load replays X's
  // conversation up to N first, then its own turns.
  await step("session/load of the fork replays the conversation up to the fork point, then its own turn", async () => {
    const before = ed.updates.length;
    await ed.request(M.session.load, { sessionId: fk.sessionId, cwd: w.repo, mcpServers: [] });
    const ups = ed.updates.slice(before);
    const dump = ups.map((n) => `${n._meta?.arbor?.seq} ${n._meta?.arbor?.event} ${kinds([n])}`).join("\n");
    const users = ups.filter((n) => n.update.sessionUpdate === "user_message_chunk").map((n) => blockText(n.update.content));
    assert.deepEqual(users.map((u) => u.split(":")[0]), ["acp edit", "acp hello fork"], `the fork's replayed user messages:\n${dump}`);
    const answers = ups.filter((n) => n.update.sessionUpdate === "agent_message_chunk").map((n) => blockText(n.update.content)).join("|");
    assert.match(answers, /I documented add[\s\S]*hello from arbor/, `the fork's replayed answers:\n${dump}`);
    assert.ok(ups.every((n) => n.sessionId === fk.sessionId));
  });

  await step("the acp process killed (SIGKILL) mid-turn: the turn finishes; a new process loads it too", async () => {
    await leaveMidTurn("kill", "acp slow: once more");
    await loadHistory([...history, "acp slow"], 2);
  });

  await step("the editor closes: the acp process exits cleanly; the SDK took every message", async () => {
    const r = await ed.stop();
    assert.equal(r.code, 0, `arbor acp exited ${JSON.stringify(r)}`);
    assert.deepEqual(complaints, [], "messages from arbor acp the SDK could not take");
  });
});
