#include "ir/proto_io.h"

#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <algorithm>

#include "ir/file_util.h"
#include "ir/limits.h"
#include "ir/tensor_size.h"

namespace pw {

namespace pb = ::pipeweave::proto;

StatusOr<ModuleFormat> FormatFromPath(const std::string& path) {
  std::string ext = FileExtension(path);
  if (ext == ".pbtxt" || ext == ".txtpb" || ext == ".textproto") return ModuleFormat::kText;
  if (ext == ".pb" || ext == ".bin") return ModuleFormat::kBinary;
  return InvalidArgument("cannot tell the format of '", path,
                         "' from its extension: use .pbtxt (text) or .pb (binary)");
}

// ----------------------------------------------------------------------------------------
// In-memory IR -> proto

namespace {

void AttrToProto(const std::string& name, const Attribute& value, pb::Attr* out) {
  out->set_name(name);
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          out->set_i(v);
        } else if constexpr (std::is_same_v<T, double>) {
          out->set_f(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          out->set_b(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          out->set_s(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          out->mutable_ints()->mutable_values()->Add(v.begin(), v.end());
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          out->mutable_floats()->mutable_values()->Add(v.begin(), v.end());
        } else {
          for (const std::string& s : v) out->mutable_strings()->add_values(s);
        }
      },
      value);
}

void AttrsToProto(const AttrList& attrs, google::protobuf::RepeatedPtrField<pb::Attr>* out) {
  for (const auto& [name, value] : attrs.items()) AttrToProto(name, value, out->Add());
}

void InitToProto(const Initializer& init, pb::Initializer* out) {
  out->set_kind(static_cast<pb::Initializer::Kind>(init.kind));
  out->set_value(init.value);
  out->set_mean(init.mean);
  out->set_std(init.std);
  out->set_low(init.low);
  out->set_high(init.high);
  out->set_seed(init.seed);
  out->set_key(init.key);
  out->mutable_full_shape()->Add(init.full_shape.begin(), init.full_shape.end());
  out->set_shard_axis(init.shard_axis);
  out->set_shard_index(init.shard_index);
  out->set_num_shards(init.num_shards);
}

void VarToProto(const Var& var, pb::VarDesc* out) {
  out->set_name(var.name);
  out->set_dtype(static_cast<pb::DataType>(var.dtype));
  out->mutable_shape()->Add(var.shape.begin(), var.shape.end());
  out->set_persistable(var.persistable);
  out->set_is_parameter(var.is_parameter);
  if (var.init.kind != Initializer::Kind::kNone) InitToProto(var.init, out->mutable_init());
  out->set_stage(var.stage);
}

void SlotsToProto(const std::vector<Slot>& slots,
                  google::protobuf::RepeatedPtrField<pb::Slot>* out) {
  for (const Slot& slot : slots) {
    pb::Slot* s = out->Add();
    s->set_name(slot.name);
    for (const std::string& v : slot.vars) s->add_vars(v);
  }
}

void OpToProto(const Op& op, pb::OpDesc* out) {
  out->set_type(op.type);
  SlotsToProto(op.inputs, out->mutable_inputs());
  SlotsToProto(op.outputs, out->mutable_outputs());
  AttrsToProto(op.attrs, out->mutable_attrs());
  out->set_role(static_cast<pb::OpRole>(op.role));
  out->set_stage(op.stage);
  out->set_chunk(op.chunk);
  out->set_stream(op.stream);
  for (const std::string& e : op.wait_events) out->add_wait_events(e);
  for (const std::string& e : op.record_events) out->add_record_events(e);
  out->set_weight_grad(op.weight_grad);
  out->set_origin(op.origin);
}

void StringsToProto(const std::vector<std::string>& in,
                    google::protobuf::RepeatedPtrField<std::string>* out) {
  for (const std::string& s : in) out->Add(std::string(s));
}

void ProgramToProto(const Program& program, pb::ProgramDesc* out) {
  out->set_name(program.name());
  for (const Var& v : program.vars()) VarToProto(v, out->add_vars());
  for (const Op& op : program.ops()) OpToProto(op, out->add_ops());
  const ProgramInfo& info = program.info();
  if (info == ProgramInfo{}) return;
  pb::ProgramInfo* pi = out->mutable_info();
  pi->set_kind(info.kind);
  pi->set_stage(info.stage);
  pi->set_chunk(info.chunk);
  StringsToProto(info.inputs, pi->mutable_inputs());
  StringsToProto(info.outputs, pi->mutable_outputs());
  StringsToProto(info.keep_alive, pi->mutable_keep_alive());
  pi->set_segment_of(info.segment_of);
  pi->set_segment_begin(info.segment_begin);
  pi->set_variant_of(info.variant_of);
}

void JobToProto(const Job& job, pb::JobDesc* out) {
  out->set_kind(static_cast<pb::JobDesc::Kind>(job.kind));
  out->set_stage(job.stage);
  out->set_micro_batch(job.micro_batch);
  out->set_program(job.program);
  out->set_peer(job.peer);
  out->set_peer_stage(job.peer_stage);
  for (const Job& sub : job.sub_jobs) JobToProto(sub, out->add_sub_jobs());
  for (const std::string& e : job.wait_events) out->add_wait_events(e);
  for (const std::string& e : job.record_events) out->add_record_events(e);
}

}  // namespace

pb::ModuleDesc ModuleToProto(const Module& module) {
  pb::ModuleDesc desc;
  desc.set_name(module.name);
  for (const Program& p : module.programs()) ProgramToProto(p, desc.add_programs());
  pb::MeshDesc* mesh = desc.mutable_mesh();
  mesh->set_dp(module.mesh.dp);
  mesh->set_pp(module.mesh.pp);
  mesh->set_mp(module.mesh.mp);
  mesh->set_vpp(module.mesh.vpp);
  if (!module.plan.empty() || !module.plan.schedule.empty()) {
    pb::PlanDesc* plan = desc.mutable_plan();
    plan->set_schedule(module.plan.schedule);
    plan->set_num_micro_batches(module.plan.num_micro_batches);
    plan->set_num_stages(module.plan.num_stages);
    plan->mutable_stage_to_rank()->Add(module.plan.stage_to_rank.begin(),
                                       module.plan.stage_to_rank.end());
    for (const RankPlan& rp : module.plan.ranks) {
      pb::RankPlan* r = plan->add_ranks();
      r->set_rank(rp.rank);
      for (const Job& job : rp.jobs) JobToProto(job, r->add_jobs());
    }
  }
  AttrsToProto(module.metadata, desc.mutable_metadata());
  return desc;
}

// ----------------------------------------------------------------------------------------
// proto -> in-memory IR, validating what the schema cannot express

namespace {

StatusOr<Attribute> AttrFromProto(const pb::Attr& a) {
  switch (a.value_case()) {
    case pb::Attr::kI:
      return Attribute(a.i());
    case pb::Attr::kF:
      return Attribute(a.f());
    case pb::Attr::kB:
      return Attribute(a.b());
    case pb::Attr::kS:
      return Attribute(a.s());
    case pb::Attr::kInts:
      return Attribute(std::vector<int64_t>(a.ints().values().begin(), a.ints().values().end()));
    case pb::Attr::kFloats:
      return Attribute(std::vector<double>(a.floats().values().begin(), a.floats().values().end()));
    case pb::Attr::kStrings:
      return Attribute(
          std::vector<std::string>(a.strings().values().begin(), a.strings().values().end()));
    case pb::Attr::VALUE_NOT_SET:
      break;
  }
  return InvalidArgument("attribute '", a.name(), "' has no value");
}

StatusOr<AttrList> AttrsFromProto(const google::protobuf::RepeatedPtrField<pb::Attr>& attrs) {
  AttrList list;
  for (const pb::Attr& a : attrs) {
    if (a.name().empty()) return InvalidArgument("attribute with an empty name");
    if (list.Has(a.name())) return InvalidArgument("attribute '", a.name(), "' given twice");
    PW_ASSIGN_OR_RETURN(Attribute value, AttrFromProto(a));
    list.Set(a.name(), std::move(value));
  }
  return list;
}

StatusOr<Var> VarFromProto(const pb::VarDesc& desc) {
  Var v;
  v.name = desc.name();
  if (v.name.empty()) return InvalidArgument("var with an empty name");
  if (desc.dtype() == pb::DT_INVALID) return InvalidArgument("var '", v.name, "' has no dtype");
  if (!pb::DataType_IsValid(desc.dtype()))
    return InvalidArgument("var '", v.name, "' has unknown dtype ", static_cast<int>(desc.dtype()));
  v.dtype = static_cast<DataType>(desc.dtype());
  for (int64_t d : desc.shape()) {
    if (d < 0) return InvalidArgument("var '", v.name, "' has a negative dimension ", d);
    if (v.shape.size() == static_cast<size_t>(kMaxRank)) break;  // TensorFits refuses it
    v.shape.push_back(d);
  }
  if (desc.shape_size() > kMaxRank || !TensorFits(v.dtype, v.shape))
    return InvalidArgument("var '", v.name, "' is too large: ", desc.shape_size(),
                           " dimensions, shape ", ShapeToString(v.shape), " (", TensorLimitText(),
                           ")");
  v.persistable = desc.persistable();
  v.is_parameter = desc.is_parameter();
  v.stage = desc.stage();
  if (desc.has_init()) {
    const pb::Initializer& in = desc.init();
    Initializer& init = v.init;
    init.kind = static_cast<Initializer::Kind>(in.kind());
    init.value = in.value();
    init.mean = in.mean();
    init.std = in.std();
    init.low = in.low();
    init.high = in.high();
    init.seed = in.seed();
    init.key = in.key();
    init.full_shape.assign(in.full_shape().begin(), in.full_shape().end());
    init.shard_axis = in.shard_axis();
    init.shard_index = in.shard_index();
    init.num_shards = in.num_shards();
    if (!init.full_shape.empty()) {
      if (init.num_shards < 1 || init.shard_index < 0 || init.shard_index >= init.num_shards ||
          init.shard_axis < 0 || init.shard_axis >= static_cast<int>(init.full_shape.size()))
        return InvalidArgument("var '", v.name, "' has an invalid shard spec");
    }
  }
  return v;
}

std::vector<Slot> SlotsFromProto(const google::protobuf::RepeatedPtrField<pb::Slot>& slots) {
  std::vector<Slot> out;
  out.reserve(slots.size());
  for (const pb::Slot& s : slots) out.push_back(Slot{s.name(), {s.vars().begin(), s.vars().end()}});
  return out;
}

StatusOr<Op> OpFromProto(const pb::OpDesc& desc) {
  Op op;
  op.type = desc.type();
  if (op.type.empty()) return InvalidArgument("op with an empty type");
  op.inputs = SlotsFromProto(desc.inputs());
  op.outputs = SlotsFromProto(desc.outputs());
  PW_ASSIGN_OR_RETURN(op.attrs, AttrsFromProto(desc.attrs()));
  op.role = static_cast<OpRole>(desc.role());
  op.stage = desc.stage();
  op.chunk = desc.chunk();
  op.stream = desc.stream();
  op.wait_events.assign(desc.wait_events().begin(), desc.wait_events().end());
  op.record_events.assign(desc.record_events().begin(), desc.record_events().end());
  op.weight_grad = desc.weight_grad();
  op.origin = desc.origin();
  return op;
}

StatusOr<Program> ProgramFromProto(const pb::ProgramDesc& desc) {
  Program program(desc.name());
  program.ReserveVars(desc.vars_size());
  for (const pb::VarDesc& vd : desc.vars()) {
    PW_ASSIGN_OR_RETURN(Var v, VarFromProto(vd));
    std::string name = v.name;
    if (!program.AddVar(std::move(v))) return InvalidArgument("var '", name, "' declared twice");
  }
  program.ops().reserve(desc.ops_size());
  for (int i = 0; i < desc.ops_size(); ++i) {
    auto op = OpFromProto(desc.ops(i));
    if (!op.ok()) return op.status().WithContext(StrCat("op ", i));
    program.AddOp(std::move(op).value());
  }
  if (desc.has_info()) {
    const pb::ProgramInfo& pi = desc.info();
    ProgramInfo& info = program.info();
    info.kind = pi.kind();
    info.stage = pi.stage();
    info.chunk = pi.chunk();
    info.inputs.assign(pi.inputs().begin(), pi.inputs().end());
    info.outputs.assign(pi.outputs().begin(), pi.outputs().end());
    info.keep_alive.assign(pi.keep_alive().begin(), pi.keep_alive().end());
    info.segment_of = pi.segment_of();
    info.segment_begin = pi.segment_begin();
    info.variant_of = pi.variant_of();
  }
  return program;
}

// Degrees of at least 1 whose product is a world size that fits (a wrapped product would
// read as a small world).
Status CheckMeshSize(const pb::MeshDesc& mesh) {
  int64_t world = 1;
  for (int64_t degree : {mesh.dp(), mesh.pp(), mesh.mp(), mesh.vpp()}) {
    if (degree < 0) return InvalidArgument("mesh degrees must be positive");
    if (degree > kMaxWorldSize || (world *= std::max<int64_t>(degree, 1)) > kMaxWorldSize)
      return InvalidArgument("mesh dp=", mesh.dp(), " pp=", mesh.pp(), " mp=", mesh.mp(),
                             " vpp=", mesh.vpp(), " is too large (at most ", kMaxWorldSize,
                             " ranks and chunks)");
  }
  return OkStatus();
}

StatusOr<Job> JobFromProto(const pb::JobDesc& desc, int depth = 1) {
  if (depth > kMaxJobNesting)
    return InvalidArgument("jobs nested more than ", kMaxJobNesting, " deep");
  Job job;
  if (desc.kind() == pb::JobDesc::UNKNOWN) return InvalidArgument("job without a kind");
  job.kind = static_cast<JobKind>(desc.kind());
  job.stage = desc.stage();
  job.micro_batch = desc.micro_batch();
  job.program = desc.program();
  job.peer = desc.peer();
  job.peer_stage = desc.peer_stage();
  for (const pb::JobDesc& sub : desc.sub_jobs()) {
    PW_ASSIGN_OR_RETURN(Job s, JobFromProto(sub, depth + 1));
    job.sub_jobs.push_back(std::move(s));
  }
  job.wait_events.assign(desc.wait_events().begin(), desc.wait_events().end());
  job.record_events.assign(desc.record_events().begin(), desc.record_events().end());
  return job;
}

}  // namespace

StatusOr<Module> ModuleFromProto(const pb::ModuleDesc& desc) {
  Module module;
  module.name = desc.name();
  for (const pb::ProgramDesc& pd : desc.programs()) {
    auto program = ProgramFromProto(pd);
    if (!program.ok()) return program.status().WithContext(StrCat("program '", pd.name(), "'"));
    if (module.FindProgram(pd.name()))
      return InvalidArgument("program '", pd.name(), "' defined twice");
    module.AddProgram(std::move(program).value());
  }
  PW_RETURN_IF_ERROR(CheckModuleBytes(module));
  const pb::MeshDesc& mesh = desc.mesh();
  module.mesh.dp = mesh.dp() ? mesh.dp() : 1;
  module.mesh.pp = mesh.pp() ? mesh.pp() : 1;
  module.mesh.mp = mesh.mp() ? mesh.mp() : 1;
  module.mesh.vpp = mesh.vpp() ? mesh.vpp() : 1;
  PW_RETURN_IF_ERROR(CheckMeshSize(mesh));
  if (desc.has_plan()) {
    const pb::PlanDesc& pd = desc.plan();
    Plan& plan = module.plan;
    plan.schedule = pd.schedule();
    plan.num_micro_batches = pd.num_micro_batches();
    plan.num_stages = pd.num_stages();
    if (plan.num_micro_batches < 0 || plan.num_micro_batches > kMaxMicroBatches)
      return InvalidArgument("plan has ", plan.num_micro_batches, " micro-batches (at most ",
                             kMaxMicroBatches, ")");
    plan.stage_to_rank.assign(pd.stage_to_rank().begin(), pd.stage_to_rank().end());
    for (const pb::RankPlan& rp : pd.ranks()) {
      RankPlan r;
      r.rank = rp.rank();
      r.jobs.reserve(rp.jobs_size());
      for (int i = 0; i < rp.jobs_size(); ++i) {
        auto job = JobFromProto(rp.jobs(i));
        if (!job.ok())
          return job.status().WithContext(StrCat("plan of rank ", rp.rank(), ", job ", i));
        r.jobs.push_back(std::move(job).value());
      }
      plan.ranks.push_back(std::move(r));
    }
  }
  PW_ASSIGN_OR_RETURN(module.metadata, AttrsFromProto(desc.metadata()));
  return module;
}

// ----------------------------------------------------------------------------------------
// Bytes <-> module

namespace {

// The binary parser's default depth of nested messages; a module with kMaxJobNesting
// levels of jobs stays well inside it.
constexpr int kMaxMessageNesting = 100;
static_assert(kMaxJobNesting + 8 < kMaxMessageNesting);

int JobDepth(const std::vector<Job>& jobs) {
  int depth = 0;
  for (const Job& job : jobs) depth = std::max(depth, 1 + JobDepth(job.sub_jobs));
  return depth;
}

// Collects the text parser's errors; the first one becomes the Status message.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error.empty()) error = StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
  }
  std::string error;
};

