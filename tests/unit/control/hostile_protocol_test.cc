// Hostile answers on the control socket (docs/reliability.md, "Hostile input"): findings of the
// protocol fuzz target (tests/fuzz/protocol_fuzz.cc), kept as regressions.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "control/protocol.h"

namespace layerfs::control {
namespace {

// A Call whose daemon answered `answer` and closed.
Result<Reply> CallAnswered(const std::string& answer) {
  int sv[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  EXPECT_EQ(write(sv[0], answer.data(), answer.size()), static_cast<ssize_t>(answer.size()));
  shutdown(sv[0], SHUT_WR);
  Conn c(sv[1]);
  auto r = Call(c, "log", json::object(), "/");
  close(sv[0]);
  return r;
}

TEST(HostileProtocolTest, ErrorFieldsOfTheWrongTypeAreAbsentNotFatal) {
  // json::value threw type_error on these: the CLI died on a daemon's (or a peer's) odd error.
  auto r = CallAnswered("{\"id\":null,\"ok\":false,\"error\":{\"code\":5,\"errno\":\"x\",\"message\":[]}}\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status.code(), EIO);
  EXPECT_FALSE(r->status.ok());
  Status s = StatusFromError(json::parse("{\"code\":\"ENOENT\",\"errno\":2,\"message\":{\"a\":1}}"));
  EXPECT_EQ(s.code(), ENOENT);
  EXPECT_EQ(s.message(), "ENOENT");
}

TEST(HostileProtocolTest, MalformedAnswersAreProtocolErrors) {
  for (const std::string a : {"[1,2]\n", "{\"id\":null,\"ok\":\"yes\"}\n", "{\"id\":1,\"ok\":tr", "\xff\xfe\n"}) {
    auto r = CallAnswered(a);
    EXPECT_FALSE(r.ok()) << a;
  }
}

}  // namespace
}  // namespace layerfs::control
