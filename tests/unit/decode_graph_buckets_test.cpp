// Which captured graph a decode step replays (engine/backend/decode_graph_buckets.h): every batch
// size the backend can take has a bucket that holds it, within its capacity, with bounded padding.
#include <gtest/gtest.h>

#include "engine/backend/decode_graph_buckets.h"

namespace lmx {
namespace {

TEST(DecodeGraphBuckets, EveryBatchUpTo1024HasABucketWithinCapacityAndAThirdOfPadding) {
  for (int capacity : {1, 7, 100, 256, 512, 1000, 1024}) {
    for (int seqs = 1; seqs <= capacity; ++seqs) {
      const int b = decode_graph_bucket(seqs, capacity);
      ASSERT_GE(b, seqs) << seqs << " of " << capacity;
      ASSERT_LE(b, capacity) << seqs << " of " << capacity;
      if (seqs > 64) {
        ASSERT_LE(b - seqs, b / 3 + 1) << seqs << " of " << capacity;
      }
    }
  }
}

TEST(DecodeGraphBuckets, SmallestListedBucketOrTheCapacity) {
  EXPECT_EQ(decode_graph_bucket(1, 256), 1);
  EXPECT_EQ(decode_graph_bucket(3, 256), 4);
  EXPECT_EQ(decode_graph_bucket(129, 256), 192);
  EXPECT_EQ(decode_graph_bucket(513, 1024), 640);
  EXPECT_EQ(decode_graph_bucket(1000, 1024), 1024);
  EXPECT_EQ(decode_graph_bucket(97, 100), 100);    // the listed 128 exceeds the capacity
  EXPECT_EQ(decode_graph_bucket(1500, 2048), 2048);  // past the list: the capacity
}

TEST(DecodeGraphBuckets, NoBucketPastTheCapacityOrForNoSequences) {
  EXPECT_EQ(decode_graph_bucket(0, 256), 0);
  EXPECT_EQ(decode_graph_bucket(257, 256), 0);
}

}  // namespace
}  // namespace lmx
