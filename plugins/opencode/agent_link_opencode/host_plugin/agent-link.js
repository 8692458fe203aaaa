// agent-link's opencode plugin, installed by `agent-link install opencode`.
//
// 1. Caller proof. opencode tells an MCP server nothing about the session that calls it, so
//    before every call of agent-link's MCP tools (opencode names them "<server>_<tool>", the
//    server being "agent-link") this adds the argument `_agentLinkCaller` naming the session, the
//    tool call and this opencode server. agent-link's server then asks this opencode server
//    whether that session is running that very call before it signs mail as the session
//    (plugins/opencode/agent_link_opencode/proof.py). The value is set here whatever the model
//    put there, so a model cannot name another session.
// 2. File leases. Before opencode's writing tools (edit, write, apply_patch, bash) this runs
//    `agent-link hook leases OpencodeToolBefore` (plugins/leases/agent_link_leases/hook.py) and
//    throws its refusal, which opencode hands the model as the tool's error: who holds the
//    path, why, until when and how to ask. Reads are never checked.
// 3. Mail. Before the first model request of a session's turn this runs
//    `agent-link hook opencode MessagesTransform` (plugins/opencode/agent_link_opencode/hook.py)
//    and adds its note (unread mail, reminders due; never a message body) to the turn's user
//    message, for that request only (nothing is stored in the session).
// Whatever goes wrong with agent-link (missing, crashing, slow) lets opencode go on unchanged.
import { spawn } from "node:child_process";

// `agent-link install opencode` writes the installing agent-link's path here
const AGENT_LINK = "agent-link";
const PREFIX = "agent-link_";
const WRITING_TOOLS = new Set(["edit", "write", "apply_patch", "bash"]);
// how an agent-link envelope starts (plugins/opencode/agent_link_opencode/delivery.py)
const ENVELOPE = "<agent-link-message ";
// the longest (ms) opencode waits for the agent-link command before going on without it
const HOOK_TIMEOUT_MS = 5000;
// A command that outlives that wait is not killed at once: it bounds itself, and the first one
// on a fresh state dir builds the registry every later one reads (a kill would leave the next
// prompt to build it again). Its answer is refused (a closed pipe: a reminder it claimed is
// given back); it is killed only after this (ms).
const HOOK_KILL_MS = 60000;

// Run `agent-link hook <host> <event>` with `payload` as JSON on stdin; its JSON answer, or
// null (nothing to say, or any failure).
function hook(host, event, payload) {
  return new Promise((resolve) => {
    let child;
    try {
      child = spawn(AGENT_LINK, ["hook", host, event], { stdio: ["pipe", "pipe", "ignore"] });
    } catch {
      resolve(null);
      return;
    }
    const chunks = [];
    const timer = setTimeout(() => {
      child.stdout.destroy();
      child.unref();
      setTimeout(() => child.kill("SIGKILL"), HOOK_KILL_MS).unref();
      resolve(null);
    }, HOOK_TIMEOUT_MS);
    child.on("error", () => { clearTimeout(timer); resolve(null); });
    child.stdout.on("data", (chunk) => chunks.push(chunk));
    child.on("close", (code) => {
      clearTimeout(timer);
      try {
        const text = Buffer.concat(chunks).toString("utf8").trim();
        resolve(code === 0 && text ? JSON.parse(text) : null);
      } catch {
        resolve(null);
      }
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

export const AgentLinkCaller = async ({ serverUrl, directory }) => ({
  "tool.execute.before": async (input, output) => {
    if (typeof input?.tool !== "string") return;
    if (input.tool.startsWith(PREFIX)) {
      if (!output?.args || typeof output.args !== "object") return;
      // mutate in place: opencode sends this very object to the MCP server
      output.args._agentLinkCaller = {
        sessionID: input.sessionID,
        callID: input.callID,
        server: String(serverUrl),
      };
      return;
    }
    if (!WRITING_TOOLS.has(input.tool)) return;
    const answer = await hook("leases", "OpencodeToolBefore", {
      hook_event_name: "PreToolUse",
      session_id: input.sessionID,
      tool_name: input.tool,
      tool_input: output?.args ?? {},
      cwd: directory,
    });
    const decision = answer?.hookSpecificOutput;
    if (decision?.permissionDecision === "deny" && typeof decision.permissionDecisionReason === "string") {
      throw new Error(decision.permissionDecisionReason);
    }
  },
  "experimental.chat.messages.transform": async (_input, output) => {
    const messages = output?.messages;
    if (!Array.isArray(messages)) return;
    // the turn's first request only (its last message is the user's): once per prompt, as the
    // Claude Code and Codex prompt hooks give it; not for a pushed agent-link message, which the
    // model is reading right then
    const last = messages.at(-1);
    const sessionID = last?.info?.sessionID;
    if (last?.info?.role !== "user" || typeof sessionID !== "string" || !Array.isArray(last.parts)) return;
    if (last.parts.some((p) => typeof p?.text === "string" && p.text.includes(ENVELOPE))) return;
    const answer = await hook("opencode", "MessagesTransform", { session_id: sessionID });
    const note = answer?.note;
    if (typeof note !== "string" || !note) return;
    last.parts.push({
      id: `${last.parts.at(-1)?.id ?? "prt"}-agent-link`,
      sessionID,
      messageID: last.info.id,
      type: "text",
      text: note,
      synthetic: true,
    });
  },
});
