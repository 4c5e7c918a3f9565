// `layerfs mcp`: the Store's verbs as MCP tools (Model Context Protocol, revision 2025-06-18) over
// stdio: JSON-RPC 2.0 messages, one per line, requests on stdin and responses on stdout; nothing
// else is written to stdout (diagnostics go to stderr).
//
// The tools are the verb table's (cli/verb.h): each verb with `mcp` set is a tool of the same
// name, its input schema generated from the verb's argument specs (ArgsSchema), so the tools and
// the control protocol cannot drift apart. A call is a control-protocol request to the Store's
// daemon, started with --idle 60 when none runs (docs/protocol.md, "Starting the daemon"); its
// result is the tool's structuredContent (an object; a list or other value is wrapped as
// {"result": value}) and, serialized, its text content. A verb's failure is a tool error
// (isError, "CODE: message"); an unknown tool or arguments that do not fit the schema are
// JSON-RPC errors (-32602), as the specification asks.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "cli/json_shapes.h"
#include "client/client.h"
#include "client/session.h"
#include "control/json_bytes.h"

namespace layerfs::client {

namespace {

using nlohmann::json;

constexpr const char* kMcpVersion = "2025-06-18";
constexpr int kIdleSeconds = 60;

// JSON-RPC 2.0 error codes.
constexpr int kParseError = -32700, kInvalidRequest = -32600, kMethodNotFound = -32601, kInvalidParams = -32602;

void Write(const json& msg) {
  std::string line = control::Dump(msg);
  line.push_back('\n');
  fwrite(line.data(), 1, line.size(), stdout);
  fflush(stdout);
}

void Reply(const json& id, json result) { Write({{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}); }

void ReplyError(const json& id, int code, const std::string& message) {
  Write({{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
}

json ToolList() {
  json tools = json::array();
  for (const auto& v : cli::Verbs()) {
    if (!v.mcp || !v.protocol || !v.run) continue;
    json annotations = {{"readOnlyHint", v.read_only}, {"openWorldHint", false}};
    if (!v.read_only) annotations["destructiveHint"] = v.destructive;
    tools.push_back({{"name", v.name},
                     {"title", v.cli.empty() ? v.name : "layerfs " + v.cli},
                     {"description", v.help},
                     {"inputSchema", cli::ArgsSchema(v)},
                     {"annotations", annotations}});
  }
  return tools;
}

// The text an agent reads: the result as JSON, with file content that is valid UTF-8 shown as
// text ("content") instead of base64.
std::string ResultText(const json& result) {
  if (result.is_object() && result.contains("content_base64") && result["content_base64"].is_string()) {
    auto data = cli::Base64Decode(result["content_base64"].get<std::string>());
    if (data.ok()) {
      json shown = result;
      if (control::ValidUtf8(*data)) {
        shown.erase("content_base64");
        shown["content"] = *data;
        return control::Dump(shown, 2);
      }
    }
  }
  return control::Dump(result, 2);
}

class Server {
 public:
  Server(std::string store, std::string cwd) : session_(std::move(store), std::move(cwd)) {}

  void Handle(const json& msg) {
    if (!msg.is_object()) return ReplyError(nullptr, kInvalidRequest, "a JSON-RPC message must be an object");
    const json id = msg.contains("id") ? msg["id"] : json();
    const bool notification = !msg.contains("id");
    if (msg.value("jsonrpc", "") != "2.0" || !msg.contains("method") || !msg["method"].is_string()) {
      // A response from the client (we send no requests) or garbage.
      if (msg.contains("result") || msg.contains("error")) return;
      if (!notification) ReplyError(id, kInvalidRequest, "not a JSON-RPC 2.0 request");
      return;
    }
    if (!notification && !id.is_string() && !id.is_number_integer())
      return ReplyError(nullptr, kInvalidRequest, "id must be a string or an integer");
    const std::string method = msg["method"].get<std::string>();
    const json params = msg.contains("params") ? msg["params"] : json::object();
    if (notification) return;  // notifications/initialized, notifications/cancelled, ...: nothing to answer
    if (!params.is_object()) return ReplyError(id, kInvalidParams, "params must be an object");
    if (method == "initialize") {
      Reply(id, {{"protocolVersion", kMcpVersion},
                 {"capabilities", {{"tools", {{"listChanged", false}}}}},
                 {"serverInfo", {{"name", "layerfs"}, {"title", "LayerFS"}, {"version", "0.1.0"}}},
                 {"instructions",
                  "Tools of one LayerFS Store (" + session_.store() +
                      "): versioned Workspaces. fork a branch, change its files (write_file, read_file, list_dir, "
                      "remove_path, or mount it and use a shell), commit, and compare with log and diff."}});
    } else if (method == "ping") {
      Reply(id, json::object());
    } else if (method == "tools/list") {
      Reply(id, {{"tools", ToolList()}});
    } else if (method == "tools/call") {
      Call(id, params);
    } else {
      ReplyError(id, kMethodNotFound, "method not found: " + method);
    }
  }

 private:
  void Call(const json& id, const json& params) {
    if (!params.contains("name") || !params["name"].is_string())
      return ReplyError(id, kInvalidParams, "tools/call needs a tool name");
    const std::string name = params["name"].get<std::string>();
    const cli::Verb* v = cli::FindVerb(name);
    if (!v || !v->mcp || !v->protocol || !v->run) return ReplyError(id, kInvalidParams, "unknown tool: " + name);
    json args = params.contains("arguments") && !params["arguments"].is_null() ? params["arguments"] : json::object();
    Status ok = cli::CheckArgs(*v, args);
    if (!ok.ok()) return ReplyError(id, kInvalidParams, ok.message());
    // Progress, when the client asked for it with a progress token.
    ProgressFn progress;
    if (params.contains("_meta") && params["_meta"].is_object() && params["_meta"].contains("progressToken")) {
      json token = params["_meta"]["progressToken"];
      progress = [token](const Progress& p) {
        json n = {{"progressToken", token},
                  {"progress", p.objects_total ? p.objects : p.bytes},
                  {"message", fmt::format("{}: {} objects, {} bytes", p.phase, p.objects, p.bytes)}};
        if (p.objects_total) n["total"] = p.objects_total;
        Write({{"jsonrpc", "2.0"}, {"method", "notifications/progress"}, {"params", n}});
      };
    }
    json result;
    Status s = session_.ConnectOrStart(kIdleSeconds);
    if (s.ok()) s = session_.Call(*v, cli::Args(args), &result, progress);
    json out;
    if (!s.ok()) {
      std::string text = s.CodeName() + ": " + s.message();
      if (!result.is_null()) text += "\n" + ResultText(result);
      out = {{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"isError", true}};
    } else {
      json structured = result.is_object() ? result : json{{"result", result}};
      out = {{"content", json::array({{{"type", "text"}, {"text", ResultText(result)}}})},
             {"structuredContent", structured},
             {"isError", false}};
    }
    Reply(id, out);
  }

  Session session_;
};

}  // namespace

int RunMcp(const std::string& store, const std::string& cwd) {
  if (store.empty()) {
    fprintf(stderr, "layerfs: mcp needs a store: use --store PATH or set LAYERFS_STORE\n");
    return 1;
  }
  if (access(store.c_str(), F_OK) != 0) {
    fprintf(stderr, "layerfs: mcp: store %s: %s\n", store.c_str(), strerror(errno));
    return 1;
  }
  Server server(store, cwd);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty() || line == "\r") continue;
    json msg;
    try {
      msg = control::Parse(line);
    } catch (const std::exception& e) {
      ReplyError(nullptr, kParseError, std::string("parse error: ") + e.what());
      continue;
    }
    if (msg.is_array()) {
      ReplyError(nullptr, kInvalidRequest, "JSON-RPC batches are not supported (MCP 2025-06-18)");
      continue;
    }
    server.Handle(msg);
  }
  return 0;
}

}  // namespace layerfs::client
