// Every CUDA kernel against its CPU twin: the same op on the same random inputs, compared
// within a tolerance (the reduction order differs; element-wise work rounds alike). Also
// the device-side checks: what the CPU kernel refuses with an error, the CUDA kernel
// reports with the same message. Table coverage runs anywhere; the rest needs a GPU.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "cuda_test_util.h"
#include "kernel_cases.h"
#include "ops/kernel.h"
#include "ops/kernels/cuda/device_error.h"
#include "ops/kernels/cuda/find_kernel.h"
#include "ops/kernels/cuda/launch.h"
#include "ops/low_precision.h"
#include "ops/registry.h"

namespace pw::testing {
namespace {

TEST(CudaKernelTableTest, EveryOpWithACpuKernelHasACudaKernel) {
  int with_cpu = 0;
  for (const std::string& type : ops::Registry().Types()) {
    if (!FindCpuKernel(type)) continue;
    ++with_cpu;
    EXPECT_NE(FindCudaKernel(type), nullptr) << "op type '" << type << "' has no CUDA kernel";
  }
  EXPECT_GT(with_cpu, 20);
  EXPECT_EQ(FindCudaKernel("no_such_op"), nullptr);
}

TEST(CudaKernelTableTest, CasesCoverEveryCudaKernel) {
  std::set<std::string> covered;
  for (const KernelCase& c : KernelCases()) covered.insert(c.op.type);
  for (const std::string& type : ops::Registry().Types())
    if (FindCudaKernel(type)) EXPECT_TRUE(covered.count(type)) << type << " has no test case";
}

// Runs one kernel on host or device tensors; returns every var after the call (host).
class Runner {
 public:
  explicit Runner(bool device) : device_(device) {}
  ~Runner() {
    if (error_) (void)cudaFree(error_);
    if (blas_) (void)cublasDestroy(blas_);
    if (stream_) (void)cudaStreamDestroy(stream_);
  }

  // `status` gets the kernel's own result; device checks land in device_error().
  std::map<std::string, Tensor> Run(const KernelCase& c, Status* status) {
    std::map<std::string, Tensor> vars;
    for (const auto& [name, t] : c.inputs) vars[name] = device_ ? ToDevice(t) : t.Clone();
    const OpDef* def = ops::Registry().Find(c.op.type);
    EXPECT_NE(def, nullptr);
    std::vector<std::vector<TensorType>> types(c.op.inputs.size());
    for (size_t i = 0; i < c.op.inputs.size(); ++i)
      for (const std::string& v : c.op.inputs[i].vars)
        types[i].push_back(TensorType{c.inputs.at(v).dtype(), c.inputs.at(v).shape()});
    InferContext infer(c.op, types);
    Status inferred = def->infer(infer);
    EXPECT_TRUE(inferred.ok()) << inferred.ToString();
    for (size_t i = 0; i < c.op.outputs.size(); ++i)
      for (size_t j = 0; j < c.op.outputs[i].vars.size(); ++j) {
        const std::string& v = c.op.outputs[i].vars[j];
        if (vars.count(v)) continue;  // in place: the input's tensor
        Tensor zeros(infer.outputs()[i][j].dtype, infer.outputs()[i][j].shape);
        vars[v] = device_ ? ToDevice(zeros) : zeros;
      }
    KernelContext ctx{c.op, {}, {}, nullptr};
    for (const Slot& s : c.op.inputs) {
      ctx.inputs.emplace_back();
      for (const std::string& v : s.vars) ctx.inputs.back().push_back(&vars.at(v));
    }
    for (const Slot& s : c.op.outputs) {
      ctx.outputs.emplace_back();
      for (const std::string& v : s.vars) ctx.outputs.back().push_back(&vars.at(v));
    }
    if (!device_) {
      *status = FindCpuKernel(c.op.type)(ctx);
      return vars;
    }
    EXPECT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    EXPECT_EQ(cublasCreate(&blas_), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&error_), sizeof(*error_)), cudaSuccess);
    EXPECT_EQ(cudaMemset(error_, 0, sizeof(*error_)), cudaSuccess);
    {
      ops::cuda::ScopedLaunch launch({stream_, blas_, nullptr, error_, 0});
      *status = FindCudaKernel(c.op.type)(ctx);
    }
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(&device_error_, error_, sizeof(device_error_), cudaMemcpyDeviceToHost),
              cudaSuccess);
    std::map<std::string, Tensor> host;
    for (const auto& [name, t] : vars) host[name] = ToHost(t);
    return host;
  }

  const ops::cuda::DeviceError& device_error() const { return device_error_; }

 private:
  bool device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  ops::cuda::DeviceError* error_ = nullptr;
  ops::cuda::DeviceError device_error_{};
};

