#include "protocol/node_register.h"

#include <exception>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <span>

#include "common/json.h"
#include "common/strings.h"
#include "protocol/go_json.h"

namespace hami::protocol {

// ---------------------------------------------------------------------------------------------
// Go encoding/json string and object writing.

namespace {

constexpr char kHex[] = "0123456789abcdef";

// Length of the valid UTF-8 sequence at s[i], or 0 when the byte there starts none. Mirrors Go's
// utf8.DecodeRune: no overlong forms, no surrogates, nothing above U+10FFFF.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = at(i);
  size_t need = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() - i <= need) return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k <= need; ++k) {
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  }
  return need + 1;
}

}  // namespace

void AppendGoJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
        case '\\':
          out->push_back('\\');
          out->push_back(static_cast<char>(c));
          break;
        case '\b':
          out->append("\\b");
          break;
        case '\f':
          out->append("\\f");
          break;
        case '\n':
          out->append("\\n");
          break;
        case '\r':
          out->append("\\r");
          break;
        case '\t':
          out->append("\\t");
          break;
        default:
          if (c < 0x20 || c == '<' || c == '>' || c == '&') {
            out->append("\\u00");
            out->push_back(kHex[c >> 4]);
            out->push_back(kHex[c & 15]);
          } else {
            out->push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      out->append("\\ufffd");
      ++i;
      continue;
    }
    // U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
    if (n == 3 && c == 0xE2 && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
        (s[i + 2] == '\xA8' || s[i + 2] == '\xA9')) {
      out->append(s[i + 2] == '\xA8' ? "\\u2028" : "\\u2029");
    } else {
      out->append(s.substr(i, n));
    }
    i += n;
  }
  out->push_back('"');
}

namespace {

// Writes a Go struct as a JSON object, key by key, leaving out omitempty zero values.
class ObjectWriter {
 public:
  explicit ObjectWriter(std::string* out) : out_(out) { out_->push_back('{'); }
  ~ObjectWriter() { out_->push_back('}'); }
  ObjectWriter(const ObjectWriter&) = delete;
  ObjectWriter& operator=(const ObjectWriter&) = delete;

  // Starts a member and returns the buffer to write its value into.
  std::string* Key(std::string_view key) {
    if (!first_) out_->push_back(',');
    first_ = false;
    out_->push_back('"');
    out_->append(key);
    out_->append("\":");
    return out_;
  }
  void String(std::string_view key, std::string_view v, bool omit_empty) {
    if (!omit_empty || !v.empty()) AppendGoJsonString(Key(key), v);
  }
  template <typename T>
  void Number(std::string_view key, T v, bool omit_empty) {
    if (!omit_empty || v != 0) Key(key)->append(std::to_string(v));
  }

 private:
  std::string* out_;
  bool first_ = true;
};

void AppendMigProfile(std::string* out, const MigProfile& p) {
  ObjectWriter w(out);
  w.String("name", p.name, false);
  w.Number("memoryMB", p.memory_mb, false);
  w.Number("core", p.core, false);
  w.Number("sliceCount", p.slice_count, false);
  std::string* v = w.Key("placements");
  v->push_back('[');
  for (size_t i = 0; i < p.placements.size(); ++i) {
    if (i) v->push_back(',');
    ObjectWriter pw(v);
    pw.Number("start", p.placements[i].start, false);
    pw.Number("size", p.placements[i].size, false);
  }
  v->push_back(']');
}

void AppendDevice(std::string* out, const DeviceInfo& d) {
  ObjectWriter w(out);
  w.String("id", d.id, true);
  w.Number("index", d.index, true);
  w.Number("count", d.count, true);
  w.Number("devmem", d.devmem, true);
  w.Number("devcore", d.devcore, true);
  w.String("type", d.type, true);
  w.Number("numa", d.numa, true);
  w.String("mode", d.mode, true);
  if (!d.mig_profiles.empty()) {
    std::string* v = w.Key("migProfiles");
    v->push_back('[');
    for (size_t i = 0; i < d.mig_profiles.size(); ++i) {
      if (i) v->push_back(',');
      AppendMigProfile(v, d.mig_profiles[i]);
    }
    v->push_back(']');
  }
  if (d.health) w.Key("health")->append("true");
}

}  // namespace

std::string EncodeNodeRegister(const std::vector<DeviceInfo>& devices) {
  std::string out = "[";
  for (size_t i = 0; i < devices.size(); ++i) {
    if (i) out.push_back(',');
    AppendDevice(&out, devices[i]);
  }
  out.push_back(']');
  return out;
}

// ---------------------------------------------------------------------------------------------
// JSON decoding with Go's encoding/json rules.

