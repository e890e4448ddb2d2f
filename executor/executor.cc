#include "executor/executor.h"

#include <signal.h>

#include <algorithm>

#include "executor/comm/kv_store.h"
#include "executor/training_feed.h"
#include "ir/proto_io.h"
#include "ops/kernel.h"

namespace pw {

struct Executor::Comm {
  std::unique_ptr<KvStore> store;
  std::unique_ptr<CommFactory> factory;
};

Executor::~Executor() {
  interp_.reset();
  backend_.reset();  // streams stop before their communicators go
  comm_.reset();
}

StatusOr<std::unique_ptr<Executor>> Executor::Load(const std::string& path,
                                                   const ExecutorOptions& options) {
  PW_ASSIGN_OR_RETURN(Module module, LoadModule(path));
  auto exec = Create(std::move(module), options);
  if (!exec.ok()) return exec.status().WithContext(path);
  return exec;
}

StatusOr<std::unique_ptr<Executor>> Executor::Create(Module module,
                                                     const ExecutorOptions& options) {
  std::unique_ptr<Executor> exec(new Executor());
  const int world = module.mesh.world_size();
  if (options.rank < 0 || options.rank >= world)
    return InvalidArgument("rank ", options.rank, " is outside the module's world of ", world);
  if (options.blas_threads > 0) ops::SetKernelThreads(options.blas_threads);
  exec->comm_ = std::make_unique<Comm>();
  if (world > 1) {
    // A dead peer must surface as an error, not as SIGPIPE from a Gloo socket write; a
    // handler the framework installed is left alone.
    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL)
      signal(SIGPIPE, SIG_IGN);
    if (options.store.empty())
      return InvalidArgument("a module of ", world, " ranks needs a store (directory or redis://)");
    PW_ASSIGN_OR_RETURN(exec->comm_->store, OpenStore(options.store));
    GlooOptions gloo;
    gloo.hostname = options.hostname;
    PW_ASSIGN_OR_RETURN(exec->comm_->factory, MakeCommFactory(options.backend, *exec->comm_->store,
                                                              module.mesh, options.rank, gloo));
  }
  BackendConfig backend_config;
  backend_config.kind = options.backend;
  backend_config.rank = options.rank;
  backend_config.comm = exec->comm_->factory.get();
  backend_config.device = options.device;
  PW_ASSIGN_OR_RETURN(exec->backend_, MakeBackend(backend_config));

  InterpreterOptions interp_options;
  interp_options.micro_batches = options.micro_batches;
  exec->inputs_ = options.inputs.empty() ? ModuleInputs(module) : options.inputs;
  interp_options.lowering.feeds = exec->inputs_;
  interp_options.lowering.loss = options.loss.empty() ? ModuleLoss(module) : options.loss;
  interp_options.lowering.strict_events = options.strict_events;
  PW_ASSIGN_OR_RETURN(exec->interp_, Interpreter::Create(std::move(module), options.rank,
                                                         *exec->backend_, interp_options));
  PW_RETURN_IF_ERROR(exec->interp_->InitializeParameters());
  exec->checkpoint_.dir = options.checkpoint_dir;
  exec->checkpoint_.keep = options.checkpoint_keep;
  if (options.rank == 0 && !options.checkpoint_dir.empty())
    PW_RETURN_IF_ERROR(RemovePartialCheckpoints(options.checkpoint_dir));
  return exec;
}

int Executor::rank() const { return interp_->rank(); }
int Executor::world_size() const { return interp_->layout().world_size(); }
int Executor::num_micro_batches() const { return interp_->lowered().num_micro_batches; }
bool Executor::computes_loss() const { return interp_->lowered().computes_loss; }

Status Executor::Feed(const std::string& var, int micro_batch, Tensor value) {
  if (micro_batch < 0 || micro_batch >= num_micro_batches())
    return InvalidArgument("micro-batch ", micro_batch, " is outside [0, ", num_micro_batches(),
                           ")");
  if (std::find(inputs_.begin(), inputs_.end(), var) == inputs_.end())
    return InvalidArgument("'", var, "' is not an input of the module");
  fed_[{var, micro_batch}] = std::move(value);
  return OkStatus();
}

Interpreter::FeedFn Executor::FedValues() const {
  return [this](const std::string& var, int mb) -> StatusOr<Tensor> {
    auto it = fed_.find({var, mb});
    if (it == fed_.end())
      return FailedPrecondition("input '", var, "' of micro-batch ", mb, " was not fed");
    return it->second;
  };
}

StatusOr<StepStats> Executor::Step() {
  StatusOr<StepStats> stats = interp_->RunStep(FedValues());
  fed_.clear();
  return stats;
}

StatusOr<double> Executor::WarmUp() { return interp_->WarmUp(FedValues()); }

StatusOr<Tensor> Executor::Fetch(const std::string& name) const {
  return interp_->PersistentCopyOnHost(name);
}

Status Executor::Assign(const std::string& name, const Tensor& value) {
  return interp_->SetPersistent(name, value.Clone());
}

std::vector<std::string> Executor::PersistentNames() const { return interp_->PersistentNames(); }

Status Executor::SyncParameters() { return interp_->SyncParameters(); }

Status Executor::SaveCheckpoint(int64_t step) {
  if (checkpoint_.dir.empty())
    return FailedPrecondition("no checkpoint folder: set ExecutorOptions::checkpoint_dir");
  PW_RETURN_IF_ERROR(interp_->SyncParameters());
  const Module& module = interp_->module();
  CheckpointManifest header =
      RunHeader(module, int64_t{num_micro_batches()} * module.mesh.dp, "fed", 0, "");
  return SaveRank(checkpoint_, header, step, VarsOfRank(*interp_),
                  [this](const std::string& name) { return interp_->PersistentOnHost(name); })
      .status();
}

StatusOr<int64_t> Executor::LoadCheckpoint(const std::string& path) {
  PW_ASSIGN_OR_RETURN(auto reader, CheckpointReader::Open(path));
  const Module& module = interp_->module();
  PW_RETURN_IF_ERROR(CheckSameModel(reader->manifest(), module, reader->manifest_path()));
  CheckpointManifest header =
      RunHeader(module, int64_t{num_micro_batches()} * module.mesh.dp, "fed", 0, "");
  PW_RETURN_IF_ERROR(CheckSameData(*reader, header));
  PW_RETURN_IF_ERROR(
      RestoreRank(*reader, VarsOfRank(*interp_), [this](const std::string& name, Tensor t) {
        return interp_->SetPersistent(name, std::move(t));
      }));
  PW_RETURN_IF_ERROR(interp_->ForgetLastStep());
  return reader->manifest().step();
}

}  // namespace pw
