// agent-link's opencode plugin, installed by `agent-link install opencode`.
//
// opencode tells an MCP server nothing about the session that calls it, so before every call of
// agent-link's MCP tools (opencode names them "<server>_<tool>", the server being "agent-link")
// this adds the argument `_agentLinkCaller` naming the session, the tool call and this opencode
// server. agent-link's server then asks this opencode server whether that session is running that
// very call before it signs mail as the session (plugins/opencode/agent_link_opencode/proof.py).
// The value is set here whatever the model put there, so a model cannot name another session.
const PREFIX = "agent-link_";

export const AgentLinkCaller = async ({ serverUrl }) => ({
  "tool.execute.before": async (input, output) => {
    if (typeof input?.tool !== "string" || !input.tool.startsWith(PREFIX)) return;
    if (!output?.args || typeof output.args !== "object") return;
    // mutate in place: opencode sends this very object to the MCP server
    output.args._agentLinkCaller = {
      sessionID: input.sessionID,
      callID: input.callID,
      server: String(serverUrl),
    };
  },
});
