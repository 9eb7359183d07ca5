#include "service/grpc/wire_scan.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// What the allocator takes for `n` bytes (glibc: an 8-byte header, 16-byte
// granules, 32 at least; from 128 KiB on, pages mapped on their own).
constexpr uint64_t HeapBlock(uint64_t n) {
  if (n >= (uint64_t{128} << 10)) return (n + 16 + 4095) & ~uint64_t{4095};
  return std::max<uint64_t>(32, (n + 8 + 15) & ~uint64_t{15});
}

// A string object protobuf allocates (a field's, a repeated element's, an
// unknown field's), and its bytes once they pass the small-string buffer.
constexpr uint64_t StringCost(uint64_t length) {
  return HeapBlock(sizeof(std::string)) + (length > 15 ? HeapBlock(length + 1) : 0);
}
// A repeated field's slot for one element, twice over for the container's
// growth by doubling.
constexpr uint64_t kSlot = 2 * sizeof(void*);
// An unknown field's record (in a vector that grows by doubling).
constexpr uint64_t kUnknownRecord = 2 * 16;

// The heap size of a message object of `type`, from its fields as
// protobuf 3.21 lays them out (no arena): the object's header (vtable,
// metadata, cached size, has-bits), then per field a pointer for a string
// or message, a number's width, a repeated field's container, a map's.
// Cached per thread.
uint64_t ObjectCost(const Descriptor* type) {
  thread_local std::unordered_map<const Descriptor*, uint64_t> sizes;
  auto [it, inserted] = sizes.try_emplace(type, 0);
  if (inserted) {
    uint64_t size = 64;
    for (int i = 0; i < type->field_count(); ++i) {
      const FieldDescriptor* field = type->field(i);
      if (field->is_map()) {
        size += 128;
      } else if (field->is_repeated()) {
        const bool pointers = field->cpp_type() == FieldDescriptor::CPPTYPE_STRING ||
                              field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
        size += pointers ? 24 : 16;
      } else {
        size += 8;
      }
    }
    size += 8 * static_cast<uint64_t>(type->oneof_decl_count());  // each oneof's case
    it->second = HeapBlock(size);
  }
  return it->second;
}

enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// Reads the chunks as one stream of bytes.
class ChunkReader {
 public:
  explicit ChunkReader(absl::Span<const absl::string_view> chunks) : chunks_(chunks) { SkipEmpty(); }

  uint64_t position() const { return position_; }
  bool at_end() const { return chunk_ >= chunks_.size(); }

  bool ReadByte(uint8_t* byte) {
    if (at_end()) return false;
    *byte = static_cast<uint8_t>(chunks_[chunk_][offset_]);
    Advance(1);
    return true;
  }

  // A field's tag, as protobuf reads one: at most five bytes, the value
  // kept to 32 bits.
  bool ReadTag(uint32_t* tag) {
    uint64_t result = 0;
    for (int i = 0; i < 5; ++i) {
      uint8_t byte;
      if (!ReadByte(&byte)) return false;
      result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if ((byte & 0x80) == 0) {
        *tag = static_cast<uint32_t>(result);
        return true;
      }
    }
    return false;
  }

  bool ReadVarint(uint64_t* value) {
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      uint8_t byte;
      if (!ReadByte(&byte)) return false;
      if (shift < 64) result |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *value = result;
        return true;
      }
    }
    return false;  // more than ten bytes
  }

  bool Skip(uint64_t n) {
    while (n > 0) {
      if (at_end()) return false;
      const uint64_t here = std::min<uint64_t>(n, chunks_[chunk_].size() - offset_);
      Advance(here);
      n -= here;
    }
    return true;
  }

  // Counts the varints in the next `n` bytes (a packed field's elements).
  bool CountVarints(uint64_t n, uint64_t* count) {
    uint64_t ends = 0;
    uint8_t byte = 0;
    for (uint64_t i = 0; i < n; ++i) {
      if (!ReadByte(&byte)) return false;
      if ((byte & 0x80) == 0) ++ends;
    }
    if (n > 0 && (byte & 0x80) != 0) return false;  // the last one runs past the field
    *count = ends;
    return true;
  }

 private:
  void Advance(uint64_t n) {
    offset_ += n;
    position_ += n;
    if (offset_ == chunks_[chunk_].size()) {
      ++chunk_;
      offset_ = 0;
      SkipEmpty();
    }
  }
  void SkipEmpty() {
    while (chunk_ < chunks_.size() && chunks_[chunk_].empty()) ++chunk_;
  }

  absl::Span<const absl::string_view> chunks_;
  size_t chunk_ = 0;
  uint64_t offset_ = 0;
  uint64_t position_ = 0;
};