namespace {

using Json = gojson::Json;
using gojson::Describe;
using gojson::EqualFoldAscii;
using gojson::ReadBool;
using gojson::ReadInt;
using gojson::ReadString;

struct FieldSpec {
  std::string_view name;
  std::function<Status(const Json&, const std::string& where)> read;
};

// Go matches a key to the field of that exact name, else to one equal to it ignoring case.
const FieldSpec* FindField(std::span<const FieldSpec> fields, std::string_view key) {
  for (const auto& f : fields) {
    if (f.name == key) return &f;
  }
  for (const auto& f : fields) {
    if (EqualFoldAscii(f.name, key)) return &f;
  }
  return nullptr;
}

// Reads the members of `obj` into `fields`, in document order. `where` is the error prefix for
// the object, e.g. `device 1`; `path` the field path so far, e.g. `migProfiles[0].`.
Status ReadObject(const Json& obj, std::span<const FieldSpec> fields, const std::string& where,
                  const std::string& path) {
  if (obj.is_null()) return OkStatus();
  if (!obj.is_object()) {
    std::string what = where;
    if (!path.empty()) what += ": field \"" + path.substr(0, path.size() - 1) + "\"";
    return Error{what + ": want an object, got " + Describe(obj)};
  }
  for (const auto& [key, value] : obj.items()) {
    const FieldSpec* f = FindField(fields, key);
    if (f == nullptr) continue;  // unknown keys are ignored
    Status s = f->read(value, where + ": field \"" + path + std::string(f->name) + "\"");
    if (!s) return s;
  }
  return OkStatus();
}

// Reads a JSON array (null = empty) element by element with `read(element, index)`.
Status ReadArray(const Json& v, const std::string& where,
                 const std::function<Status(const Json&, size_t)>& read) {
  if (v.is_null()) return OkStatus();
  if (!v.is_array()) return Error{where + ": want a list, got " + Describe(v)};
  for (size_t i = 0; i < v.size(); ++i) {
    Status s = read(v[i], i);
    if (!s) return s;
  }
  return OkStatus();
}

Status ReadMigProfile(const Json& v, const std::string& where, const std::string& path,
                      MigProfile* p) {
  const FieldSpec fields[] = {
      {"name", [&](const Json& j, const std::string& w) { return ReadString(j, w, &p->name); }},
      {"memoryMB",
       [&](const Json& j, const std::string& w) { return ReadInt(j, w, "int64", &p->memory_mb); }},
      {"core",
       [&](const Json& j, const std::string& w) { return ReadInt(j, w, "int32", &p->core); }},
      {"sliceCount", [&](const Json& j,
                         const std::string& w) { return ReadInt(j, w, "int32", &p->slice_count); }},
      {"placements",
       [&](const Json& j, const std::string& w) {
         p->placements.clear();
         return ReadArray(j, w, [&](const Json& e, size_t i) {
           MigPlacement& pl = p->placements.emplace_back();
           std::string sub = path + "placements[" + std::to_string(i) + "].";
           const FieldSpec pf[] = {{"start",
                                    [&](const Json& x, const std::string& xw) {
                                      return ReadInt(x, xw, "uint32", &pl.start);
                                    }},
                                   {"size", [&](const Json& x, const std::string& xw) {
                                      return ReadInt(x, xw, "uint32", &pl.size);
                                    }}};
           return ReadObject(e, pf, where, sub);
         });
       }},
  };
  return ReadObject(v, fields, where, path);
}

// *id_given: the entry has a non-null member read into the id.
Status ReadDevice(const Json& v, const std::string& where, DeviceInfo* d, bool* id_given) {
  const FieldSpec fields[] = {
      {"id",
       [&](const Json& j, const std::string& w) {
         *id_given = *id_given || !j.is_null();
         return ReadString(j, w, &d->id);
       }},
      {"index",
       [&](const Json& j, const std::string& w) { return ReadInt(j, w, "uint", &d->index); }},
      {"count",
       [&](const Json& j, const std::string& w) { return ReadInt(j, w, "int32", &d->count); }},
      {"devmem",
       [&](const Json& j, const std::string& w) { return ReadInt(j, w, "int32", &d->devmem); }},
      {"devcore",
       [&](const Json& j, const std::string& w) { return ReadInt(j, w, "int32", &d->devcore); }},
      {"type", [&](const Json& j, const std::string& w) { return ReadString(j, w, &d->type); }},
      {"numa", [&](const Json& j, const std::string& w) { return ReadInt(j, w, "int", &d->numa); }},
      {"mode", [&](const Json& j, const std::string& w) { return ReadString(j, w, &d->mode); }},
      {"migProfiles",
       [&](const Json& j, const std::string& w) {
         d->mig_profiles.clear();
         return ReadArray(j, w, [&](const Json& e, size_t i) {
           return ReadMigProfile(e, where, "migProfiles[" + std::to_string(i) + "].",
                                 &d->mig_profiles.emplace_back());
         });
       }},
      {"health", [&](const Json& j, const std::string& w) { return ReadBool(j, w, &d->health); }},
  };
  return ReadObject(v, fields, where, "");
}

// Values Go would accept that describe no real GPU: a negative size adds slots, memory or cores
// that do not exist, and a UUID listed twice lets one pod take the same GPU twice.
Status CheckDevices(const std::vector<DeviceInfo>& devices) {
  std::set<std::string_view> ids;
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceInfo& d = devices[i];
    const std::string where = "device " + std::to_string(i);
    for (auto [field, v] :
         {std::pair{"count", d.count}, {"devmem", d.devmem}, {"devcore", d.devcore}}) {
      if (v < 0) {
        return Error{where + ": field \"" + field + "\": must not be negative, got " +
                     std::to_string(v)};
      }
    }
    if (!d.id.empty() && !ids.insert(d.id).second) {
      return Error{where + ": field \"id\": duplicate " + Quote(d.id) + " (a GPU listed twice)"};
    }
  }
  return OkStatus();
}

}  // namespace

