#pragma once
// Reading and writing any protobuf message of the cost model (device specs, cost tables)
// as text or binary, chosen by the file's extension like modules (ir/proto_io.h).

#include <google/protobuf/message.h>

#include <string>

#include "ir/status.h"

namespace pw::cost {

// `what` names the file's content in errors: "cost table", "device spec".
Status LoadProtoFile(const std::string& path, const std::string& what,
                     google::protobuf::Message* message);
// Atomic: on error the file at `path` is unchanged.
Status SaveProtoFile(const google::protobuf::Message& message, const std::string& path);

}  // namespace pw::cost