// The width of a fixed-width scalar on the wire, 0 for a varint one.
int FixedWidth(FieldDescriptor::Type type) {
  switch (type) {
    case FieldDescriptor::TYPE_DOUBLE:
    case FieldDescriptor::TYPE_FIXED64:
    case FieldDescriptor::TYPE_SFIXED64: return 8;
    case FieldDescriptor::TYPE_FLOAT:
    case FieldDescriptor::TYPE_FIXED32:
    case FieldDescriptor::TYPE_SFIXED32: return 4;
    default: return 0;
  }
}

// The wire type a field of `type` is written with when not packed.
int NaturalWireType(FieldDescriptor::Type type) {
  switch (type) {
    case FieldDescriptor::TYPE_STRING:
    case FieldDescriptor::TYPE_BYTES:
    case FieldDescriptor::TYPE_MESSAGE: return kLengthDelimited;
    case FieldDescriptor::TYPE_GROUP: return kStartGroup;
    default: {
      const int width = FixedWidth(type);
      return width == 8 ? kFixed64 : width == 4 ? kFixed32 : kVarint;
    }
  }
}

class Scanner {
 public:
  Scanner(const Descriptor& root, ChunkReader& in, const WireScanLimits& limits)
      : root_(root), in_(in), limits_(limits) {}

  absl::StatusOr<WireCost> Run() {
    cost_.parsed_bytes = ObjectCost(&root_);
    if (!Message(&root_, UINT64_MAX, 0, /*group_number=*/0)) return error_;
    return cost_;
  }

 private:
  // One element of the path to the field being read, for messages.
  struct Step {
    const FieldDescriptor* field;
    int64_t index;  // -1 for a singular field
  };

  bool Malformed() {
    error_ = absl::InvalidArgumentError(
        absl::StrCat("request: not a valid ", root_.full_name(), " message (it does not parse)"));
    return false;
  }
  bool Exceeded(const std::string& what) {
    std::string path;
    for (const Step& step : path_) {
      if (!path.empty()) path += ".";
      path += step.field->name();
      if (step.index >= 0) absl::StrAppend(&path, "[", step.index, "]");
    }
    error_ = absl::InvalidArgumentError(absl::StrCat(path.empty() ? "request" : path, ": ", what));
    return false;
  }

  // Scans fields of `type` (null: of a group no type describes, all
  // unknown) until `end` (a length-delimited message) or the end-group tag
  // of `group_number` (a group), or the input's end (the top level).
  bool Message(const Descriptor* type, uint64_t end, int depth, uint32_t group_number) {
    if (depth > limits_.max_depth) {
      return Exceeded(absl::StrCat("nests messages more than ", limits_.max_depth, " deep"));
    }
    std::unordered_map<int, int64_t> repeated_counts;
    while (true) {
      if (group_number == 0) {
        if (end == UINT64_MAX ? in_.at_end() : in_.position() == end) return true;
        if (end != UINT64_MAX && in_.position() > end) return Malformed();
      }
      uint32_t tag;
      if (!in_.ReadTag(&tag)) return Malformed();
      const uint32_t number = static_cast<uint32_t>(tag >> 3);
      const int wire = static_cast<int>(tag & 7);
      if (number == 0) return Malformed();
      if (wire == kEndGroup) {
        if (group_number == number) return true;
        return Malformed();
      }
      const FieldDescriptor* field = type != nullptr ? type->FindFieldByNumber(static_cast<int>(number)) : nullptr;
      if (field != nullptr && !Known(field, wire)) field = nullptr;
      if (field == nullptr) {
        if (!Unknown(number, wire, depth)) return false;
      } else if (!Field(field, wire, depth, repeated_counts)) {
        return false;
      }
      if (end != UINT64_MAX && in_.position() > end) return Malformed();
    }
  }

  // Whether the parser reads `wire` into `field` (else it keeps it as an
  // unknown field): its own wire type, or packed numbers for a repeated one.
  static bool Known(const FieldDescriptor* field, int wire) {
    const int natural = NaturalWireType(field->type());
    if (wire == natural) return true;
    return wire == kLengthDelimited && field->is_repeated() && natural != kLengthDelimited && natural != kStartGroup;
  }

