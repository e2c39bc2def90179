#include "sim/apiserver/protobuf.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>

#include "common/strings.h"
#include "k8s/base64.h"

namespace hami::sim {
namespace {

using Json = nlohmann::json;
using k8s::ApiError;
using k8s::ApiResult;

constexpr std::string_view kMagic{"k8s\0", 4};

ApiError Malformed(std::string_view where, std::string_view what) {
  return ApiError{400, k8s::kReasonBadRequest,
                  "protobuf body: " + std::string(where) + ": " + std::string(what)};
}

// One field of a message: its number, wire type and payload (the varint value, or the bytes of
// a length-delimited field; fixed-width fields are skipped by Next).
struct Field {
  uint32_t number = 0;
  int wire = 0;
  uint64_t varint = 0;
  std::string_view bytes;
};

// Walks the fields of one message. Next() returns false at the end; error() is then set when
// the message was malformed.
class Reader {
 public:
  Reader(std::string_view data, std::string_view where) : data_(data), where_(where) {}

  bool Next(Field& f) {
    while (true) {
      if (data_.empty() || !error_.empty()) return false;
      uint64_t key;
      if (!Varint(key)) return Fail("truncated field key");
      f.number = static_cast<uint32_t>(key >> 3);
      f.wire = static_cast<int>(key & 7);
      if (f.number == 0 || (key >> 3) > 0x1fffffff) return Fail("field number out of range");
      switch (f.wire) {
        case 0:
          if (!Varint(f.varint)) return Fail("truncated varint");
          return true;
        case 2: {
          uint64_t len;
          if (!Varint(len) || len > data_.size()) return Fail("truncated length-delimited field");
          f.bytes = data_.substr(0, len);
          data_.remove_prefix(len);
          return true;
        }
        case 1:
        case 5: {
          size_t width = f.wire == 1 ? 8 : 4;
          if (data_.size() < width) return Fail("truncated fixed-width field");
          data_.remove_prefix(width);
          continue;  // no field we read is fixed-width
        }
        default:
          return Fail("unsupported wire type " + std::to_string(f.wire));
      }
    }
  }

  const std::string& error() const { return error_; }
  std::string_view where() const { return where_; }

