// The verb table without a Store: argument checking, schemas, the CLI's command line, base64.
#include <gtest/gtest.h>

#include <set>

#include "cli/command_line.h"
#include "cli/json_shapes.h"
#include "cli/verb.h"

namespace layerfs::cli {
namespace {

class Capture : public Output {
 public:
  void Out(std::string_view s) override { out += s; }
  void Err(std::string_view s) override { err += s; }
  std::string out, err;
};

TEST(VerbTable, NamesAreUniqueAndEveryProtocolVerbRuns) {
  std::set<std::string> names;
  for (const auto& v : Verbs()) {
    EXPECT_TRUE(names.insert(v.name).second) << v.name;
    if (v.protocol) {
      EXPECT_TRUE(v.run) << v.name;
    }
    for (const auto& a : v.args) EXPECT_FALSE(a.name.empty()) << v.name;
  }
  for (const char* v : {"branches", "fork", "branch_delete", "log", "show", "diff", "cat", "export", "import", "mount",
                        "umount", "mounts", "commit", "status", "reset", "stats", "verify", "gc"})
    EXPECT_NE(FindVerb(v), nullptr) << v;
}

TEST(VerbTable, CheckArgsNamesWhatIsWrong) {
  const Verb& log = *FindVerb("log");
  EXPECT_TRUE(CheckArgs(log, json::object()).ok());
  EXPECT_TRUE(CheckArgs(log, {{"ref", "main"}, {"max_count", 3}}).ok());
  EXPECT_TRUE(CheckArgs(log, {{"ref", nullptr}}).ok());  // null is absent
  Status s = CheckArgs(log, {{"max_count", "ten"}});
  EXPECT_EQ(s.code(), EINVAL);
  EXPECT_NE(s.message().find("max_count"), std::string::npos) << s.message();
  EXPECT_EQ(CheckArgs(log, {{"max_count", -1}}).code(), EINVAL);
  EXPECT_EQ(CheckArgs(log, {{"max_count", 1.5}}).code(), EINVAL);
  s = CheckArgs(log, {{"bogus", 1}});
  EXPECT_NE(s.message().find("bogus"), std::string::npos);
  EXPECT_EQ(CheckArgs(log, json::array()).code(), EINVAL);
  s = CheckArgs(*FindVerb("fork"), json::object());
  EXPECT_NE(s.message().find("missing argument 'name'"), std::string::npos) << s.message();
  // A CLI-only argument is not the protocol's.
  EXPECT_EQ(CheckArgs(*FindVerb("diff"), {{"a", "x"}, {"b", "y"}, {"stat", true}}).code(), EINVAL);
  EXPECT_EQ(CheckArgs(*FindVerb("verify"), {{"commits", {"a", 1}}}).code(), EINVAL);
}

TEST(VerbTable, SchemaFollowsTheSpecs) {
  json s = ArgsSchema(*FindVerb("fork"));
  EXPECT_EQ(s["type"], "object");
  EXPECT_EQ(s["required"], json::array({"name"}));
  EXPECT_EQ(s["properties"]["from"]["type"], "string");
  EXPECT_EQ(s["additionalProperties"], false);
  json d = ArgsSchema(*FindVerb("diff"));
  EXPECT_FALSE(d["properties"].contains("stat"));
  EXPECT_EQ(ArgsSchema(*FindVerb("verify"))["properties"]["commits"]["items"]["type"], "string");
}

TEST(CommandLine, ParsesIntoProtocolArguments) {
  Capture o;
  CommandLine cl = ParseCommandLine({"layerfs", "--store", "/s", "log", "main", "-n", "5", "--json"}, o);
  ASSERT_EQ(cl.exit, -1) << o.err;
  EXPECT_EQ(cl.verb->name, "log");
  EXPECT_EQ(cl.args.raw(), json({{"ref", "main"}, {"max_count", 5}}));
  EXPECT_TRUE(cl.as_json);
  EXPECT_EQ(cl.store, "/s");

  cl = ParseCommandLine({"layerfs", "cat", "abc1:dir/f:x"}, o);
  EXPECT_EQ(cl.verb->name, "cat");
  EXPECT_EQ(cl.args.raw(), json({{"commit", "abc1"}, {"path", "dir/f:x"}}));

  cl = ParseCommandLine({"layerfs", "branch", "-d", "old"}, o);
  EXPECT_EQ(cl.verb->name, "branch_delete");
  EXPECT_EQ(cl.args.raw(), json({{"name", "old"}}));
  cl = ParseCommandLine({"layerfs", "branch"}, o);
  EXPECT_EQ(cl.verb->name, "branches");

  cl = ParseCommandLine({"layerfs", "diff", "a", "b", "--stat"}, o);
  EXPECT_EQ(cl.args.raw(), json({{"a", "a"}, {"b", "b"}}));  // --stat shapes the text only
  EXPECT_TRUE(cl.all.Bool("stat"));

  cl = ParseCommandLine({"layerfs", "exec", "main", "--commit", "--", "sh", "-c", "exit 3"}, o);
  EXPECT_EQ(cl.verb->name, "exec");
  EXPECT_EQ(cl.all.Strings("command"), (std::vector<std::string>{"sh", "-c", "exit 3"}));

  Capture bad;
  cl = ParseCommandLine({"layerfs", "log", "-n", "x"}, bad);
  EXPECT_EQ(cl.exit, 2);
  EXPECT_EQ(bad.err.rfind("layerfs: ", 0), 0u) << bad.err;
  cl = ParseCommandLine({"layerfs", "cat", "nocolon"}, bad);
  EXPECT_EQ(cl.exit, 2);

  // A word that is no verb is named in one line; Git's verbs without a counterpart say what to
  // do instead (CLI11 alone said "A subcommand is required").
  Capture typo;
  cl = ParseCommandLine({"layerfs", "--store", "/s", "comit", "-m", "x"}, typo);
  EXPECT_EQ(cl.exit, 2);
  EXPECT_EQ(typo.err, "layerfs: 'comit' is not a layerfs command (`layerfs --help` lists them)\n");
  Capture add;
  cl = ParseCommandLine({"layerfs", "add", "."}, add);
  EXPECT_EQ(cl.exit, 2);
  EXPECT_EQ(add.err, "layerfs: 'add' is not a layerfs command: there is no staging area: `layerfs commit` records "
                     "every change of the Workspace\n");
  // Git's `commit -am MSG`: -a is accepted, and is no protocol argument.
  Capture am;
  cl = ParseCommandLine({"layerfs", "commit", "-am", "msg"}, am);
  ASSERT_LT(cl.exit, 0) << am.err;
  EXPECT_EQ(cl.verb->name, "commit");
  EXPECT_EQ(cl.args.raw(), (json{{"message", "msg"}}));
}

TEST(CommandLine, RemoteVerbsParseIntoTheirProtocolVerbs) {
  Capture o;
  CommandLine cl = ParseCommandLine({"layerfs", "remote", "add", "origin", "s3://b/p", "--lazy", "--json"}, o);
  ASSERT_EQ(cl.exit, -1) << o.err;
  EXPECT_EQ(cl.verb->name, "remote_add");
  EXPECT_EQ(cl.args.raw(), json({{"name", "origin"}, {"url", "s3://b/p"}, {"lazy", true}}));
  EXPECT_TRUE(cl.as_json);
  cl = ParseCommandLine({"layerfs", "remote", "-v"}, o);
  EXPECT_EQ(cl.verb->name, "remote_list");
  EXPECT_EQ(cl.args.raw(), json::object());  // -v shapes the text only
  EXPECT_TRUE(cl.all.Bool("verbose"));
  cl = ParseCommandLine({"layerfs", "remote", "--json", "remove", "origin"}, o);
  EXPECT_EQ(cl.verb->name, "remote_remove");
  EXPECT_EQ(cl.args.raw(), json({{"name", "origin"}}));
  EXPECT_TRUE(cl.as_json);
  cl = ParseCommandLine({"layerfs", "push", "origin", "main", "b2", "--force"}, o);
  EXPECT_EQ(cl.verb->name, "push");
  EXPECT_EQ(cl.args.raw(), json({{"remote", "origin"}, {"branches", {"main", "b2"}}, {"force", true}}));
  cl = ParseCommandLine({"layerfs", "pull", "origin", "main"}, o);
  EXPECT_EQ(cl.args.raw(), json({{"remote", "origin"}, {"branch", "main"}}));
  cl = ParseCommandLine({"layerfs", "clone", "file:///r", "s", "--lazy"}, o);
  EXPECT_EQ(cl.args.raw(), json({{"url", "file:///r"}, {"store", "s"}, {"lazy", true}}));
  for (const char* v : {"remote_list", "remote_add", "remote_remove", "push", "fetch", "pull", "clone"}) {
    ASSERT_NE(FindVerb(v), nullptr) << v;
    EXPECT_TRUE(FindVerb(v)->protocol) << v;
  }
  for (const char* v : {"push", "fetch", "pull", "clone"}) EXPECT_TRUE(FindVerb(v)->progress) << v;
  Capture bad;
  cl = ParseCommandLine({"layerfs", "remote", "add", "origin"}, bad);
  EXPECT_EQ(cl.exit, 2);
  EXPECT_EQ(CheckArgs(*FindVerb("remote_list"), {{"verbose", true}}).code(), EINVAL);
}

TEST(CommandLine, PrintsTextJsonAndErrors) {
  Capture o;
  CommandLine cl = ParseCommandLine({"layerfs", "fork", "x"}, o);
  json r = {{"branch", "x"}, {"commit", "0123"}};
  EXPECT_EQ(PrintOutcome(cl, Status::Ok(), r, o), 0);
  EXPECT_EQ(o.out, "x 0123\n");
  cl.as_json = true;
  o.out.clear();
  EXPECT_EQ(PrintOutcome(cl, Status::Ok(), r, o), 0);
  EXPECT_EQ(json::parse(o.out), r);
  // With --json a failure is the protocol's error object, so a program keeps its code.
  EXPECT_EQ(PrintOutcome(cl, Status::Exists("branch 'x' already exists"), nullptr, o), 1);
  EXPECT_EQ(json::parse(o.err), (json{{"error", {{"code", "EEXIST"}, {"errno", 17}, {"message", "branch 'x' already exists"}}}}));
  EXPECT_EQ(o.err.back(), '\n');
  o.err.clear();
  cl.as_json = false;
  EXPECT_EQ(PrintOutcome(cl, Status::Exists("branch 'x' already exists"), nullptr, o), 1);
  EXPECT_EQ(o.err, "layerfs: branch 'x' already exists\n");
  // verify's damaged objects: a result to the protocol, a failure to the shell.
  Capture v;
  cl = ParseCommandLine({"layerfs", "verify"}, v);
  json rep = {{"ok", false}, {"commits", 1}, {"objects", 2}, {"bytes", 3}, {"problems", {"blob x: bad"}}};
  EXPECT_EQ(PrintOutcome(cl, Status::Ok(), rep, v), 1);
  EXPECT_NE(v.out.find("damaged: blob x: bad"), std::string::npos);
  EXPECT_NE(v.err.find("verify found 1 problem"), std::string::npos);
}

TEST(Base64, RoundTripsEveryLength) {
  std::string data;
  for (int i = 0; i < 300; i++) {
    auto back = Base64Decode(Base64Encode(data));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, data);
    data.push_back(static_cast<char>(i * 37));
  }
  EXPECT_EQ(Base64Encode("hi\n"), "aGkK");
  EXPECT_EQ(*Base64Decode("aGkK"), "hi\n");
  EXPECT_EQ(*Base64Decode("aGk"), "hi");  // padding optional
  EXPECT_EQ(Base64Decode("a").status().code(), EINVAL);
  EXPECT_EQ(Base64Decode("a*bc").status().code(), EINVAL);
}

}  // namespace
}  // namespace layerfs::cli
