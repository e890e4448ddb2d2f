#pragma once
// A dense, contiguous, row-major tensor with shared, 64-byte aligned storage. Copies
// share storage; Clone() copies the data.
//
// Storage is host memory unless a backend made the tensor from its own allocation (a GPU
// backend's device memory): then only that backend's kernels and copies may touch the
// bytes, and host code reads the tensor through the backend (executor/backend.h).

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ir/types.h"

namespace pw {

enum class Device : uint8_t { kHost, kCuda };

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-filled storage.
  Tensor(DataType dtype, Shape shape);
  // Allocates storage, zero-filled or left as it is: the latter for a tensor whose every
  // element is written before any is read (a kernel's output when the kernel fills it:
  // CpuKernelWritesEveryOutput).
  static Tensor Allocated(DataType dtype, Shape shape, bool zeroed);
  // Wraps storage a backend allocated (nothing is filled); `storage`'s deleter frees it.
  Tensor(DataType dtype, Shape shape, std::shared_ptr<std::byte> storage, Device device);

  bool defined() const { return storage_ != nullptr; }
  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i < 0 ? i + shape_.size() : i]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  int64_t nbytes() const { return numel_ * DataTypeSize(dtype_); }
  Device device() const { return device_; }
  bool on_host() const { return device_ == Device::kHost; }

  void* raw() { return storage_.get(); }
  const void* raw() const { return storage_.get(); }
  template <typename T>
  T* data() {
    return static_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(raw());
  }
  float* f32() { return data<float>(); }
  const float* f32() const { return data<float>(); }
  int64_t* i64() { return data<int64_t>(); }
  const int64_t* i64() const { return data<int64_t>(); }

  Tensor Clone() const;  // host tensors only
  // Same storage, another shape with the same number of elements.
  Tensor Reshaped(Shape shape) const;
  // A tensor of `shape` over this one's bytes from `byte_offset` on (a contiguous block,
  // e.g. rows of a split{view}): it keeps the whole storage alive and writes through.
  Tensor View(int64_t byte_offset, Shape shape) const;
  void Fill(float value);  // f32 host tensors only
  // True when both share the same storage.
  bool SharesStorage(const Tensor& other) const { return storage_ == other.storage_; }
  // The allocation itself, for a backend that keeps per-allocation state in its deleter.
  const std::shared_ptr<std::byte>& storage() const { return storage_; }

 private:
  DataType dtype_ = DataType::kInvalid;
  Shape shape_;
  int64_t numel_ = 0;
  Device device_ = Device::kHost;
  std::shared_ptr<std::byte> storage_;
};

}  // namespace pw