// Binary parsing keeps unknown fields aside; a module with any is rejected. The path to
// the offending message is built only on the way out of an error.
Status CheckNoUnknownFields(const google::protobuf::Message& message) {
  const google::protobuf::Reflection* reflection = message.GetReflection();
  const google::protobuf::UnknownFieldSet& unknown = reflection->GetUnknownFields(message);
  if (!unknown.empty())
    return InvalidArgument("unknown field number ", unknown.field(0).number(), " in ",
                           message.GetDescriptor()->name());
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const auto* field : fields) {
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      int n = reflection->FieldSize(message, field);
      for (int i = 0; i < n; ++i) {
        Status s = CheckNoUnknownFields(reflection->GetRepeatedMessage(message, field, i));
        if (!s.ok()) return s.WithContext(StrCat(field->name(), "[", i, "]"));
      }
    } else {
      Status s = CheckNoUnknownFields(reflection->GetMessage(message, field));
      if (!s.ok()) return s.WithContext(field->name());
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<Module> ParseModule(const std::string& bytes, ModuleFormat format) {
  // An arena makes the many small messages of a large module cheap to allocate and free.
  google::protobuf::Arena arena;
  pb::ModuleDesc& desc = *google::protobuf::Arena::CreateMessage<pb::ModuleDesc>(&arena);
  if (format == ModuleFormat::kText) {
    google::protobuf::TextFormat::Parser parser;
    parser.SetRecursionLimit(kMaxMessageNesting);  // the binary parser's limit
    FirstErrorCollector errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(bytes, &desc)) {
      return InvalidArgument("malformed module text: ",
                             errors.error.empty() ? "parse failed" : errors.error);
    }
  } else {
    if (!desc.ParseFromString(bytes)) {
      return DataLoss("not a valid binary module (truncated or corrupted)");
    }
    PW_RETURN_IF_ERROR(CheckNoUnknownFields(desc));
  }
  return ModuleFromProto(desc);
}

