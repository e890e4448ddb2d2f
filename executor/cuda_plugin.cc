#include "executor/cuda_plugin.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace pw {

#if PW_HAVE_CUDA
namespace {

// Where the library may be, first match wins: $PW_CUDA_BACKEND_LIBRARY; beside this
// program as installed (BIN/../LIB, wherever the prefix was moved); the configured install
// location; the copy in this build tree.
std::vector<std::string> CandidatePaths() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("PW_CUDA_BACKEND_LIBRARY"); env != nullptr && *env != '\0') {
    paths.push_back(env);
    return paths;
  }
  std::error_code error;
  const auto program = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) paths.push_back((program.parent_path() / PW_CUDA_PLUGIN_FROM_BIN).string());
  paths.push_back(PW_CUDA_PLUGIN_INSTALLED);
  paths.push_back(PW_CUDA_PLUGIN_BUILT);
  return paths;
}

StatusOr<const CudaBackendPlugin*> Open() {
  std::string errors;
  for (const std::string& path : CandidatePaths()) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      errors += errors.empty() ? "" : "; ";
      errors += dlerror();
      continue;
    }
    using Entry = const CudaBackendPlugin* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, "pw_cuda_backend_plugin"));
    if (entry == nullptr) {
      return Internal("the CUDA backend library ", path, " has no pw_cuda_backend_plugin");
    }
    return entry();  // the handle stays open for the life of the process
  }
  return Unavailable("cannot load the CUDA backend library: ", errors);
}

}  // namespace

StatusOr<const CudaBackendPlugin*> LoadCudaBackendPlugin() {
  static std::once_flag once;
  static StatusOr<const CudaBackendPlugin*>* loaded = nullptr;
  std::call_once(once, [] { loaded = new StatusOr<const CudaBackendPlugin*>(Open()); });
  return *loaded;
}

#else

StatusOr<const CudaBackendPlugin*> LoadCudaBackendPlugin() {
  return Unimplemented(
      "this build has no CUDA backend (no CUDA toolkit was found when it was configured)");
}

#endif

}  // namespace pw