 private:
  bool Varint(uint64_t& out) {
    out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (data_.empty()) return false;
      auto b = static_cast<uint8_t>(data_.front());
      data_.remove_prefix(1);
      out |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  bool Fail(std::string what) {
    error_ = std::move(what);
    return false;
  }

  std::string_view data_;
  std::string_view where_;
  std::string error_;
};

// Reads every field of `data` with `on_field`; the first error (the reader's or the callback's)
// is returned, naming `where`.
ApiResult<std::monostate> ForEachField(
    std::string_view data, std::string_view where,
    const std::function<ApiResult<std::monostate>(const Field&)>& on_field) {
  Reader r(data, where);
  Field f;
  while (r.Next(f)) {
    auto ok = on_field(f);
    if (!ok) return ok;
  }
  if (!r.error().empty()) return Malformed(where, r.error());
  return std::monostate{};
}

ApiResult<std::monostate> WantBytes(const Field& f, std::string_view where) {
  if (f.wire != 2) {
    return Malformed(where, "field " + std::to_string(f.number) + " must be length-delimited");
  }
  return std::monostate{};
}

ApiResult<std::monostate> WantVarint(const Field& f, std::string_view where) {
  if (f.wire != 0)
    return Malformed(where, "field " + std::to_string(f.number) + " must be a varint");
  return std::monostate{};
}

// A map<string, string|bytes> entry {1 key, 2 value} into out[key]; bytes values are base64, as
// their JSON form is.
ApiResult<std::monostate> MapEntry(const Field& f, std::string_view where, bool bytes_value,
                                   Json& out) {
  if (auto ok = WantBytes(f, where); !ok) return ok;
  std::string key, value;
  auto ok = ForEachField(f.bytes, where, [&](const Field& e) -> ApiResult<std::monostate> {
    if (e.number != 1 && e.number != 2) return std::monostate{};
    if (auto b = WantBytes(e, where); !b) return b;
    (e.number == 1 ? key : value) = std::string(e.bytes);
    return std::monostate{};
  });
  if (!ok) return ok;
  if (!out.is_object()) out = Json::object();
  out[key] = bytes_value ? k8s::Base64Encode(value) : value;
  return std::monostate{};
}

// ObjectMeta: 1 name, 2 generateName, 3 namespace, 5 uid, 6 resourceVersion, 7 generation,
// 11 labels, 12 annotations, 14 finalizers. Timestamps and the rest are server-set: skipped.
ApiResult<Json> DecodeObjectMeta(std::string_view data) {
  Json meta = Json::object();
  auto ok = ForEachField(data, "metadata", [&](const Field& f) -> ApiResult<std::monostate> {
    static constexpr std::pair<uint32_t, const char*> kStrings[] = {
        {1, "name"}, {2, "generateName"}, {3, "namespace"}, {5, "uid"}, {6, "resourceVersion"}};
    for (auto [number, name] : kStrings) {
      if (f.number != number) continue;
      if (auto b = WantBytes(f, std::string("metadata.") + name); !b) return b;
      if (!f.bytes.empty()) meta[name] = std::string(f.bytes);  // Go writes "" for unset
      return std::monostate{};
    }
    switch (f.number) {
      case 7:
        if (auto v = WantVarint(f, "metadata.generation"); !v) return v;
        if (f.varint != 0) meta["generation"] = static_cast<int64_t>(f.varint);
        return std::monostate{};
      case 11:
        return MapEntry(f, "metadata.labels", false, meta["labels"]);
      case 12:
        return MapEntry(f, "metadata.annotations", false, meta["annotations"]);
      case 14:
        if (auto b = WantBytes(f, "metadata.finalizers"); !b) return b;
        meta["finalizers"].push_back(std::string(f.bytes));
        return std::monostate{};
      default:
        return std::monostate{};
    }
  });
  if (!ok) return std::move(ok).take_error();
  return meta;
}

// Secret: 1 metadata, 2 data (bytes), 3 type, 4 stringData, 5 immutable.
// ConfigMap: 1 metadata, 2 data, 3 binaryData (bytes), 4 immutable.
ApiResult<Json> DecodeDataObject(std::string_view raw, bool secret) {
  Json obj = Json::object();
  auto on_field = [&](const Field& f) -> ApiResult<std::monostate> {
    if (f.number == 1) {
      if (auto b = WantBytes(f, "metadata"); !b) return b;
      auto meta = DecodeObjectMeta(f.bytes);
      if (!meta) return std::move(meta).take_error();
      obj["metadata"] = std::move(*meta);
      return std::monostate{};
    }
    if (f.number == 2) return MapEntry(f, "data", secret, obj["data"]);
    if (!secret && f.number == 3) return MapEntry(f, "binaryData", true, obj["binaryData"]);
    if (secret && f.number == 3) {
      if (auto b = WantBytes(f, "type"); !b) return b;
      obj["type"] = std::string(f.bytes);
    }
    if (secret && f.number == 4) return MapEntry(f, "stringData", false, obj["stringData"]);
    if (f.number == (secret ? 5u : 4u)) {
      if (auto v = WantVarint(f, "immutable"); !v) return v;
      obj["immutable"] = f.varint != 0;
    }
    return std::monostate{};
  };
  if (auto ok = ForEachField(raw, secret ? "Secret" : "ConfigMap", on_field); !ok) {
    return std::move(ok).take_error();
  }
  return obj;
}

// DeleteOptions: 1 gracePeriodSeconds, 2 preconditions {1 uid, 2 resourceVersion},
// 3 orphanDependents, 4 propagationPolicy, 5 dryRun.
ApiResult<Json> DecodeDeleteOptions(std::string_view raw) {
  Json obj = Json::object();
  auto ok = ForEachField(raw, "DeleteOptions", [&](const Field& f) -> ApiResult<std::monostate> {
    switch (f.number) {
      case 1:
        if (auto v = WantVarint(f, "gracePeriodSeconds"); !v) return v;
        obj["gracePeriodSeconds"] = static_cast<int64_t>(f.varint);
        return std::monostate{};
      case 2: {
        if (auto b = WantBytes(f, "preconditions"); !b) return b;
        Json& pre = obj["preconditions"];
        pre = Json::object();
        return ForEachField(f.bytes, "preconditions",
                            [&](const Field& p) -> ApiResult<std::monostate> {
                              if (p.number != 1 && p.number != 2) return std::monostate{};
                              if (auto b = WantBytes(p, "preconditions"); !b) return b;
                              pre[p.number == 1 ? "uid" : "resourceVersion"] = std::string(p.bytes);
                              return std::monostate{};
                            });
      }
      case 3:
        if (auto v = WantVarint(f, "orphanDependents"); !v) return v;
        obj["orphanDependents"] = f.varint != 0;
        return std::monostate{};
      case 4:
        if (auto b = WantBytes(f, "propagationPolicy"); !b) return b;
        obj["propagationPolicy"] = std::string(f.bytes);
        return std::monostate{};
      case 5:
        if (auto b = WantBytes(f, "dryRun"); !b) return b;
        obj["dryRun"].push_back(std::string(f.bytes));
        return std::monostate{};
      default:
        return std::monostate{};
    }
  });
  if (!ok) return std::move(ok).take_error();
  return obj;
}

}  // namespace

bool IsProtobufContentType(std::string_view content_type) {
  return Trim(content_type.substr(0, content_type.find(';'))) ==
         "application/vnd.kubernetes.protobuf";
}

ApiResult<Json> DecodeProtobuf(std::string_view body) {
  if (body.substr(0, kMagic.size()) != kMagic) {
    return Malformed("envelope", "does not start with the \"k8s\\x00\" prefix");
  }
  body.remove_prefix(kMagic.size());
  std::string api_version, kind, encoding;
  std::string_view raw;
  auto ok = ForEachField(body, "envelope", [&](const Field& f) -> ApiResult<std::monostate> {
    if (f.number == 1) {
      if (auto b = WantBytes(f, "typeMeta"); !b) return b;
      return ForEachField(f.bytes, "typeMeta", [&](const Field& t) -> ApiResult<std::monostate> {
        if (t.number != 1 && t.number != 2) return std::monostate{};
        if (auto b = WantBytes(t, "typeMeta"); !b) return b;
        (t.number == 1 ? api_version : kind) = std::string(t.bytes);
        return std::monostate{};
      });
    }
    if (f.number == 2 || f.number == 3) {
      if (auto b = WantBytes(f, f.number == 2 ? "raw" : "contentEncoding"); !b) return b;
      if (f.number == 2) {
        raw = f.bytes;
      } else {
        encoding = std::string(f.bytes);
      }
    }
    return std::monostate{};
  });
  if (!ok) return std::move(ok).take_error();
  if (!encoding.empty()) {
    return Malformed("envelope.contentEncoding", Quote(encoding) + " is not supported");
  }
  if (kind != "Secret" && kind != "ConfigMap" && kind != "DeleteOptions") {
    return ApiError{415, k8s::kReasonUnsupportedMediaType,
                    "protobuf body: kind " + Quote(kind) +
                        " is not decoded by this server; send it as application/json"};
  }
  ApiResult<Json> obj =
      kind == "DeleteOptions" ? DecodeDeleteOptions(raw) : DecodeDataObject(raw, kind == "Secret");
  if (!obj) return obj;
  (*obj)["apiVersion"] = api_version;
  (*obj)["kind"] = kind;
  try {
    (void)obj->dump();  // strings must be UTF-8 to be JSON
  } catch (const Json::exception&) {
    return Malformed(kind, "a string field is not valid UTF-8");
  }
  return obj;
}

}  // namespace hami::sim
