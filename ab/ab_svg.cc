#include "ab/ab_svg.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "viz/sim_svg.h"

namespace pw::ab {
namespace {

struct SvgRoot {
  size_t begin = 0;    // where "<svg" starts
  size_t tag_end = 0;  // just past the opening tag's '>'
  double width = 0, height = 0;
};

// The numeric value of `name="..."` inside the opening tag.
double Attribute(const std::string& tag, const std::string& name) {
  size_t at = tag.find(" " + name + "=\"");
  if (at == std::string::npos) return 0;
  return std::strtod(tag.c_str() + at + name.size() + 3, nullptr);
}

StatusOr<SvgRoot> FindRoot(const std::string& svg) {
  SvgRoot root;
  root.begin = svg.find("<svg");
  if (root.begin == std::string::npos) return Internal("a drawing has no <svg> element");
  size_t end = svg.find('>', root.begin);
  if (end == std::string::npos) return Internal("a drawing's <svg> tag is not closed");
  root.tag_end = end + 1;
  std::string tag = svg.substr(root.begin, root.tag_end - root.begin);
  root.width = Attribute(tag, "width");
  root.height = Attribute(tag, "height");
  if (root.width <= 0 || root.height <= 0)
    return Internal("a drawing's <svg> tag has no width and height");
  return root;
}

// Gives every id of a drawing (and every url(#id) that points at one) a prefix, so that
// two drawings in one document do not share ids.
std::string PrefixIds(std::string svg, const std::string& prefix) {
  std::set<std::string> ids;
  for (size_t at = svg.find(" id=\""); at != std::string::npos; at = svg.find(" id=\"", at + 1)) {
    size_t begin = at + 5, end = svg.find('"', begin);
    if (end == std::string::npos) break;
    ids.insert(svg.substr(begin, end - begin));
  }
  for (const std::string& id : ids) {
    for (const std::string& from : {" id=\"" + id + "\"", "url(#" + id + ")"}) {
      std::string to = from;
      to.insert(5, prefix);  // after ` id="` or `url(#`
      for (size_t at = svg.find(from); at != std::string::npos; at = svg.find(from, at + to.size()))
        svg.replace(at, from.size(), to);
    }
  }
  return svg;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

}  // namespace

StatusOr<std::string> RankTimelineSvg(const Module& module, const SimulatedPlan& plan, int rank,
                                      const std::string& title, double time_scale_end) {
  return cost::SimRankLanesSvg(plan.sequential ? *plan.sequential : module, plan.graph, plan.result,
                               rank, title, time_scale_end);
}

StatusOr<std::string> StackSvgs(const std::string& top, const std::string& bottom) {
  PW_ASSIGN_OR_RETURN(SvgRoot a, FindRoot(top));
  const std::string lower = PrefixIds(bottom, "b-");
  PW_ASSIGN_OR_RETURN(SvgRoot b, FindRoot(lower));
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                    Num(std::max(a.width, b.width)) + "\" height=\"" + Num(a.height + b.height) +
                    "\">\n";
  out += top.substr(a.begin);
  out += "\n<svg y=\"" + Num(a.height) + "\"" + lower.substr(b.begin + 4);
  out += "\n</svg>\n";
  return out;
}

}  // namespace pw::ab
