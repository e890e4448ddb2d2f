#pragma once
// Reading and writing modules: `.pbtxt` (protobuf text format, human-editable) and `.pb`
// (binary), chosen by the file's extension. Loading rejects unknown fields and
// structurally invalid messages with an error naming the field; it does not run the
// verifier (callers do, with the op registry).

#include <string>

#include "ir/module.h"
#include "ir/status.h"
#include "proto/pipeweave.pb.h"

namespace pw {

enum class ModuleFormat { kText, kBinary };

// ".pbtxt"/".txtpb"/".textproto" -> kText, ".pb"/".bin" -> kBinary; else an error.
StatusOr<ModuleFormat> FormatFromPath(const std::string& path);

::pipeweave::proto::ModuleDesc ModuleToProto(const Module& module);
StatusOr<Module> ModuleFromProto(const ::pipeweave::proto::ModuleDesc& desc);

StatusOr<Module> ParseModule(const std::string& bytes, ModuleFormat format);
StatusOr<std::string> SerializeModule(const Module& module, ModuleFormat format);

StatusOr<Module> LoadModule(const std::string& path);
// Writes atomically: on error the file at `path` is unchanged.
Status SaveModule(const Module& module, const std::string& path);

}  // namespace pw
