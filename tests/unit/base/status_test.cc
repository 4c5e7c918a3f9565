#include <gtest/gtest.h>

#include "layerfs/status.h"

namespace layerfs {
namespace {

TEST(StatusTest, CodeNamesAreStableForProtocolClients) {
  EXPECT_EQ(Status::Ok().CodeName(), "OK");
  EXPECT_EQ(Status::NotFound("x").CodeName(), "ENOENT");
  EXPECT_EQ(Status::Error(ENOSPC, "full").CodeName(), "ENOSPC");
  EXPECT_EQ(Status::Error(kNotFastForward, "x").CodeName(), "NOT_FAST_FORWARD");
  EXPECT_EQ(Status::Error(kConflict, "x").CodeName(), "CONFLICT");
  EXPECT_EQ(Status::Error(kDiverged, "x").CodeName(), "DIVERGED");
  EXPECT_EQ(Status::Error(kTooLarge, "x").CodeName(), "TOO_LARGE");
  EXPECT_EQ(Status::Error(kProtocol, "x").CodeName(), "PROTOCOL");
}

TEST(StatusTest, OwnCodesNeverReachTheKernelAsThemselves) {
  EXPECT_EQ(Status::Ok().ToErrno(), 0);
  EXPECT_EQ(Status::Error(EROFS, "x").ToErrno(), EROFS);
  EXPECT_EQ(Status::Error(kConflict, "x").ToErrno(), EIO);
  EXPECT_EQ(Status::Error(0x7fffffff, "x").ToErrno(), EIO);
}

}  // namespace
}  // namespace layerfs