  bool Field(const FieldDescriptor* field, int wire, int depth, std::unordered_map<int, int64_t>& repeated_counts) {
    const FieldDescriptor::Type type = field->type();
    if (type == FieldDescriptor::TYPE_MESSAGE || type == FieldDescriptor::TYPE_GROUP) {
      int64_t index = -1;
      if (field->is_repeated()) {
        index = repeated_counts[field->number()]++;
        if (index >= limits_.max_repeated_messages) {
          path_.push_back({field, -1});
          return Exceeded(absl::StrCat("holds more than ", limits_.max_repeated_messages, " entries"));
        }
        cost_.parsed_bytes += kSlot;
      }
      cost_.parsed_bytes += ObjectCost(field->message_type());
      path_.push_back({field, index});
      bool ok;
      if (type == FieldDescriptor::TYPE_GROUP) {
        ok = Message(field->message_type(), UINT64_MAX, depth + 1, static_cast<uint32_t>(field->number()));
      } else {
        uint64_t length;
        if (!in_.ReadVarint(&length)) return Malformed();
        ok = Message(field->message_type(), in_.position() + length, depth + 1, 0);
      }
      if (ok) path_.pop_back();
      return ok;
    }
    if (type == FieldDescriptor::TYPE_STRING || type == FieldDescriptor::TYPE_BYTES) {
      uint64_t length;
      if (!in_.ReadVarint(&length) || !in_.Skip(length)) return Malformed();
      if (field->is_repeated()) {
        if (++cost_.string_elements > limits_.max_string_elements) {
          path_.push_back({field, -1});
          return Exceeded(absl::StrCat("holds more than ", limits_.max_string_elements,
                                       " strings (the request's limit of string elements)"));
        }
        cost_.parsed_bytes += kSlot;
      }
      cost_.parsed_bytes += StringCost(length);
      return true;
    }
    // A number (or enum, or bool).
    const int width = FixedWidth(type);
    const uint64_t element = type == FieldDescriptor::TYPE_BOOL ? 1
                             : width != 0                       ? width
                             : (type == FieldDescriptor::TYPE_INT64 || type == FieldDescriptor::TYPE_UINT64 ||
                                type == FieldDescriptor::TYPE_SINT64)
                                 ? 8
                                 : 4;
    if (wire == kLengthDelimited) {  // packed
      uint64_t length;
      if (!in_.ReadVarint(&length)) return Malformed();
      if (width != 0) {
        if (!in_.Skip(length)) return Malformed();
        cost_.parsed_bytes += length / width * element;
        return true;
      }
      uint64_t count;
      if (!in_.CountVarints(length, &count)) return Malformed();
      cost_.parsed_bytes += 2 * count * element;
      return true;
    }
    if (!SkipValue(wire)) return Malformed();
    if (field->is_repeated()) cost_.parsed_bytes += 2 * element;
    return true;
  }

  bool SkipValue(int wire) {
    uint64_t value;
    switch (wire) {
      case kVarint: return in_.ReadVarint(&value);
      case kFixed64: return in_.Skip(8);
      case kFixed32: return in_.Skip(4);
      case kLengthDelimited: return in_.ReadVarint(&value) && in_.Skip(value);
      default: return false;
    }
  }

  bool Unknown(uint32_t number, int wire, int depth) {
    if (++cost_.unknown_fields > limits_.max_unknown_fields) {
      return Exceeded(
          absl::StrCat("carries more than ", limits_.max_unknown_fields, " fields its message type does not define"));
    }
    cost_.parsed_bytes += kUnknownRecord;
    if (wire == kStartGroup) {
      cost_.parsed_bytes += HeapBlock(32);  // the group's own set
      return Message(nullptr, UINT64_MAX, depth + 1, number);
    }
    if (wire == kLengthDelimited) {
      uint64_t length;
      if (!in_.ReadVarint(&length) || !in_.Skip(length)) return Malformed();
      cost_.parsed_bytes += StringCost(length);
      return true;
    }
    return SkipValue(wire) || Malformed();
  }

  const Descriptor& root_;
  ChunkReader& in_;
  const WireScanLimits& limits_;
  WireCost cost_;
  std::vector<Step> path_;
  absl::Status error_;
};

}  // namespace

absl::StatusOr<WireCost> ScanWire(const Descriptor& type, absl::Span<const absl::string_view> chunks,
                                  const WireScanLimits& limits) {
  ChunkReader in(chunks);
  return Scanner(type, in, limits).Run();
}

absl::StatusOr<WireCost> ScanWire(const Descriptor& type, absl::string_view bytes, const WireScanLimits& limits) {
  const absl::string_view chunks[] = {bytes};
  return ScanWire(type, absl::MakeConstSpan(chunks), limits);
}

}  // namespace infergate
