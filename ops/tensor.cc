#include "ops/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace pw {

namespace {
// Sanitizer builds fill uninitialized tensors with NaN, so that a kernel listed as writing
// every output element (CpuKernelWritesEveryOutput) but leaving one unwritten turns
// results NaN in the tests instead of reading stale memory unnoticed.
#ifdef PW_POISON_UNINITIALIZED
constexpr bool kPoisonUninitialized = true;
#else
constexpr bool kPoisonUninitialized = false;
#endif

std::shared_ptr<std::byte> Allocate(int64_t bytes, bool zeroed) {
  size_t size = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  size = (size + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, size);
  if (!p) throw std::bad_alloc();
  if (zeroed) {
    std::memset(p, 0, size);
  } else if (kPoisonUninitialized) {
    std::memset(p, 0xFF, size);  // NaN in every float type: an unwritten element shows
  }
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); });
}
}  // namespace

Tensor::Tensor(DataType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), numel_(NumElements(shape_)) {
  storage_ = Allocate(nbytes(), /*zeroed=*/true);
}

Tensor Tensor::Allocated(DataType dtype, Shape shape, bool zeroed) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = NumElements(t.shape_);
  t.storage_ = Allocate(t.nbytes(), zeroed);
  return t;
}

Tensor::Tensor(DataType dtype, Shape shape, std::shared_ptr<std::byte> storage, Device device)
    : dtype_(dtype),
      shape_(std::move(shape)),
      numel_(NumElements(shape_)),
      device_(device),
      storage_(std::move(storage)) {}

Tensor Tensor::Clone() const {
  if (!defined()) return Tensor();
  Tensor copy(dtype_, shape_);
  std::memcpy(copy.raw(), raw(), nbytes());
  return copy;
}

Tensor Tensor::Reshaped(Shape shape) const {
  Tensor view = *this;
  view.shape_ = std::move(shape);
  return view;
}

Tensor Tensor::View(int64_t byte_offset, Shape shape) const {
  // The aliasing constructor shares the allocation's owner (and a backend's deleter).
  std::shared_ptr<std::byte> bytes(storage_, storage_.get() + byte_offset);
  return Tensor(dtype_, std::move(shape), std::move(bytes), device_);
}

void Tensor::Fill(float value) { std::fill_n(f32(), numel_, value); }

}  // namespace pw
