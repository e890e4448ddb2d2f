#include "cost_model/proto_file.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include "ir/file_util.h"
#include "ir/proto_io.h"

namespace pw::cost {
namespace {

class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error.empty()) error = StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
  }
  std::string error;
};

}  // namespace

Status LoadProtoFile(const std::string& path, const std::string& what,
                     google::protobuf::Message* message) {
  PW_ASSIGN_OR_RETURN(ModuleFormat format, FormatFromPath(path));
  StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status().WithContext(StrCat("reading ", what));
  if (format == ModuleFormat::kText) {
    google::protobuf::TextFormat::Parser parser;
    FirstError errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(*bytes, message))
      return InvalidArgument(path, ": malformed ", what, ": ",
                             errors.error.empty() ? "parse failed" : errors.error);
  } else if (!message->ParseFromString(*bytes) ||
             !message->GetReflection()->GetUnknownFields(*message).empty()) {
    return DataLoss(path, ": not a valid binary ", what,
                    " (truncated, corrupted or another kind of file)");
  }
  return OkStatus();
}

Status SaveProtoFile(const google::protobuf::Message& message, const std::string& path) {
  PW_ASSIGN_OR_RETURN(ModuleFormat format, FormatFromPath(path));
  std::string out;
  if (format == ModuleFormat::kText) {
    if (!google::protobuf::TextFormat::PrintToString(message, &out))
      return Internal("cannot print ", message.GetTypeName(), " as text");
  } else {
    // The streams flush into `out` when they go out of scope.
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!message.SerializeToCodedStream(&coded))
      return Internal("cannot serialize ", message.GetTypeName());
    coded.Trim();
  }
  return WriteFileAtomically(path, out);
}

}  // namespace pw::cost
