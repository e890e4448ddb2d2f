#pragma once
// What the cost model knows about a device when it has no measurement: peak FLOP/s per
// element type, memory bandwidth, launch and event overheads, links between ranks, and
// how ranks share it. Built-ins: this machine's CPU (defaults that `pipeweave profile`
// replaces with measured figures), H100-SXM and A100-80GB from their public data sheets;
// or a user's file (text or binary DeviceSpec).

#include <string>
#include <vector>

#include "ir/status.h"
#include "ir/types.h"
#include "proto/cost_model.pb.h"

namespace pw::cost {

using DeviceSpec = ::pipeweave::proto::DeviceSpec;

// "cpu", "h100" (or "h100-sxm"), "h200" (or "h200-sxm"), "a100" (or "a100-80gb").
StatusOr<DeviceSpec> BuiltinDeviceSpec(const std::string& name);
std::vector<std::string> BuiltinDeviceNames();
// A built-in name, else a DeviceSpec file.
StatusOr<DeviceSpec> ResolveDeviceSpec(const std::string& name_or_path);

// Negative, non-finite or missing figures are errors naming the field.
Status ValidateDeviceSpec(const DeviceSpec& spec);

// Peak FLOP/s for `dtype`; falls back to the f32 figure (then the largest) when the spec
// has no entry for it.
double PeakFlops(const DeviceSpec& spec, DataType dtype);

// Time of an op that does `flops` and moves `bytes`, at the device's roofline.
double RooflineTime(const DeviceSpec& spec, DataType dtype, double flops, double bytes);

// The speed each of `threads` busy threads of a node gets: min(1, cores / threads) on a
// machine of our own, else from the measured thread_rate (beyond the measured counts the
// last rate shared out further). 1 when the spec has no cores (GPUs).
double ThreadRate(const DeviceSpec& spec, double threads);

// Whether two global ranks share a node (ranks fill nodes in order).
bool SameNode(const DeviceSpec& spec, int rank_a, int rank_b);

}  // namespace pw::cost
