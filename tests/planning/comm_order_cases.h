#pragma once
// The order-comm cases shared by its test and benchmark: the U-Net (skip connections from
// each early stage to its mirror) planned by the pass pipeline at a pipeline depth, and a
// 6-stage chain with the extra skip communications 1 -> 6 and 2 -> 5 (stages numbered
// from 1), each as a compute-only 1F1B schedule.

#include <string>

#include "ir/plan_actions.h"
#include "models/unet.h"
#include "passes/pass_manager.h"
#include "passes/pipeline/module_stages.h"
#include "passes/pipeline/schedule_generators.h"

namespace pw::pipeline::comm_order_cases {

inline StatusOr<ActionSchedule> Unet(int pp, int micro_batches) {
  models::UnetConfig config;
  config.layers = 2 * pp;
  config.hidden = 8;
  config.seq = 4;
  config.vocab = 16;
  config.pp = pp;
  PW_ASSIGN_OR_RETURN(Module module, models::BuildUnet(config));
  PassManager manager;
  PW_RETURN_IF_ERROR(manager.AddPipeline("append-backward,split-program,schedule{kind=1f1b," +
                                         std::string("micro-batches=") +
                                         std::to_string(micro_batches) + "}"));
  PW_RETURN_IF_ERROR(manager.Run(module).status());
  PW_ASSIGN_OR_RETURN(ModuleStages stages, ReadModuleStages(module));
  PW_ASSIGN_OR_RETURN(ActionSchedule schedule, PlanToActionSchedule(module.plan));
  schedule.skip_edges = stages.skip_edges;
  return schedule;
}

inline StatusOr<ActionSchedule> SixStagesWithSkips(int micro_batches) {
  ScheduleSpec spec;
  spec.kind = ScheduleKind::k1F1B;
  spec.num_stages = spec.num_ranks = 6;
  spec.num_micro_batches = micro_batches;
  PW_ASSIGN_OR_RETURN(ActionSchedule schedule, GenerateSchedule(spec));
  schedule.skip_edges = {{0, 5}, {1, 4}};
  return schedule;
}

}  // namespace pw::pipeline::comm_order_cases
