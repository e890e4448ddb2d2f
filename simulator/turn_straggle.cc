#include "simulator/turn_straggle.h"

#include <cmath>
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
  std::vector<double> telling_none, telling_all;
  TurnStraggleFit fit;
  for (size_t i = 0; i < measured.size(); ++i) {
    if (all[i] - none[i] <= 1e-9 * none[i]) continue;
    telling.push_back(measured[i]);
    telling_none.push_back(none[i]);
    telling_all.push_back(all[i]);
    fit.measured += measured[i].seconds;
    fit.without += none[i];
    fit.with_all += all[i];
  }
  fit.plans = static_cast<int>(telling.size());
  if (telling.empty()) return fit;
  fit.fitted = true;
  // The sum of the steps' squared relative errors: a plan whose step the share hardly moves
  // pulls the fit little, however far off it is otherwise.
  auto squares = [&](const std::vector<double>& simulated) {
    double sum = 0;
    for (size_t i = 0; i < simulated.size(); ++i) {
      const double e = (simulated[i] - telling[i].seconds) / telling[i].seconds;
      sum += e * e;
    }
    return sum;
  };
  auto error = [&](double share) -> StatusOr<double> {
    PW_ASSIGN_OR_RETURN(std::vector<double> simulated,
                        SimulatedSteps(telling, table, registry, steps, share));
    return squares(simulated);
  };
  // Golden-section search (a step grows about linearly with the share), then the ends,
  // whose steps are simulated already.
  const double g = (std::sqrt(5.0) - 1) / 2;
  double low = 0, high = 1;
  double a = high - g * (high - low), b = low + g * (high - low);
  PW_ASSIGN_OR_RETURN(double fa, error(a));
  PW_ASSIGN_OR_RETURN(double fb, error(b));
  for (int i = 0; i < 40; ++i) {
    if (fa <= fb) {
      high = b, b = a, fb = fa, a = high - g * (high - low);
      PW_ASSIGN_OR_RETURN(fa, error(a));
    } else {
      low = a, a = b, fa = fb, b = low + g * (high - low);
      PW_ASSIGN_OR_RETURN(fb, error(b));
    }
  }
  fit.share = (low + high) / 2;
  PW_ASSIGN_OR_RETURN(std::vector<double> at_share,
                      SimulatedSteps(telling, table, registry, steps, fit.share));
  double best = squares(at_share);
  for (const auto& [end, simulated] : {std::pair{0.0, &telling_none}, {1.0, &telling_all}}) {
    if (squares(*simulated) > best) continue;
    best = squares(*simulated);
    fit.share = end;
    at_share = *simulated;
  }
  for (double x : at_share) fit.with_share += x;
  return fit;
}

}  // namespace pw::cost
