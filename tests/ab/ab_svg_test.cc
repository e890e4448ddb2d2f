// `pipeweave ab --svg` stacks two drawings: one document, the second below the first, ids
// kept apart.

#include "ab/ab_svg.h"

#include <gtest/gtest.h>

namespace pw::ab {
namespace {

const char* kDrawing =
    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"300\" height=\"100\">\n"
    "<defs><marker id=\"arrow\"/></defs><line marker-end=\"url(#arrow)\"/>\n</svg>\n";

TEST(StackSvgsTest, SecondBelowFirstWithItsOwnIds) {
  StatusOr<std::string> svg = StackSvgs(kDrawing, kDrawing);
  ASSERT_TRUE(svg.ok()) << svg.status().message();
  EXPECT_NE(svg->find("width=\"300.0\" height=\"200.0\""), std::string::npos) << *svg;
  EXPECT_NE(svg->find("<svg y=\"100.0\" xmlns="), std::string::npos) << *svg;
  EXPECT_NE(svg->find("id=\"arrow\""), std::string::npos);
  EXPECT_NE(svg->find("id=\"b-arrow\""), std::string::npos);
  EXPECT_NE(svg->find("url(#b-arrow)"), std::string::npos);
  EXPECT_EQ(svg->rfind("</svg>\n"), svg->size() - 7);
}

TEST(StackSvgsTest, RefusesWhatIsNotADrawing) {
  EXPECT_FALSE(StackSvgs("no drawing", kDrawing).ok());
  EXPECT_FALSE(StackSvgs(kDrawing, "<svg width=\"3\">").ok());
}

}  // namespace
}  // namespace pw::ab