double MaxAbs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(double{t.f32()[i]}));
  return m;
}

class CudaKernelTest : public ::testing::TestWithParam<KernelCase> {};

TEST_P(CudaKernelTest, MatchesTheCpuKernel) {
  PW_REQUIRE_CUDA_DEVICES(1);
  const KernelCase& c = GetParam();
  Status cpu_status, cuda_status;
  std::map<std::string, Tensor> want = Runner(false).Run(c, &cpu_status);
  Runner gpu(true);
  std::map<std::string, Tensor> got = gpu.Run(c, &cuda_status);
  ASSERT_TRUE(cpu_status.ok()) << cpu_status.ToString();
  ASSERT_TRUE(cuda_status.ok()) << cuda_status.ToString();
  EXPECT_EQ(gpu.device_error().code, 0) << ops::cuda::DescribeDeviceError(gpu.device_error());
  for (const Slot& s : c.op.outputs)
    for (const std::string& v : s.vars) {
      ASSERT_EQ(want.at(v).shape(), got.at(v).shape()) << v;
      ASSERT_EQ(want.at(v).dtype(), got.at(v).dtype()) << v;
      if (want.at(v).dtype() == DataType::kInt64) {
        const Tensor& w = want.at(v);
        for (int64_t i = 0; i < w.numel(); ++i)
          ASSERT_EQ(w.i64()[i], got.at(v).i64()[i]) << v << "[" << i << "]";
        continue;
      }
      const Tensor w = ops::ToF32(want.at(v)), g = ops::ToF32(got.at(v));
      double bound = c.tolerance * std::max(1.0, MaxAbs(w));
      for (int64_t i = 0; i < w.numel(); ++i) {
        if (!std::isfinite(w.f32()[i])) {  // an overflow both kernels must report alike
          EXPECT_EQ(std::isnan(g.f32()[i]), std::isnan(w.f32()[i])) << v << "[" << i << "]";
          if (!std::isnan(w.f32()[i])) EXPECT_EQ(g.f32()[i], w.f32()[i]) << v << "[" << i << "]";
          continue;
        }
        ASSERT_NEAR(g.f32()[i], w.f32()[i], bound) << v << "[" << i << "]";
      }
    }
}

// The cases themselves, on the CPU kernels (no GPU needed): every op infers its outputs
// and runs, so a case that rots with an op's definition fails on every machine, not only on
// the rare one with a GPU.
TEST(CudaKernelCasesTest, EveryCaseRunsOnTheCpuKernels) {
  for (const KernelCase& c : KernelCases()) {
    SCOPED_TRACE(c.name);
    Status status;
    Runner(false).Run(c, &status);
    EXPECT_TRUE(status.ok()) << status.ToString();
  }
}

