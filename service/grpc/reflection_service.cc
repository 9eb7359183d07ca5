#include "service/grpc/reflection_service.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/reflection/v1alpha/reflection.pb.h"
#include "service/grpc/message_bytes.h"

namespace infergate {
namespace {

namespace reflection = grpc::reflection::v1alpha;
using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;

constexpr absl::string_view kService = "grpc.reflection.v1alpha.ServerReflection";

// `file` and every file it imports, each once, dependencies first.
void AddWithDependencies(const FileDescriptor* file, std::set<std::string>& seen,
                         reflection::FileDescriptorResponse* out) {
  if (file == nullptr || !seen.insert(file->name()).second) return;
  for (int i = 0; i < file->dependency_count(); ++i) AddWithDependencies(file->dependency(i), seen, out);
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  proto.SerializeToString(out->add_file_descriptor_proto());
}

void NotFound(reflection::ServerReflectionResponse* response, const std::string& what) {
  reflection::ErrorResponse* error = response->mutable_error_response();
  error->set_error_code(static_cast<int>(grpc::StatusCode::NOT_FOUND));
  error->set_error_message(what);
}

}  // namespace

void ReflectionService::Register(GrpcMethods& methods) {
  GrpcMethod info;
  info.shape = GrpcMethod::Shape::kBidi;
  info.request_type = reflection::ServerReflectionRequest::descriptor();
  info.serve = [this](GrpcServerCall& call) { Answer(call); };
  methods.Add(kService, "ServerReflectionInfo", std::move(info));
}

void ReflectionService::Answer(GrpcServerCall& call) const {
  reflection::ServerReflectionRequest request;
  if (absl::Status parsed = ParseRequestBytes(call.request(), &request); !parsed.ok()) return call.Finish(parsed);
  reflection::ServerReflectionResponse response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  std::set<std::string> seen;
  switch (request.message_request_case()) {
    case reflection::ServerReflectionRequest::kListServices: {
      reflection::ListServiceResponse* list = response.mutable_list_services_response();
      for (const std::string& service : methods_.Services()) list->add_service()->set_name(service);
      break;
    }
    case reflection::ServerReflectionRequest::kFileByFilename: {
      const FileDescriptor* file = pool->FindFileByName(request.file_by_filename());
      if (file == nullptr) {
        NotFound(&response, absl::StrCat("file not found: ", request.file_by_filename().substr(0, 256)));
      } else {
        AddWithDependencies(file, seen, response.mutable_file_descriptor_response());
      }
      break;
    }
    case reflection::ServerReflectionRequest::kFileContainingSymbol: {
      const FileDescriptor* file = pool->FindFileContainingSymbol(request.file_containing_symbol());
      if (file == nullptr) {
        NotFound(&response, absl::StrCat("symbol not found: ", request.file_containing_symbol().substr(0, 256)));
      } else {
        AddWithDependencies(file, seen, response.mutable_file_descriptor_response());
      }
      break;
    }
    case reflection::ServerReflectionRequest::kFileContainingExtension: {
      const reflection::ExtensionRequest& ext = request.file_containing_extension();
      const google::protobuf::Descriptor* type = pool->FindMessageTypeByName(ext.containing_type());
      const google::protobuf::FieldDescriptor* field =
          type != nullptr ? pool->FindExtensionByNumber(type, ext.extension_number()) : nullptr;
      if (field == nullptr) {
        NotFound(&response, "extension not found");
      } else {
        AddWithDependencies(field->file(), seen, response.mutable_file_descriptor_response());
      }
      break;
    }
    case reflection::ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const google::protobuf::Descriptor* type = pool->FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr) {
        NotFound(&response, absl::StrCat("type not found: ", request.all_extension_numbers_of_type().substr(0, 256)));
        break;
      }
      std::vector<const google::protobuf::FieldDescriptor*> extensions;
      pool->FindAllExtensions(type, &extensions);
      reflection::ExtensionNumberResponse* numbers = response.mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const auto* e : extensions) numbers->add_extension_number(e->number());
      break;
    }
    default:
      response.mutable_error_response()->set_error_code(static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
      response.mutable_error_response()->set_error_message("the request names no reflection query");
      break;
  }
  call.Write(response);
}

}  // namespace infergate
