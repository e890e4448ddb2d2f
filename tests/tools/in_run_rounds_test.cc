#include "tools/in_run_rounds.h"

#include <gtest/gtest.h>

namespace pw::tools {
namespace {

TEST(RoundOpTime, SumsEachSignaturesMedian) {
  // Medians 2 us (odd count) and 5 us (even count: the middle two's mean); an empty one adds
  // nothing.
  std::map<std::string, std::vector<double>> seconds = {
      {"a", {3e-6, 1e-6, 2e-6}}, {"b", {4e-6, 6e-6}}, {"c", {}}};
  EXPECT_NEAR(RoundOpTime(seconds), 7e-6, 1e-12);
}

TEST(UnsteadyRoundsNote, SilentWhileTheRoundsAgree) {
  EXPECT_EQ(UnsteadyRoundsNote("a.pb", {}), "");
  EXPECT_EQ(UnsteadyRoundsNote("a.pb", {300e-6}), "");
  EXPECT_EQ(UnsteadyRoundsNote("a.pb", {300e-6, 340e-6, 310e-6}), "");  // 1.13x
  EXPECT_EQ(UnsteadyRoundsNote("a.pb", {300e-6, 344e-6}), "");          // 1.147x
}

TEST(UnsteadyRoundsNote, SaysHowFarTheRoundsMovedAndWhatToDo) {
  // A round in a slow spell of the machine: every op slower together.
  const std::string note = UnsteadyRoundsNote("out/gpt.pb", {305e-6, 431e-6, 308e-6});
  EXPECT_NE(note.find("out/gpt.pb"), std::string::npos) << note;
  EXPECT_NE(note.find("from 305 to 431 us, 1.41x"), std::string::npos) << note;
  EXPECT_NE(note.find("profile again"), std::string::npos) << note;
  EXPECT_NE(note.find("machine_steadiness.py"), std::string::npos) << note;
  EXPECT_EQ(note.find('\n'), std::string::npos) << "one line";
}

TEST(SlowMeasuringRunNote, SilentWithinReach) {
  EXPECT_EQ(SlowMeasuringRunNote(14.292e-3, 14.399e-3), "");  // the fit reaches it
  EXPECT_EQ(SlowMeasuringRunNote(15.8e-3, 14.4e-3), "");      // 1.097x
  EXPECT_EQ(SlowMeasuringRunNote(15e-3, 0), "");              // nothing to fit
}

TEST(SlowMeasuringRunNote, SaysTheRunWasBeyondTheModelsReach) {
  // A demo's measuring run in a slow spell: 17.882 ms against 15.354 with all the straggle,
  // while the runs after it stepped 10.3-12.6 ms.
  const std::string note = SlowMeasuringRunNote(17.882e-3, 15.354e-3);
  EXPECT_NE(note.find("stepped 17.882 ms, 1.16x the 15.354 ms"), std::string::npos) << note;
  EXPECT_NE(note.find("profile again"), std::string::npos) << note;
  EXPECT_NE(note.find("compare_traces.py"), std::string::npos) << note;
  EXPECT_EQ(note.find('\n'), std::string::npos) << "one line";
}

}  // namespace
}  // namespace pw::tools
