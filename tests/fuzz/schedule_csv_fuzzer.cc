// libFuzzer target for the schedule CSV reader: any text must parse to a schedule or give
// a clean error. A schedule that parses prints to CSV that parses back to the same schedule
// (print and parse are inverses), and the checker runs on it to the end.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ir/schedule_csv.h"
#include "passes/pipeline/schedule_checker.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto schedule = pw::ParseScheduleCsv(text);
  if (!schedule.ok()) return 0;
  const std::string printed = pw::ScheduleToCsv(*schedule);
  auto again = pw::ParseScheduleCsv(printed);
  if (!again.ok() || !(*again == *schedule)) std::abort();  // must round-trip
  (void)pw::pipeline::CheckSchedule(*schedule);
  return 0;
}
