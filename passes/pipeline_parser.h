#pragma once
// Pass pipeline text -> pass instances, and back.
//
//   pipeline := element (',' element)*
//   element  := pass-name ['{' [option (',' option)*] '}']
//   option   := name '=' value | name        (a bare name sets a bool option to true)
//   value    := bare text without , { } = | "quoted" | 'quoted'
//
// Whitespace around names, values and punctuation is ignored. For example
//   append-backward{optimizer=adam,lr=0.1},dce
// Every error is one line naming the column and what is wrong: an empty element, an
// unknown pass (with similar names), an unknown option (with the pass's options), a bad
// value, a missing or unbalanced brace.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/status.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {

using PassList = std::vector<std::unique_ptr<Pass>>;

StatusOr<PassList> ParsePassPipeline(std::string_view text,
                                     const PassRegistry& registry = PassRegistry::Global());

// The text that ParsePassPipeline reads back into the same passes and options.
std::string PrintPassPipeline(const PassList& passes);

}  // namespace pw
