// The estimator's three paths on made-up tables: exact hit, interpolation over the op
// type's points by work, roofline; and the errors for mismatched or bad inputs.

#include "cost_model/estimator.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cost_model/cache_state.h"

namespace pw::cost {
namespace {

// 1 GFLOP/s and 1 GB/s with no efficiency loss: the work of a point is flops / 1e9 (or
// bytes / 1e9), which keeps the expected numbers readable.
DeviceSpec SimpleDevice(const std::string& name = "cpu") {
  DeviceSpec d = *BuiltinDeviceSpec("cpu");
  d.set_name(name);
  d.mutable_peak_flops(0)->set_flops_per_s(1e9);
  d.set_memory_bandwidth(1e9);
  d.set_flops_efficiency(1);
  d.set_bandwidth_efficiency(1);
  d.set_min_kernel_time(0);
  return d;
}

OpCostEntry Point(const std::string& variant, double flops, double seconds) {
  OpCostEntry e;
  e.set_op_type("matmul");
  e.set_key(StrCat("matmul(X:f32[", flops, "])", variant));
  e.set_median(seconds);
  e.set_repeats(10);
  e.set_flops(flops);
  e.set_bytes(0);
  return e;
}

OpSignature Query(double flops, const std::string& variant = "trans_x=0") {
  OpSignature s;
  s.op_type = "matmul";
  s.variant = variant;
  s.key = StrCat("matmul(query ", flops, ")", variant);
  s.flops = flops;
  s.bytes = 0;
  return s;
}

std::shared_ptr<Estimator> MakeEstimator(OpCostTable table) {
  table.set_device("cpu");
  auto e = Estimator::Create(SimpleDevice(), std::move(table));
  EXPECT_TRUE(e.ok()) << e.status().message();
  return *e;
}

TEST(Estimator, PricesAnExactHitWithItsMeanWhenMeasured) {
  OpCostTable t;
  OpCostEntry e = Point("trans_x=0", 1e6, 2e-3);
  e.set_mean(2.5e-3);
  t.Add(e);
  auto est = MakeEstimator(t);
  OpSignature q = Query(1e6);
  q.key = e.key();
  EXPECT_DOUBLE_EQ(est->OpTime(q).seconds, 2.5e-3);
}

TEST(Estimator, PricesAnExactHitWithItsCpuTimeWhenMeasured) {
  // The wall time holds other users' turns on the core; the CPU time is the op's work.
  OpCostTable t;
  OpCostEntry e = Point("trans_x=0", 1e6, 2e-3);
  e.set_mean(2.5e-3);
  e.set_cpu(1.5e-3);
  t.Add(e);
  auto est = MakeEstimator(t);
  OpSignature q = Query(1e6);
  q.key = e.key();
  EXPECT_DOUBLE_EQ(est->OpTime(q).seconds, 1.5e-3);
}

TEST(Estimator, ExactHitComesFromTheTable) {
  OpCostTable t;
  t.Add(Point("trans_x=0", 1e6, 2e-3));
  auto est = MakeEstimator(t);
  OpSignature q = Query(1e6);
  q.key = t.proto().entries(0).key();
  Estimate e = est->OpTime(q);
  EXPECT_EQ(e.path, EstimatePath::kTable);
  EXPECT_DOUBLE_EQ(e.seconds, 2e-3);
}

TEST(Estimator, PricesAPlanWithItsSchedulesOwnEntries) {
  OpCostTable t;
  OpCostEntry pooled = Point("trans_x=0", 1e6, 2e-3);
  OpCostEntry fthenb = pooled;
  fthenb.set_median(3e-3);
  fthenb.set_schedule("fthenb");
  t.Add(pooled);
  t.Add(fthenb);
  OpSignature q = Query(1e6);
  q.key = pooled.key();
  // With one schedule's runs the default entries are that schedule's: nothing to swap.
  t.mutable_proto().add_in_run_schedules("fthenb");
  auto one = MakeEstimator(t);
  EXPECT_EQ(Estimator::ForSchedule(one, "fthenb"), one);

  t.mutable_proto().add_in_run_schedules("1f1b");
  auto est = MakeEstimator(t);
  EXPECT_DOUBLE_EQ(est->OpTime(q).seconds, 2e-3);
  EXPECT_DOUBLE_EQ(Estimator::ForSchedule(est, "fthenb")->OpTime(q).seconds, 3e-3);
  EXPECT_DOUBLE_EQ(Estimator::ForSchedule(est, "1f1b")->OpTime(q).seconds, 2e-3);
  EXPECT_EQ(Estimator::ForSchedule(est, "zb-h1"), est);  // not profiled: the default
}

TEST(Estimator, InterpolatesBetweenPointsOfTheOpType) {
  OpCostTable t;
  t.Add(Point("trans_x=0", 1e6, 2e-3));
  t.Add(Point("trans_x=0", 4e6, 8e-3));
  auto est = MakeEstimator(t);
  Estimate mid = est->OpTime(Query(2e6));
  EXPECT_EQ(mid.path, EstimatePath::kInterpolated);
  EXPECT_NEAR(mid.seconds, 4e-3, 1e-12);                       // time proportional to work: exact
  EXPECT_NEAR(est->OpTime(Query(8e6)).seconds, 16e-3, 1e-12);  // beyond: along the slope
  EXPECT_NEAR(est->OpTime(Query(5e5)).seconds, 1e-3, 1e-12);   // below
}

TEST(Estimator, InterpolatesInLogLogWithClampedExtrapolation) {
  OpCostTable t;
  t.Add(Point("trans_x=0", 1e6, 1e-3));
  t.Add(Point("trans_x=0", 1e8, 1e-2));  // time grows as work^0.5
  auto est = MakeEstimator(t);
  EXPECT_NEAR(est->OpTime(Query(1e7)).seconds, std::sqrt(1e-3 * 1e-2), 1e-12);
  // A fixed overhead: a flat segment extrapolates flat, never below the measurements.
  OpCostTable flat;
  flat.Add(Point("trans_x=0", 1e3, 5e-6));
  flat.Add(Point("trans_x=0", 1e4, 5e-6));
  EXPECT_NEAR(MakeEstimator(flat)->OpTime(Query(10)).seconds, 5e-6, 1e-15);
}

TEST(Estimator, ExtrapolatesAtMostFourTimesPastTheLargestPoint) {
  OpCostTable t;
  t.Add(Point("trans_x=0", 1e6, 4e-3));  // 4x slower than the roofline (1 GFLOP/s)
  t.Add(Point("trans_x=0", 2e6, 8e-3));
  auto est = MakeEstimator(t);
  Estimate near = est->OpTime(Query(8e6));  // 4x the largest point: along the slope
  EXPECT_EQ(near.path, EstimatePath::kInterpolated);
  EXPECT_NEAR(near.seconds, 32e-3, 1e-12);
  Estimate far = est->OpTime(Query(1e7));  // beyond: the roofline's
  EXPECT_EQ(far.path, EstimatePath::kRoofline);
  EXPECT_NEAR(far.seconds, 1e-2, 1e-12);
}

TEST(Estimator, PrefersPointsWithTheSameAttributes) {
  OpCostTable t;
  t.Add(Point("trans_x=0", 1e6, 1e-3));
  t.Add(Point("trans_x=0", 4e6, 4e-3));
  t.Add(Point("trans_x=1", 1e6, 3e-3));
  t.Add(Point("trans_x=1", 4e6, 12e-3));
  auto est = MakeEstimator(t);
  EXPECT_NEAR(est->OpTime(Query(2e6, "trans_x=1")).seconds, 6e-3, 1e-12);
  EXPECT_NEAR(est->OpTime(Query(2e6, "trans_x=0")).seconds, 2e-3, 1e-12);
}

TEST(Estimator, FallsBackToTheRooflineWithoutPoints) {
  auto est = MakeEstimator(OpCostTable());
  OpSignature q = Query(3e6);
  q.bytes = 1e6;
  Estimate e = est->OpTime(q);
  EXPECT_EQ(e.path, EstimatePath::kRoofline);
  EXPECT_NEAR(e.seconds, 3e-3, 1e-12);  // compute-bound: 3e6 / 1e9
  q.bytes = 5e6;
  q.key += "b";
  EXPECT_NEAR(est->OpTime(q).seconds, 5e-3, 1e-12);  // memory-bound
  // Another op type's points do not count.
  q.op_type = "gelu";
  q.key += "g";
  OpCostTable t;
  t.Add(Point("", 1e6, 1.0));
  EXPECT_EQ(MakeEstimator(t)->OpTime(q).path, EstimatePath::kRoofline);
}

TEST(Estimator, BuiltinGpuRooflineUsesDataSheetPeaks) {
  auto est = Estimator::Create(*BuiltinDeviceSpec("h100"), OpCostTable());
  ASSERT_TRUE(est.ok());
  OpSignature q = Query(67e12 * 0.7);  // one second of f32 at 70 % of peak
  q.dtype = DataType::kFloat32;
  EXPECT_NEAR((*est)->OpTime(q).seconds, 1.0, 1e-9);
  q.dtype = DataType::kBFloat16;
  q.key += "bf16";
  EXPECT_NEAR((*est)->OpTime(q).seconds, 67.0 / 989.4, 1e-9);
}

// Points are placed by their work against their own dtype's peak: on a device whose bf16
// peak is 4x its f32 peak, a bf16 query between two f32 points lands where its work says,
// and bf16 points, once there are two, price bf16 queries by themselves.
TEST(Estimator, InterpolatesEachDtypeAgainstItsOwnPeak) {
  DeviceSpec d = SimpleDevice();
  auto* bf16 = d.add_peak_flops();
  bf16->set_dtype("bf16");
  bf16->set_flops_per_s(4e9);
  auto point = [](const char* dtype, double flops, double seconds) {
    OpCostEntry e = Point("", flops, seconds);
    e.set_key(StrCat("matmul(X:", dtype, "[", flops, "])"));
    e.set_dtype(dtype);
    return e;
  };
  OpCostTable t;
  t.set_device("cpu");
  t.Add(point("f32", 1e6, 1e-3));
  t.Add(point("f32", 4e6, 4e-3));
  auto est = *Estimator::Create(d, t);
  OpSignature q = Query(8e6, "");
  q.dtype = DataType::kBFloat16;  // work 8e6 / 4e9 = 2e-3: between the f32 points
  EXPECT_NEAR(est->OpTime(q).seconds, 2e-3, 1e-12);
  t.Add(point("bf16", 4e6, 5e-3));
  t.Add(point("bf16", 16e6, 20e-3));
  est = *Estimator::Create(d, t);
  q.key += "2";
  EXPECT_NEAR(est->OpTime(q).seconds, 10e-3, 1e-12);  // between the bf16 points only
}

// The H100's roofline prices a bf16 GEMM at the 989 TFLOP/s dense peak, and moves half
// the bytes of the f32 one.
TEST(Estimator, H100PricesBf16AtItsTensorCorePeak) {
  auto est = *Estimator::Create(*BuiltinDeviceSpec("h100"), OpCostTable());
  EXPECT_DOUBLE_EQ(PeakFlops(est->device(), DataType::kBFloat16), 989.4e12);
  EXPECT_DOUBLE_EQ(PeakFlops(est->device(), DataType::kFloat16), 989.4e12);
  OpSignature q = Query(2.0 * 4096 * 4096 * 2048);  // one GEMM of a 6.7B layer
  q.dtype = DataType::kBFloat16;
  q.bytes = 2.0 * (4096 * 4096 + 2 * 4096 * 2048);
  EXPECT_NEAR(est->OpTime(q).seconds, q.flops / (989.4e12 * 0.7), 1e-12);
}

TEST(Estimator, RefusesATableOfAnotherDevice) {
  OpCostTable t;
  t.set_device("cpu");
  t.Add(Point("", 1e6, 1e-3));
  auto est = Estimator::Create(*BuiltinDeviceSpec("h100"), t);
  ASSERT_FALSE(est.ok());
  EXPECT_NE(est.status().message().find("measured on device 'cpu'"), std::string::npos)
      << est.status().message();
  t.set_device("h100");  // an alias of h100-sxm is the same device
  EXPECT_TRUE(Estimator::Create(*BuiltinDeviceSpec("h100-sxm"), t).ok());
}

TEST(DeviceSpec, ThreadRateSharesTheCores) {
  DeviceSpec d = SimpleDevice();
  d.set_cores_per_node(2);
  EXPECT_DOUBLE_EQ(ThreadRate(d, 1), 1.0);  // a machine of our own
  EXPECT_DOUBLE_EQ(ThreadRate(d, 3), 2.0 / 3);
  d.add_thread_rate(0.9);  // measured beside other users' threads
  d.add_thread_rate(0.6);
  EXPECT_DOUBLE_EQ(ThreadRate(d, 1), 0.9);
  EXPECT_DOUBLE_EQ(ThreadRate(d, 1.5), 0.75);
  EXPECT_DOUBLE_EQ(ThreadRate(d, 2), 0.6);
  EXPECT_DOUBLE_EQ(ThreadRate(d, 4), 0.3);  // four threads share what two got
  d.set_cores_per_node(0);
  EXPECT_DOUBLE_EQ(ThreadRate(d, 4), 1.0);  // GPUs: every rank its own device
  d.set_cores_per_node(2);
  d.add_thread_rate(1.5);
  EXPECT_FALSE(ValidateDeviceSpec(d).ok());
}

TEST(CacheState, ParsesAndPicksByParameterBytes) {
  EXPECT_EQ(*ParseCacheState("dram"), CacheState::kDram);
  EXPECT_FALSE(ParseCacheState("l4").ok());
  CacheSizes sizes;
  sizes.l3 = 32 << 20;
  EXPECT_EQ(CacheStateFor(4 << 20, sizes), CacheState::kL3);
  EXPECT_EQ(CacheStateFor(32 << 20, sizes), CacheState::kL3);
  EXPECT_EQ(CacheStateFor(100 << 20, sizes), CacheState::kDram);
}

TEST(DeviceSpec, ValidationNamesTheBadField) {
  DeviceSpec d = SimpleDevice();
  d.set_memory_bandwidth(-5);
  Status s = ValidateDeviceSpec(d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("memory_bandwidth"), std::string::npos) << s.message();
  // The held-core figures (a hand-edited spec file can carry any number).
  auto refused = [](const DeviceSpec& bad, const std::string& field) {
    Status st = ValidateDeviceSpec(bad);
    return !st.ok() && st.message().find(field + " must be >= 0") != std::string::npos;
  };
  d = SimpleDevice();
  d.set_held_spin_latency(-1e-3);
  EXPECT_TRUE(refused(d, "held_spin_latency"));
  d = SimpleDevice();
  d.set_held_wake_factor(-1);
  EXPECT_TRUE(refused(d, "held_wake_factor"));
  d = SimpleDevice();
  d.set_transfer_cpu(-1e-6);
  EXPECT_TRUE(refused(d, "transfer_cpu"));

  for (double share : {-0.1, 1.5, std::nan("")}) {
    d = SimpleDevice();
    d.set_turn_straggle(share);
    Status st = ValidateDeviceSpec(d);
    EXPECT_FALSE(st.ok()) << share;
    EXPECT_NE(st.message().find("turn_straggle must be in [0, 1]"), std::string::npos);
    d = SimpleDevice();
    d.set_spin_cpu_share(share);
    st = ValidateDeviceSpec(d);
    EXPECT_FALSE(st.ok()) << share;
    EXPECT_NE(st.message().find("spin_cpu_share must be in [0, 1]"), std::string::npos);
  }
  d = SimpleDevice();
  d.clear_peak_flops();
  EXPECT_FALSE(ValidateDeviceSpec(d).ok());
  EXPECT_FALSE(ResolveDeviceSpec("tpu").ok());
  for (const std::string& name : BuiltinDeviceNames())
    EXPECT_TRUE(ValidateDeviceSpec(*BuiltinDeviceSpec(name)).ok()) << name;
}

}  // namespace
}  // namespace pw::cost