std::string CaseName(const ::testing::TestParamInfo<KernelCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(AllOps, CudaKernelTest, ::testing::ValuesIn(KernelCases()), CaseName);

class CudaKernelCheckTest : public ::testing::TestWithParam<KernelCase> {};

TEST_P(CudaKernelCheckTest, ReportsWhatTheCpuKernelRefuses) {
  PW_REQUIRE_CUDA_DEVICES(1);
  const KernelCase& c = GetParam();
  Status cpu_status, cuda_status;
  (void)Runner(false).Run(c, &cpu_status);
  ASSERT_FALSE(cpu_status.ok());
  Runner gpu(true);
  (void)gpu.Run(c, &cuda_status);
  ASSERT_TRUE(cuda_status.ok()) << cuda_status.ToString();  // found on the device instead
  EXPECT_NE(gpu.device_error().code, 0);
  EXPECT_EQ(ops::cuda::DescribeDeviceError(gpu.device_error()), cpu_status.message());
}

INSTANTIATE_TEST_SUITE_P(BadInputs, CudaKernelCheckTest, ::testing::ValuesIn(BadInputCases()),
                         CaseName);

// overlap-1f1b cuts a matmul's rows into blocks and promises the same bits
// (passes/streams/row_split.h): each output element must be the same dot product summed
// over K in the same order whatever the number of rows. The CPU kernels are held to that
// in tests/passes; here cuBLAS, whose heuristics choose a kernel (and a split of K) by
// shape, on shapes of the GPT-3 6.7B layers (mp 2) scaled down, in f32 and bf16.
TEST(CudaRowBlockTest, RowBlocksOfAMatmulGiveItsRowsBitForBit) {
  PW_REQUIRE_CUDA_DEVICES(1);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  auto random = [&](DataType dtype, Shape shape) {
    Tensor f32(DataType::kFloat32, shape);
    for (int64_t i = 0; i < f32.numel(); ++i) f32.f32()[i] = u(rng);
    Tensor out(dtype, std::move(shape));
    ops::StoreFromF32(f32, out);
    return out;
  };
  // Rows [first, first + count) of a host tensor [1, M, K].
  auto rows = [](const Tensor& t, int64_t first, int64_t count) {
    const int64_t width = t.shape().back(), elem = DataTypeSize(t.dtype());
    Tensor block(t.dtype(), {1, count, width});
    std::memcpy(block.raw(), static_cast<const std::byte*>(t.raw()) + first * width * elem,
                static_cast<size_t>(count * width * elem));
    return block;
  };
  int cases = 0;
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16})
    for (int64_t m : {256, 2048})
      for (auto [k, n] : {std::pair<int64_t, int64_t>{2048, 4096}, {8192, 4096}, {4096, 1024}})
        for (int blocks : {2, 4, 8}) {
          KernelCase whole;
          whole.name = "whole";
          whole.op.type = "matmul";
          whole.op.SetInput("X", {"x"}).SetInput("Y", {"y"}).SetOutput("Out", {"out"});
          whole.inputs["x"] = random(dtype, {1, m, k});
          whole.inputs["y"] = random(dtype, {k, n});
          Status status;
          Tensor full = Runner(true).Run(whole, &status).at("out");
          ASSERT_TRUE(status.ok()) << status.ToString();
          const int64_t r = m / blocks;
          for (int b = 0; b < blocks; ++b) {
            KernelCase block = whole;
            block.inputs["x"] = rows(whole.inputs["x"], b * r, r);
            Tensor got = Runner(true).Run(block, &status).at("out");
            ASSERT_TRUE(status.ok()) << status.ToString();
            Tensor want = rows(full, b * r, r);
            EXPECT_EQ(std::memcmp(want.raw(), got.raw(), static_cast<size_t>(want.nbytes())), 0)
                << DataTypeName(dtype) << " m " << m << " k " << k << " n " << n << ": block " << b
                << " of " << blocks << " differs from its rows of the whole product";
          }
          ++cases;
        }
  EXPECT_EQ(cases, 36);
}

TEST(CudaKernelContextTest, RefusesHostTensorsAndAMissingLaunchContext) {
  KernelCase c = KernelCases().front();
  Status status;
  // Host tensors straight into a CUDA kernel: a clear error, no device fault.
  std::map<std::string, Tensor> vars;
  for (const auto& [name, t] : c.inputs) vars[name] = t;
  Tensor out(DataType::kFloat32, {8, 12});
  KernelContext ctx{c.op, {{&vars.at("x")}, {&vars.at("y")}}, {{&out}}, nullptr};
  status = FindCudaKernel("matmul")(ctx);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), ::testing::HasSubstr("launch context"));
  // With a context (never used: the check comes first), the host tensors are named.
  auto* fake_error = reinterpret_cast<ops::cuda::DeviceError*>(alignof(ops::cuda::DeviceError));
  ops::cuda::ScopedLaunch launch({reinterpret_cast<cudaStream_t>(1),
                                  reinterpret_cast<cublasHandle_t>(1), nullptr, fake_error, 0});
  status = FindCudaKernel("matmul")(ctx);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), ::testing::HasSubstr("X is host memory"));
}

}  // namespace
}  // namespace pw::testing
