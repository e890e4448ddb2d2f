#include "simulator/turn_straggle.h"

#include <memory>

#include "cost_model/estimator.h"
#include "simulator/simulator.h"

namespace pw::cost {
namespace {

// The plans' simulated steady steps with the straggle's `share`, one per run.
StatusOr<std::vector<double>> SimulatedSteps(const std::vector<MeasuredStep>& runs,
                                             const OpCostTable& table, const OpRegistry& registry,
                                             int steps, double share) {
  OpCostTable priced = table;  // a table's spec is the one its estimator prices with
  priced.mutable_proto().mutable_device_spec()->set_turn_straggle(share);
  const DeviceSpec spec = priced.proto().device_spec();
  PW_ASSIGN_OR_RETURN(std::shared_ptr<Estimator> estimator,
                      Estimator::Create(spec, std::move(priced)));
  SimOptions options;
  options.steps = steps;
  options.record_timeline = false;
  const Simulator simulator(estimator, registry, options);
  std::vector<double> seconds;
  for (const MeasuredStep& run : runs) {
    PW_ASSIGN_OR_RETURN(SimResult r, simulator.RunSteady(*run.plan));
    seconds.push_back(r.steady_step_time);
  }
  return seconds;
}

}  // namespace

StatusOr<TurnStraggleFit> FitTurnStraggle(const std::vector<MeasuredStep>& runs,
                                          const OpCostTable& table, const OpRegistry& registry,
                                          int steps) {
  if (steps < 2) return InvalidArgument("a steady step needs at least 2 steps, got ", steps);
  std::vector<MeasuredStep> measured;
  for (const MeasuredStep& run : runs)
    if (run.plan && run.seconds > 0) measured.push_back(run);
  PW_ASSIGN_OR_RETURN(std::vector<double> none,
                      SimulatedSteps(measured, table, registry, steps, 0));
  PW_ASSIGN_OR_RETURN(std::vector<double> all, SimulatedSteps(measured, table, registry, steps, 1));
  // Only the plans whose step the share moves tell it.
  std::vector<MeasuredStep> telling;
  TurnStraggleFit fit;
  for (size_t i = 0; i < measured.size(); ++i) {
    if (all[i] - none[i] <= 1e-9 * none[i]) continue;
    telling.push_back(measured[i]);
    fit.measured += measured[i].seconds;
    fit.without += none[i];
    fit.with_all += all[i];
  }
  fit.plans = static_cast<int>(telling.size());
  if (telling.empty()) return fit;
  fit.fitted = true;
  auto total = [&](double share) -> StatusOr<double> {
    PW_ASSIGN_OR_RETURN(std::vector<double> s,
                        SimulatedSteps(telling, table, registry, steps, share));
    double sum = 0;
    for (double x : s) sum += x;
    return sum;
  };
  if (fit.without >= fit.measured) {
    fit.share = 0, fit.with_share = fit.without;
    return fit;
  }
  if (fit.with_all <= fit.measured) {
    fit.share = 1, fit.with_share = fit.with_all;
    return fit;
  }
  double low = 0, high = 1;
  for (int i = 0; i < 30; ++i) {
    const double mid = (low + high) / 2;
    PW_ASSIGN_OR_RETURN(double at, total(mid));
    (at < fit.measured ? low : high) = mid;
  }
  fit.share = (low + high) / 2;
  PW_ASSIGN_OR_RETURN(fit.with_share, total(fit.share));
  return fit;
}

}  // namespace pw::cost
