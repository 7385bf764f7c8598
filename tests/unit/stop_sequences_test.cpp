#include <gtest/gtest.h>

#include "engine/serving/stop_sequences.h"

namespace lmx {
namespace {

// Feeds `pieces` and returns everything emitted (push + flush).
std::string run(StopSequenceMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += m.push(p);
  return out + m.flush();
}

TEST(StopSequences, StopSplitAcrossPiecesIsNeverEmittedInPart) {
  StopSequenceMatcher m({"\n\nUser:"});
  std::string seen;
  for (std::string p : {"Hello", " world", "\n", "\nUs", "er:", " more"}) {
    seen += m.push(p);
    EXPECT_EQ(seen.find('\n'), std::string::npos) << "emitted part of the stop: " << seen;
  }
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(seen + m.flush(), "Hello world");
}

TEST(StopSequences, HeldBackTextIsReleasedWhenItDiverges) {
  StopSequenceMatcher m({"END"});
  EXPECT_EQ(m.push("the E"), "the ");
  EXPECT_EQ(m.push("N"), "");
  EXPECT_EQ(m.push("D?"), "");
  EXPECT_TRUE(m.stopped());
  StopSequenceMatcher n({"END"});
  EXPECT_EQ(run(n, {"the E", "N", "ough"}), "the ENough");
  EXPECT_FALSE(n.stopped());
}

TEST(StopSequences, EarliestOfSeveralWins) {
  StopSequenceMatcher m({"cd", "b"});
  EXPECT_EQ(run(m, {"abcd"}), "a");
}

TEST(StopSequences, NoStopsPassesEverythingThrough) {
  StopSequenceMatcher m({});
  EXPECT_EQ(m.push("abc"), "abc");
  StopSequenceMatcher e({""});  // empty stop strings are ignored
  EXPECT_EQ(e.push("abc"), "abc");
}

TEST(StopSequences, MultibyteStopSequence) {
  StopSequenceMatcher m({"。"});
  EXPECT_EQ(run(m, {"你好", "。再见"}), "你好");
}

}  // namespace
}  // namespace lmx
