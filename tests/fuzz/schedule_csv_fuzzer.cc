// libFuzzer target for the schedule CSV reader: any text must parse to a schedule or give
// a clean error. A schedule that parses prints back to CSV that parses to the same
// schedule, and the checker runs on it to the end.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ir/schedule_csv.h"
#include "passes/pipeline/schedule_checker.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto schedule = pw::ParseScheduleCsv(text);
  if (!schedule.ok()) return 0;
  auto again = pw::ParseScheduleCsv(pw::ScheduleToCsv(*schedule));
  if (!again.ok() || !(*again == *schedule)) std::abort();  // the round trip must hold
  (void)pw::pipeline::CheckSchedule(*schedule);
  return 0;
}
