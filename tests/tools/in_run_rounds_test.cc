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

TEST(SteadyRounds, KeepsTheRoundsNearTheFastest) {
  EXPECT_TRUE(SteadyRounds({}).empty());
  EXPECT_EQ(SteadyRounds({300e-6}), (std::vector<size_t>{0}));
  // 1.13x and 1.147x of the fastest are kept; a round in a slow spell (1.41x) is not.
  EXPECT_EQ(SteadyRounds({340e-6, 300e-6, 344e-6}), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(SteadyRounds({305e-6, 431e-6, 308e-6}), (std::vector<size_t>{0, 2}));
  // The fastest round sets the bar, wherever it comes.
  EXPECT_EQ(SteadyRounds({431e-6, 440e-6, 305e-6}), (std::vector<size_t>{2}));
}

TEST(WantsAnotherRound, UntilAsManyAreSteadyAsWanted) {
  EXPECT_FALSE(WantsAnotherRound({300e-6, 340e-6, 310e-6}, 3));
  EXPECT_TRUE(WantsAnotherRound({305e-6, 431e-6, 308e-6}, 3));
  // The round taken again came out steady: three of four are.
  EXPECT_FALSE(WantsAnotherRound({305e-6, 431e-6, 308e-6, 311e-6}, 3));
  EXPECT_FALSE(WantsAnotherRound({300e-6}, 1));
}

TEST(UnsteadyRoundsNote, SilentWhileTheRoundsAgree) {
  EXPECT_EQ(UnsteadyRoundsNote("a.pb", {}, 3), "");
  EXPECT_EQ(UnsteadyRoundsNote("a.pb", {300e-6}, 1), "");
  EXPECT_EQ(UnsteadyRoundsNote("a.pb", {300e-6, 340e-6, 310e-6}, 3), "");  // 1.13x
  EXPECT_EQ(UnsteadyRoundsNote("a.pb", {300e-6, 344e-6}, 2), "");          // 1.147x
}

TEST(UnsteadyRoundsNote, SaysHowFarTheRoundsMovedAndWhichArePriced) {
  // A round in a slow spell of the machine (every op slower together), taken again.
  const std::string note = UnsteadyRoundsNote("out/gpt.pb", {305e-6, 431e-6, 308e-6, 311e-6}, 3);
  EXPECT_NE(note.find("out/gpt.pb"), std::string::npos) << note;
  EXPECT_NE(note.find("from 305 to 431 us, 1.41x"), std::string::npos) << note;
  EXPECT_NE(note.find("from the 3 of 4 rounds within 1.15x of the fastest"), std::string::npos)
      << note;
  EXPECT_EQ(note.find("profile again"), std::string::npos) << "as many steady as wanted: " << note;
  EXPECT_EQ(note.find('\n'), std::string::npos) << "one line";
}

TEST(UnsteadyRoundsNote, SaysWhatToDoWhenTooFewWereSteady) {
  const std::string note = UnsteadyRoundsNote("out/gpt.pb", {431e-6, 305e-6, 440e-6, 428e-6}, 3);
  EXPECT_NE(note.find("from the 1 of 4 rounds"), std::string::npos) << note;
  EXPECT_NE(note.find("3 wanted"), std::string::npos) << note;
  EXPECT_NE(note.find("profile again"), std::string::npos) << note;
  EXPECT_NE(note.find("machine_steadiness.py"), std::string::npos) << note;
}

TEST(FastestConfirmed, AnotherRunWithinATenthOfTheFastest) {
  EXPECT_TRUE(FastestConfirmed({}));
  EXPECT_TRUE(FastestConfirmed({16.99e-3}));
  EXPECT_TRUE(FastestConfirmed({10.77e-3, 10.54e-3}));
  // A run in a slow spell beside one outside it: which is the machine's usual speed is open.
  EXPECT_FALSE(FastestConfirmed({17.54e-3, 14.49e-3}));
  EXPECT_FALSE(FastestConfirmed({10.98e-3, 14.32e-3}));
  // A third run settles it.
  EXPECT_TRUE(FastestConfirmed({10.98e-3, 14.32e-3, 10.71e-3}));
}

TEST(KeptRun, TheMedianOfTheRunsNearTheFastest) {
  EXPECT_EQ(KeptRun({}), 0u);
  EXPECT_EQ(KeptRun({16.99e-3}), 0u);
  EXPECT_EQ(KeptRun({10.74e-3, 10.63e-3}), 0u);                      // two near: the slower
  EXPECT_EQ(KeptRun({14.54e-3, 9.59e-3, 10.48e-3}), 2u);             // the spell's run left out
  EXPECT_EQ(KeptRun({11.87e-3, 10.09e-3, 14.80e-3, 13.97e-3}), 1u);  // 11.87: 1.18x
  EXPECT_EQ(KeptRun({10.2e-3, 10.4e-3, 10.3e-3, 14e-3}), 2u);        // 10.2, 10.3, 10.4: 10.3
}

TEST(BeyondReach, OverTheFitsLongestStepByMoreThanATenth) {
  EXPECT_FALSE(BeyondReach(15.8e-3, 14.4e-3));  // 1.097x
  EXPECT_TRUE(BeyondReach(17.882e-3, 15.354e-3));
  EXPECT_FALSE(BeyondReach(15e-3, 0));  // nothing to fit
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
