#include <gtest/gtest.h>
#include "layerfs/store.h"
TEST(Smoke, Policy) { auto p = layerfs::Policy::Parse("16/8/8"); ASSERT_TRUE(p.ok()); EXPECT_EQ(p->whole, 16u); }