StatusOr<std::string> SerializeModule(const Module& module, ModuleFormat format) {
  // What the loader refuses is never written.
  for (const RankPlan& rp : module.plan.ranks)
    if (JobDepth(rp.jobs) > kMaxJobNesting)
      return InvalidArgument("plan of rank ", rp.rank, " nests jobs more than ", kMaxJobNesting,
                             " deep");
  pb::ModuleDesc desc = ModuleToProto(module);
  std::string out;
  if (format == ModuleFormat::kText) {
    google::protobuf::TextFormat::Printer printer;
    if (!printer.PrintToString(desc, &out)) return Internal("cannot print the module as text");
  } else {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!desc.SerializeToCodedStream(&coded)) return Internal("cannot serialize the module");
  }
  return out;
}

StatusOr<Module> LoadModule(const std::string& path) {
  PW_ASSIGN_OR_RETURN(ModuleFormat format, FormatFromPath(path));
  PW_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  auto module = ParseModule(bytes, format);
  if (!module.ok()) return module.status().WithContext(path);
  return module;
}

Status SaveModule(const Module& module, const std::string& path) {
  PW_ASSIGN_OR_RETURN(ModuleFormat format, FormatFromPath(path));
  PW_ASSIGN_OR_RETURN(std::string bytes, SerializeModule(module, format));
  return WriteFileAtomically(path, bytes);
}

}  // namespace pw
