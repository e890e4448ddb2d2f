#pragma once
// Every var reference of a program resolved once to a dense id, so that analyses over
// large programs index vectors instead of hashing names again and again. Declared vars
// keep their position in Program::vars(); undeclared names get ids after them.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/program.h"

namespace pw {

class VarRefs {
 public:
  explicit VarRefs(const Program& program);

  size_t num_ops() const { return input_begin_.size() - 1; }
  size_t num_ids() const { return num_ids_; }
  size_t num_declared() const { return num_declared_; }
  bool declared(int32_t id) const { return static_cast<size_t>(id) < num_declared_; }

  // Ids of op i's input / output vars, in slot order.
  std::span<const int32_t> inputs(size_t op) const {
    return {ids_.data() + input_begin_[op], ids_.data() + output_begin_[op]};
  }
  std::span<const int32_t> outputs(size_t op) const {
    return {ids_.data() + output_begin_[op], ids_.data() + input_begin_[op + 1]};
  }

 private:
  size_t num_declared_ = 0;
  size_t num_ids_ = 0;
  std::vector<int32_t> ids_;
  std::vector<size_t> input_begin_;   // per op, then one past the end
  std::vector<size_t> output_begin_;  // per op
};

}  // namespace pw
