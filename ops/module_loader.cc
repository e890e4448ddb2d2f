#include "ops/module_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace pw {
namespace {

std::vector<std::string> CandidatePaths(const std::string& file_name, const char* env_var) {
  if (const char* env = std::getenv(env_var); env != nullptr && *env != '\0') return {env};
  std::vector<std::string> paths;
  std::error_code error;
  const auto program = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    paths.push_back((program.parent_path() / PW_MODULE_DIR_FROM_BIN / file_name).string());
  }
  paths.push_back(std::string(PW_MODULE_DIR_INSTALLED) + "/" + file_name);
  paths.push_back(std::string(PW_MODULE_DIR_BUILT) + "/" + file_name);
  return paths;
}

}  // namespace

StatusOr<const void*> OpenPipeweaveModule(const std::string& file_name, const char* env_var,
                                          const char* entry) {
  std::string errors;
  for (const std::string& path : CandidatePaths(file_name, env_var)) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      errors += errors.empty() ? "" : "; ";
      errors += dlerror();
      continue;
    }
    using Entry = const void* (*)();
    auto function = reinterpret_cast<Entry>(dlsym(handle, entry));
    if (function == nullptr) return Internal("the module ", path, " has no ", entry);
    return function();
  }
  return Unavailable("cannot load pipeweave's module ", file_name, " (", errors, "); reinstall ",
                     "pipeweave, or set ", env_var, " to the module's path");
}

}  // namespace pw