Result<std::vector<DeviceInfo>> DecodeNodeRegister(std::string_view value, RegisterRules rules) {
  try {
    Result<Json> parsed = ParseJson<Json>(value);
    if (!parsed) return Error{"node register: " + parsed.error() + ": " + Quote(value)};
    Json& j = *parsed;
    std::vector<DeviceInfo> out;
    if (j.is_null()) return out;
    if (!j.is_array()) return Error{"node register: want a JSON list, got " + Describe(j)};
    out.reserve(j.size());
    std::vector<bool> id_given(j.size(), false);
    for (size_t i = 0; i < j.size(); ++i) {
      bool given = false;
      Status s = ReadDevice(j[i], "device " + std::to_string(i), &out.emplace_back(), &given);
      if (!s) return std::move(s).take_error();
      id_given[i] = given;
    }
    if (Status s = CheckDevices(out); !s) return Error{"node register: " + s.error()};
    for (size_t i = 0; rules.require_id && i < out.size(); ++i) {
      if (!out[i].id.empty()) continue;
      return Error{"node register: device " + std::to_string(i) + ": field \"id\": " +
                   (id_given[i] ? "must not be empty, got " + Quote("") : std::string("missing"))};
    }
    return out;
  } catch (const std::exception& e) {
    // Not expected: every access above is type-checked first. Kept so nothing escapes.
    return Error{std::string("node register: ") + e.what()};
  }
}

// ---------------------------------------------------------------------------------------------
// Legacy colon encoding.

std::string EncodeNodeRegisterLegacy(const std::vector<DeviceInfo>& devices) {
  std::string out;
  for (const auto& d : devices) {
    out += d.id + "," + std::to_string(d.count) + "," + std::to_string(d.devmem) + "," +
           std::to_string(d.devcore) + "," + d.type + "," + std::to_string(d.numa) + "," +
           (d.health ? "true" : "false") + "," + std::to_string(d.index) + "," + d.mode + ":";
  }
  return out;
}

namespace {

// Go's strconv.ParseInt accepts one leading '+'; common's parsers do not.
std::string_view StripPlus(std::string_view s) {
  if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') return s.substr(1);
  return s;
}

Status ParseLegacyEntry(std::string_view entry, DeviceInfo* d) {
  std::vector<std::string_view> f = Split(entry, ',');
  auto fail = [&](std::string_view field, std::string_view problem) {
    return Error{"node register entry " + Quote(entry) + ": field \"" + std::string(field) +
                 "\": " + std::string(problem)};
  };
  if (f.size() != 7 && f.size() != 9) {
    return Error{"node register entry " + Quote(entry) + ": want 7 or 9 comma-separated fields " +
                 "(ID,Count,Devmem,Devcore,Type,Numa,Health[,Index,Mode]), got " +
                 std::to_string(f.size())};
  }
  d->id = std::string(f[0]);
  const std::pair<const char*, int32_t*> ints[] = {
      {"count", &d->count}, {"devmem", &d->devmem}, {"devcore", &d->devcore}};
  for (size_t k = 0; k < 3; ++k) {
    auto v = ParseInt32(StripPlus(f[k + 1]));
    if (!v) return fail(ints[k].first, "want an int32, got " + Quote(f[k + 1]));
    *ints[k].second = *v;
  }
  d->type = std::string(f[4]);
  auto numa = ParseInt64(StripPlus(f[5]));
  if (!numa) return fail("numa", "want an integer, got " + Quote(f[5]));
  d->numa = *numa;
  auto health = ParseBool(f[6]);
  if (!health) return fail("health", "want a bool, got " + Quote(f[6]));
  d->health = *health;
  d->index = 0;
  d->mode = std::string(kDefaultDeviceMode);
  if (f.size() == 9) {
    auto index = ParseInt64(StripPlus(f[7]));
    if (!index) return fail("index", "want an integer, got " + Quote(f[7]));
    if (*index < 0) return fail("index", "must not be negative, got " + Quote(f[7]));
    d->index = static_cast<uint64_t>(*index);
    d->mode = std::string(f[8]);
  }
  return OkStatus();
}

}  // namespace

Result<std::vector<DeviceInfo>> DecodeNodeRegisterLegacy(std::string_view value) {
  if (value.find(':') == std::string_view::npos) {
    return Error{"node register: legacy value has no ':' after a device entry: " + Quote(value)};
  }
  std::vector<DeviceInfo> out;
  for (std::string_view entry : Split(value, ':')) {
    if (entry.empty()) continue;
    Status s = ParseLegacyEntry(entry, &out.emplace_back());
    if (!s) return std::move(s).take_error();
  }
  if (Status s = CheckDevices(out); !s) return Error{"node register: " + s.error()};
  return out;
}

}  // namespace hami::protocol
