// kube-apiserver's validation of resource.k8s.io/v1 (pkg/apis/resource/validation), the subset
// docs/DRA.md lists: field paths, error kinds and reasons as kube-apiserver prints them.
#include "sim/apiserver/dra_validation.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <optional>
#include <regex>

#include "common/strings.h"
#include "protocol/quantity.h"

namespace hami::sim {
namespace {

using Json = nlohmann::json;
using protocol::CompareQuantities;
using protocol::Quantity;

constexpr size_t kMaxDriverName = 63;
constexpr size_t kMaxPoolName = 253;
constexpr size_t kMaxAttributeValue = 64;
constexpr size_t kMaxIdLength = 32;
constexpr size_t kMaxCelLength = 10 * 1024;
constexpr size_t kMaxTaints = 16;
constexpr size_t kMaxReservedFor = 256;
constexpr size_t kMaxResults = 32;
constexpr size_t kMaxConstraints = 32;
constexpr size_t kMaxConfigs = 32;

const char* const kLabelMessage =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const char* const kSubdomainMessage =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const char* const kCIdentifierMessage =
    "a valid C identifier must start with alphabetic character or '_', followed by a string of "
    "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
    "validation is '[A-Za-z_][A-Za-z0-9_]*')";

// A value as field.Error prints it: strings quoted, numbers and booleans bare.
std::string Show(const Json& v) {
  if (v.is_string()) return Quote(v.get<std::string>());
  return v.dump();
}
std::string Show(const std::string& s) { return Quote(s); }

// Collects field errors in kube-apiserver's wording.
class Errors {
 public:
  explicit Errors(FieldErrors& out) : out_(out) {}
  void Required(const std::string& path, const std::string& detail = "") {
    out_.push_back(path + ": Required value" + (detail.empty() ? "" : ": " + detail));
  }
  void Invalid(const std::string& path, const std::string& shown, const std::string& detail) {
    out_.push_back(path + ": Invalid value: " + shown + ": " + detail);
  }
  void Forbidden(const std::string& path, const std::string& detail) {
    out_.push_back(path + ": Forbidden: " + detail);
  }
  void TooMany(const std::string& path, size_t n, size_t max) {
    out_.push_back(path + ": Too many: " + std::to_string(n) + ": must have at most " +
                   std::to_string(max) + " items");
  }
  void TooLong(const std::string& path, size_t max) {
    out_.push_back(path + ": Too long: may not be more than " + std::to_string(max) + " bytes");
  }
  void Duplicate(const std::string& path, const std::string& shown) {
    out_.push_back(path + ": Duplicate value: " + shown);
  }
  void NotSupported(const std::string& path, const std::string& shown,
                    std::initializer_list<const char*> supported) {
    std::string list;
    for (const char* s : supported) list += (list.empty() ? "" : ", ") + Quote(s);
    out_.push_back(path + ": Unsupported value: " + shown + ": supported values: " + list);
  }
  size_t size() const { return out_.size(); }

 private:
  FieldErrors& out_;
};

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}
std::string Key(const std::string& path, const std::string& key) { return path + "[" + key + "]"; }

// obj[key] when obj is an object holding a non-null key.
const Json* Get(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// obj.path[0].path[1]..., or null when a step is missing or not an object.
const Json& At(const Json& obj, std::initializer_list<const char*> path) {
  static const Json kNull;
  const Json* cur = &obj;
  for (const char* key : path) {
    cur = Get(*cur, key);
    if (cur == nullptr) return kNull;
  }
  return *cur;
}

// The field as a list / map, or nullptr (absent, or reported as the wrong type).
const Json* List(Errors& e, const Json& obj, const char* key, const std::string& path) {
  const Json* v = Get(obj, key);
  if (v != nullptr && !v->is_array()) {
    e.Invalid(path, Show(*v), "must be a list");
    return nullptr;
  }
  return v;
}
const Json* Map(Errors& e, const Json& obj, const char* key, const std::string& path) {
  const Json* v = Get(obj, key);
  if (v != nullptr && !v->is_object()) {
    e.Invalid(path, Show(*v), "must be an object");
    return nullptr;
  }
  return v;
}
// A string field ("" when absent); a non-string is reported and read as "".
std::string String(Errors& e, const Json& obj, const char* key, const std::string& path) {
  const Json* v = Get(obj, key);
  if (v == nullptr) return "";
  if (!v->is_string()) {
    e.Invalid(path, Show(*v), "must be a string");
    return "";
  }
  return v->get<std::string>();
}
// An optional boolean field.
std::optional<bool> Bool(Errors& e, const Json& obj, const char* key, const std::string& path) {
  const Json* v = Get(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    e.Invalid(path, Show(*v), "must be a boolean");
    return std::nullopt;
  }
  return v->get<bool>();
}
// An optional integer field.
std::optional<int64_t> Int(Errors& e, const Json& obj, const char* key, const std::string& path) {
  const Json* v = Get(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) {
    e.Invalid(path, Show(*v), "must be an integer");
    return std::nullopt;
  }
  return v->get<int64_t>();
}

bool IsLabelChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }
bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool IsDns1123Label(std::string_view s) {
  if (s.empty() || s.size() > 63 || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), IsLabelChar);
}

bool IsDns1123Subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (std::string_view part : Split(s, '.')) {
    if (part.empty() || !IsAlnum(part.front()) || !IsAlnum(part.back())) return false;
    if (!std::all_of(part.begin(), part.end(), IsLabelChar)) return false;
  }
  return true;
}

bool IsCIdentifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// A DNS label that must be set (device, request, counter and counter set names).
void CheckLabel(Errors& e, const std::string& path, const std::string& value) {
  if (value.empty()) return e.Required(path);
  if (value.size() > 63) e.Invalid(path, Show(value), "must be no more than 63 characters");
  if (!IsDns1123Label(value)) e.Invalid(path, Show(value), kLabelMessage);
}

void CheckSubdomain(Errors& e, const std::string& path, const std::string& value) {
  if (value.empty()) return e.Required(path);
  if (value.size() > 253) e.Invalid(path, Show(value), "must be no more than 253 characters");
  if (!IsDns1123Subdomain(value)) e.Invalid(path, Show(value), kSubdomainMessage);
}

// ValidateCSIDriverName: a DNS subdomain (any case) of at most 63 bytes.
void CheckDriverName(Errors& e, const std::string& path, const std::string& value) {
  if (value.empty()) return e.Required(path);
  if (value.size() > kMaxDriverName) e.TooLong(path, kMaxDriverName);
  std::string lower = value;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!IsDns1123Subdomain(lower)) e.Invalid(path, Show(value), kSubdomainMessage);
}

// One or more DNS subdomains separated by '/', at most 253 bytes.
void CheckPoolName(Errors& e, const std::string& path, const std::string& value) {
  if (value.empty()) return e.Required(path);
  if (value.size() > kMaxPoolName) e.TooLong(path, kMaxPoolName);
  for (std::string_view part : Split(value, '/')) {
    if (!IsDns1123Subdomain(part)) {
      e.Invalid(path, Show(value), kSubdomainMessage);
      return;
    }
  }
}

// An attribute or capacity name: a C identifier of at most 32 bytes, optionally after a domain
// and a slash ("memory", "gpu.example.com/memory").
void CheckQualifiedName(Errors& e, const std::string& path, const std::string& name) {
  std::vector<std::string_view> parts = Split(name, '/');
  auto id = [&](std::string_view s) {
    if (s.size() > kMaxIdLength) e.TooLong(path, kMaxIdLength);
    if (!IsCIdentifier(s)) e.Invalid(path, Show(std::string(s)), kCIdentifierMessage);
  };
  if (parts.size() == 1) return id(parts[0]);
  if (parts.size() > 2) {
    return e.Invalid(path, Show(name), "must not contain more than one slash");
  }
  if (parts[0].empty()) {
    e.Invalid(path, "\"\"", "the domain must not be empty");
  } else {
    CheckDriverName(e, path, std::string(parts[0]));
  }
  if (parts[1].empty()) {
    e.Invalid(path, "\"\"", "the name must not be empty");
  } else {
    id(parts[1]);
  }
}

// A resource.Quantity (a JSON string, or a number as Quantity's decoder also takes).
std::optional<Quantity> CheckQuantity(Errors& e, const std::string& path, const Json& v) {
  std::string text;
  if (v.is_string()) {
    text = v.get<std::string>();
  } else if (v.is_number()) {
    text = v.dump();
  } else {
    e.Invalid(path, Show(v), "must be a quantity");
    return std::nullopt;
  }
  auto q = protocol::ParseQuantity(text);
  if (!q) {
    // The parser's reason without its own "quantity "x": " prefix.
    std::string why = q.error();
    size_t colon = why.find("\": ");
    if (colon != std::string::npos) why = why.substr(colon + 3);
    e.Invalid(path, Show(text), "must be a quantity (" + why + ")");
    return std::nullopt;
  }
  return *q;
}

std::string QuantityText(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// A map of counter name -> {value: quantity} (sharedCounters[].counters, consumesCounters[]).
void CheckCounters(Errors& e, const Json& parent, const std::string& path) {
  const std::string cpath = path + ".counters";
  const Json* counters = Map(e, parent, "counters", cpath);
  if (counters == nullptr || counters->empty()) {
    if (Get(parent, "counters") == nullptr || (counters != nullptr && counters->empty())) {
      e.Required(cpath);
    }
    return;
  }
  if (counters->size() > kDraMaxCountersPerSet) {
    return e.TooMany(cpath, counters->size(), kDraMaxCountersPerSet);
  }
  for (const auto& [name, counter] : counters->items()) {
    CheckLabel(e, cpath, name);
    const std::string vpath = Key(cpath, name) + ".value";
    const Json* value = Get(counter, "value");
    if (value == nullptr) {
      e.Required(vpath);
    } else {
      CheckQuantity(e, vpath, *value);
    }
  }
}

// --- ResourceSlice ---------------------------------------------------------------------------

// The step check's arithmetic: every bound as a whole number of units, or of milli-units when
// one of them is fractional (DRAFractionalCapacityRange); nullopt after reporting a bound that
// fits neither.
struct Bound {
  const char* name;
  const Json* text;
  Quantity q;
};
// Whether `q` is a whole number of 10^`unit` units, whatever its size.
bool IsWhole(const Quantity& q, int unit) {
  unsigned __int128 n = q.mantissa;
  n <<= q.exp2;  // mantissa < 2^64, exp2 <= 60
  for (int e = q.exp10 - unit; e < 0 && n != 0; ++e) {
    if (n % 10 != 0) return false;
    n /= 10;
  }
  return true;
}

std::optional<std::vector<int64_t>> StepValues(Errors& e, const std::string& path,
                                               const std::vector<Bound>& bounds, int* unit) {
  *unit = 0;
  for (const Bound& b : bounds) {
    if (!IsWhole(b.q, 0)) *unit = -3;
  }
  std::vector<int64_t> out;
  bool ok = true;
  for (const Bound& b : bounds) {
    const std::string bpath = path + "." + b.name;
    auto v = protocol::ExactScaledValue(b.q, *unit);
    if (b.q.negative && b.q.mantissa != 0) {
      e.Invalid(bpath, Show(*b.text), "must be greater than or equal to 0");
    } else if (!IsWhole(b.q, *unit)) {
      e.Invalid(bpath, Show(*b.text), "value cannot be represented as a milli value");
    } else if (!v) {
      e.Invalid(bpath, Show(*b.text), "must not be larger than 9223372036854775807");
    }
    if (!v || (b.q.negative && b.q.mantissa != 0)) {
      ok = false;
      continue;
    }
    out.push_back(*v);
  }
  if (!ok) return std::nullopt;
  return out;
}

std::string ShowScaled(int64_t v, int unit) {
  return Quote(std::to_string(v) + (unit == -3 ? "m" : ""));
}

void CheckRequestPolicy(Errors& e, const std::string& path, const Json& policy, const Quantity& cap,
                        const std::string& cap_text) {
  if (!policy.is_object()) return e.Invalid(path, Show(policy), "must be an object");
  const Json* values = List(e, policy, "validValues", path + ".validValues");
  const Json* range = Map(e, policy, "validRange", path + ".validRange");
  if (values != nullptr && !values->empty() && range != nullptr) {
    return e.Forbidden(path,
                       "exactly one policy can be specified, cannot specify \"validValues\" and "
                       "\"validRange\" at the same time");
  }
  const Json* def_json = Get(policy, "default");
  std::optional<Quantity> def;
  if (def_json != nullptr) def = CheckQuantity(e, path + ".default", *def_json);
  if (values != nullptr && !values->empty()) {
    const std::string vpath = path + ".validValues";
    if (def_json == nullptr)
      return e.Required(path + ".default", "required when validValues is defined");
    if (values->size() > kDraMaxValidValues) {
      return e.TooMany(vpath, values->size(), kDraMaxValidValues);
    }
    std::vector<std::optional<Quantity>> qs;
    for (size_t i = 0; i < values->size(); ++i)
      qs.push_back(CheckQuantity(e, Index(vpath, i), (*values)[i]));
    bool found_default = false;
    for (size_t i = 0; i < qs.size(); ++i) {
      if (!qs[i]) continue;
      const std::string shown = Show((*values)[i]);
      if (i + 1 < qs.size() && qs[i + 1] && CompareQuantities(*qs[i], *qs[i + 1]) > 0) {
        e.Invalid(Index(vpath, i + 1), Show((*values)[i + 1]),
                  "values must be sorted in ascending order");
      }
      if (CompareQuantities(*qs[i], cap) > 0) {
        e.Invalid(Index(vpath, i), shown, "option is larger than capacity value: " + cap_text);
      }
      for (size_t j = 0; j < i; ++j) {
        if (qs[j] && CompareQuantities(*qs[i], *qs[j]) == 0) {
          e.Duplicate(Index(vpath, i), shown);
          break;
        }
      }
      if (def && CompareQuantities(*qs[i], *def) == 0) found_default = true;
    }
    if (def && !found_default) {
      e.Invalid(vpath, Show(*def_json),
                "default value is not valid according to the requestPolicy");
    }
    return;
  }
  if (range == nullptr) return;
  const std::string rpath = path + ".validRange";
  if (def_json == nullptr)
    return e.Required(path + ".default", "required when validRange is defined");
  const Json* min_json = Get(*range, "min");
  if (min_json == nullptr) return e.Required(rpath + ".min", "required when validRange is defined");
  auto min = CheckQuantity(e, rpath + ".min", *min_json);
  const Json* max_json = Get(*range, "max");
  std::optional<Quantity> max;
  if (max_json != nullptr) max = CheckQuantity(e, rpath + ".max", *max_json);
  const Json* step_json = Get(*range, "step");
  std::optional<Quantity> step;
  if (step_json != nullptr) step = CheckQuantity(e, rpath + ".step", *step_json);
  if (!min || !def || (max_json != nullptr && !max) || (step_json != nullptr && !step)) return;
  const std::string min_text = QuantityText(*min_json);
  if (CompareQuantities(*min, cap) > 0) {
    e.Invalid(rpath + ".min", Show(*min_json), "min is larger than capacity value: " + cap_text);
  }
  if (CompareQuantities(*def, *min) < 0) {
    e.Invalid(rpath + ".default", Show(*def_json), "default is less than min: " + min_text);
  }
  if (max) {
    const std::string max_text = QuantityText(*max_json);
    if (CompareQuantities(*min, *max) > 0) {
      e.Invalid(rpath + ".max", Show(*min_json), "min is larger than max: " + max_text);
    }
    if (CompareQuantities(*max, cap) > 0) {
      e.Invalid(rpath + ".max", Show(*max_json), "max is larger than capacity value: " + cap_text);
    }
    if (CompareQuantities(*def, *max) > 0) {
      e.Invalid(rpath + ".default", Show(*def_json), "default is more than max: " + max_text);
    }
  }
  if (!step) return;
  if (step->mantissa == 0 || step->negative) {
    return e.Invalid(rpath + ".step", Show(*step_json), "must be greater than zero");
  }
  std::vector<Bound> bounds = {{"default", def_json, *def}, {"min", min_json, *min}};
  if (max) bounds.push_back({"max", max_json, *max});
  bounds.push_back({"step", step_json, *step});
  int unit = 0;
  auto v = StepValues(e, rpath, bounds, &unit);
  if (!v) return;
  const int64_t d = (*v)[0], lo = (*v)[1], st = v->back();
  int64_t one_step = 0;
  if (!__builtin_add_overflow(lo, st, &one_step)) {
    auto cap_scaled = protocol::ExactScaledValue(cap, unit);
    if (cap_scaled && one_step > *cap_scaled) {
      e.Invalid(
          rpath + ".step", Show(*step_json),
          "one step " + ShowScaled(one_step, unit) + " is larger than capacity value: " + cap_text);
    }
  }
  auto check_multiple = [&](int64_t value, const Json& shown) {
    int64_t diff = 0;
    if (__builtin_sub_overflow(value, lo, &diff) || diff % st != 0) {
      e.Invalid(rpath + ".step", Show(shown),
                "value is not a multiple of a given step (" + QuantityText(*step_json) +
                    ") from (" + min_text + ")");
    }
  };
  check_multiple(d, *def_json);
  if (max) check_multiple((*v)[2], *max_json);
}

// semver.org 2.0.0: MAJOR.MINOR.PATCH[-prerelease][+build].
bool IsSemver(const std::string& s) {
  static const std::regex kSemver(
      "^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)"
      "(-(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(\\.(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]"
      "*))*)?"
      "(\\+[0-9a-zA-Z-]+(\\.[0-9a-zA-Z-]+)*)?$");
  return std::regex_match(s, kSemver);
}

void CheckAttribute(Errors& e, const std::string& path, const Json& attr) {
  if (!attr.is_object()) return e.Invalid(path, Show(attr), "must be an object");
  int fields = 0;
  if (const Json* v = Get(attr, "int")) {
    ++fields;
    if (!v->is_number_integer()) e.Invalid(path + ".int", Show(*v), "must be an integer");
  }
  if (const Json* v = Get(attr, "bool")) {
    ++fields;
    if (!v->is_boolean()) e.Invalid(path + ".bool", Show(*v), "must be a boolean");
  }
  if (const Json* v = Get(attr, "string")) {
    ++fields;
    if (!v->is_string()) {
      e.Invalid(path + ".string", Show(*v), "must be a string");
    } else if (v->get_ref<const std::string&>().size() > kMaxAttributeValue) {
      e.TooLong(path + ".string", kMaxAttributeValue);
    }
  }
  if (const Json* v = Get(attr, "version")) {
    ++fields;
    if (!v->is_string() || !IsSemver(v->get<std::string>())) {
      e.Invalid(path + ".version", Show(*v),
                "must be a string compatible with semver.org spec 2.0.0");
    } else if (v->get_ref<const std::string&>().size() > kMaxAttributeValue) {
      e.TooLong(path + ".version", kMaxAttributeValue);
    }
  }
  // List values (DRAListTypeAttributes, alpha): counted, not checked further.
  for (const char* list : {"ints", "bools", "strings", "versions"}) {
    if (Get(attr, list) != nullptr) ++fields;
  }
  if (fields == 0) e.Invalid(path, "\"\"", "exactly one value must be specified");
  if (fields > 1) e.Invalid(path, attr.dump(), "exactly one value must be specified");
}

void CheckTaints(Errors& e, const Json& device, const std::string& path) {
  const Json* taints = List(e, device, "taints", path);
  if (taints == nullptr) return;
  if (taints->size() > kMaxTaints) return e.TooMany(path, taints->size(), kMaxTaints);
  for (size_t i = 0; i < taints->size(); ++i) {
    const Json& t = (*taints)[i];
    const std::string tpath = Index(path, i);
    if (String(e, t, "key", tpath + ".key").empty()) e.Required(tpath + ".key");
    std::string effect = String(e, t, "effect", tpath + ".effect");
    if (effect.empty()) {
      e.Required(tpath + ".effect");
    } else if (effect != "NoSchedule" && effect != "NoExecute" && effect != "None") {
      e.NotSupported(tpath + ".effect", Show(effect), {"NoExecute", "NoSchedule", "None"});
    }
  }
}

void CheckNodeSelector(Errors& e, const Json& selector, const std::string& path) {
  const Json* terms = List(e, selector, "nodeSelectorTerms", path + ".nodeSelectorTerms");
  if (terms == nullptr || terms->size() != 1) {
    e.Invalid(path + ".nodeSelectorTerms", terms == nullptr ? "null" : terms->dump(),
              "must have exactly one node selector term");
  }
}

void CheckDevice(Errors& e, const Json& device, const std::string& path, bool per_device_nodes,
                 const CounterSets& pool_counters, const std::string& pool_text) {
  if (!device.is_object()) return e.Invalid(path, Show(device), "must be an object");
  CheckLabel(e, path + ".name", String(e, device, "name", path + ".name"));
  const bool multi = Bool(e, device, "allowMultipleAllocations", path + ".allowMultipleAllocations")
                         .value_or(false);
  const Json* attrs = Map(e, device, "attributes", path + ".attributes");
  const Json* caps = Map(e, device, "capacity", path + ".capacity");
  const size_t n = (attrs ? attrs->size() : 0) + (caps ? caps->size() : 0);
  if (n > kDraMaxAttributesAndCapacities) {
    e.Invalid(path, std::to_string(n),
              "the total number of attributes and capacities must not exceed " +
                  std::to_string(kDraMaxAttributesAndCapacities));
  }
  if (attrs != nullptr) {
    for (const auto& [name, attr] : attrs->items()) {
      CheckQualifiedName(e, path + ".attributes", name);
      CheckAttribute(e, Key(path + ".attributes", name), attr);
    }
  }
  if (caps != nullptr) {
    for (const auto& [name, cap] : caps->items()) {
      const std::string cpath = Key(path + ".capacity", name);
      CheckQualifiedName(e, path + ".capacity", name);
      if (!cap.is_object()) {
        e.Invalid(cpath, Show(cap), "must be an object");
        continue;
      }
      const Json* value = Get(cap, "value");
      std::optional<Quantity> q;
      if (value == nullptr) {
        e.Required(cpath + ".value");
      } else {
        q = CheckQuantity(e, cpath + ".value", *value);
      }
      const Json* policy = Get(cap, "requestPolicy");
      if (policy == nullptr) continue;
      if (!multi) {
        e.Forbidden(cpath + ".requestPolicy", "allowMultipleAllocations must be true");
      } else if (q) {
        CheckRequestPolicy(e, cpath + ".requestPolicy", *policy, *q, QuantityText(*value));
      }
    }
  }
  CheckTaints(e, device, path + ".taints");
  const std::string ccpath = path + ".consumesCounters";
  if (const Json* consumes = List(e, device, "consumesCounters", ccpath)) {
    if (consumes->size() > kDraMaxConsumesCounters) {
      e.TooMany(ccpath, consumes->size(), kDraMaxConsumesCounters);
    } else {
      std::set<std::string> seen;
      for (size_t i = 0; i < consumes->size(); ++i) {
        const Json& c = (*consumes)[i];
        const std::string ipath = Index(ccpath, i);
        if (!c.is_object()) {
          e.Invalid(ipath, Show(c), "must be an object");
          continue;
        }
        std::string set = String(e, c, "counterSet", ipath + ".counterSet");
        CheckLabel(e, ipath + ".counterSet", set);
        size_t before = e.size();
        CheckCounters(e, c, ipath);
        if (!set.empty() && !seen.insert(set).second) e.Duplicate(ipath, Show(set));
        if (set.empty() || e.size() != before) continue;
        auto declared = pool_counters.find(set);
        if (declared == pool_counters.end()) {
          e.Invalid(ipath + ".counterSet", Show(set),
                    "must be the name of a counter set in the sharedCounters of a ResourceSlice "
                    "of " +
                        pool_text);
          continue;
        }
        for (const auto& [counter, value] : c["counters"].items()) {
          if (declared->second.count(counter) == 0) {
            e.Invalid(Key(ipath + ".counters", counter), Show(counter),
                      "must be a counter of counter set " + Quote(set));
          }
        }
      }
    }
  }
  const bool has_name = Get(device, "nodeName") != nullptr;
  const bool has_selector = Get(device, "nodeSelector") != nullptr;
  const bool has_all = Get(device, "allNodes") != nullptr;
  if (per_device_nodes) {
    std::vector<std::string> set;
    if (has_name) {
      std::string node = String(e, device, "nodeName", path + ".nodeName");
      if (node.empty()) {
        e.Invalid(path + ".nodeName", "\"\"", "must not be empty");
      } else {
        set.push_back("`nodeName`");
        CheckSubdomain(e, path + ".nodeName", node);
      }
    }
    if (has_selector) {
      set.push_back("`nodeSelector`");
      CheckNodeSelector(e, device["nodeSelector"], path + ".nodeSelector");
    }
    if (has_all) {
      if (Bool(e, device, "allNodes", path + ".allNodes").value_or(false)) {
        set.push_back("`allNodes`");
      } else {
        e.Invalid(path + ".allNodes", "false", "must be either unset or set to true");
      }
    }
    const char* why =
        "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
        "`perDeviceNodeSelection` is set to true in the ResourceSlice spec";
    if (set.empty()) e.Required(path, why);
    if (set.size() > 1) {
      std::string shown;
      for (const auto& s : set) shown += (shown.empty() ? "" : ", ") + s;
      e.Invalid(path, Quote("{" + shown + "}"), why);
    }
  } else if (has_name || has_selector || has_all) {
    e.Invalid(path, "null",
              "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
              "`perDeviceNodeSelection` is set to true in the ResourceSlice spec");
  }
}

bool HasNonEmpty(const Json& device, const char* key) {
  const Json* v = Get(device, key);
  return v != nullptr && v->is_array() && !v->empty();
}

// --- claims ----------------------------------------------------------------------------------

void CheckSelectors(Errors& e, const Json& parent, const std::string& path) {
  const Json* selectors = List(e, parent, "selectors", path);
  if (selectors == nullptr) return;
  if (selectors->size() > kDraMaxSelectors) {
    return e.TooMany(path, selectors->size(), kDraMaxSelectors);
  }
  for (size_t i = 0; i < selectors->size(); ++i) {
    const std::string cel = Index(path, i) + ".cel";
    const Json* c = Map(e, (*selectors)[i], "cel", cel);
    if (c == nullptr) {
      if (Get((*selectors)[i], "cel") == nullptr) e.Required(cel);
      continue;
    }
    std::string expression = String(e, *c, "expression", cel + ".expression");
    if (expression.empty()) {
      e.Required(cel + ".expression");
    } else if (expression.size() > kMaxCelLength) {
      e.TooLong(cel + ".expression", kMaxCelLength);
    }
  }
}

void CheckAllocationMode(Errors& e, const Json& request, const std::string& path) {
  std::string mode = String(e, request, "allocationMode", path + ".allocationMode");
  std::optional<int64_t> count = Int(e, request, "count", path + ".count");
  if (mode == "All") {
    if (count.value_or(0) != 0) {
      e.Invalid(path + ".count", std::to_string(*count),
                "must not be specified when allocationMode is 'All'");
    }
  } else if (mode == "ExactCount" || mode.empty()) {
    // Defaulting made both explicit; a claim written without defaults counts 1.
    if (count.value_or(1) <= 0) {
      e.Invalid(path + ".count", std::to_string(*count), "must be greater than zero");
    }
  } else {
    e.NotSupported(path + ".allocationMode", Show(mode), {"All", "ExactCount"});
  }
}

void CheckCapacityRequests(Errors& e, const Json& request, const std::string& path) {
  const Json* capacity = Map(e, request, "capacity", path);
  if (capacity == nullptr) return;
  const Json* requests = Map(e, *capacity, "requests", path + ".requests");
  if (requests == nullptr) return;
  for (const auto& [name, value] : requests->items()) {
    CheckQualifiedName(e, path + ".requests", name);
    auto q = CheckQuantity(e, Key(path + ".requests", name), value);
    if (q && q->negative && q->mantissa != 0) {
      e.Invalid(Key(path + ".requests", name), Show(value), "must be greater than or equal to 0");
    }
  }
}

void CheckTolerations(Errors& e, const Json& request, const std::string& path) {
  const Json* tolerations = List(e, request, "tolerations", path);
  if (tolerations == nullptr) return;
  for (size_t i = 0; i < tolerations->size(); ++i) {
    const Json& t = (*tolerations)[i];
    const std::string tpath = Index(path, i);
    std::string op = String(e, t, "operator", tpath + ".operator");
    if (op == "Exists") {
      std::string value = String(e, t, "value", tpath + ".value");
      if (!value.empty())
        e.Invalid(tpath + ".value", Show(value), "must be empty for operator `Exists`");
    } else if (op.empty()) {
      e.Required(tpath + ".operator");
    } else if (op != "Equal") {
      e.NotSupported(tpath + ".operator", Show(op), {"Equal", "Exists"});
    }
    std::string effect = String(e, t, "effect", tpath + ".effect");
    if (!effect.empty() && effect != "NoSchedule" && effect != "NoExecute" && effect != "None") {
      e.NotSupported(tpath + ".effect", Show(effect), {"NoExecute", "NoSchedule", "None"});
    }
  }
}

// ExactDeviceRequest and DeviceSubRequest: a device class, selectors, how many, how much.
void CheckExactRequest(Errors& e, const Json& request, const std::string& path) {
  CheckSubdomain(e, path + ".deviceClassName",
                 String(e, request, "deviceClassName", path + ".deviceClassName"));
  CheckSelectors(e, request, path + ".selectors");
  CheckAllocationMode(e, request, path);
  CheckCapacityRequests(e, request, path + ".capacity");
  CheckTolerations(e, request, path + ".tolerations");
  Bool(e, request, "adminAccess", path + ".adminAccess");
}

// request name -> its subrequest names.
using RequestNames = std::map<std::string, std::set<std::string>>;

bool NamesRequest(const RequestNames& names, const std::string& ref) {
  std::vector<std::string_view> parts = Split(ref, '/');
  if (parts.size() > 2) return false;
  auto it = names.find(std::string(parts[0]));
  if (it == names.end()) return false;
  return parts.size() == 1 || it->second.count(std::string(parts[1])) > 0;
}

void CheckRequestRefs(Errors& e, const Json& parent, const std::string& path,
                      const RequestNames& names) {
  const Json* refs = List(e, parent, "requests", path);
  if (refs == nullptr) return;
  std::set<std::string> seen;
  for (size_t i = 0; i < refs->size(); ++i) {
    const Json& r = (*refs)[i];
    std::string ref = r.is_string() ? r.get<std::string>() : "";
    if (!NamesRequest(names, ref)) {
      e.Invalid(Index(path, i), Show(r),
                "must be the name of a request in the claim or the name of a request and a "
                "subrequest separated by '/'");
    } else if (!seen.insert(ref).second) {
      e.Duplicate(Index(path, i), Show(ref));
    }
  }
}

void CheckOpaque(Errors& e, const Json& config, const std::string& path) {
  const Json* opaque = Map(e, config, "opaque", path + ".opaque");
  if (opaque == nullptr) {
    if (Get(config, "opaque") == nullptr) e.Required(path + ".opaque");
    return;
  }
  CheckDriverName(e, path + ".opaque.driver",
                  String(e, *opaque, "driver", path + ".opaque.driver"));
  const Json* params = Get(*opaque, "parameters");
  if (params == nullptr) {
    e.Required(path + ".opaque.parameters");
  } else if (!params->is_object()) {
    e.Invalid(path + ".opaque.parameters", "\"<value omitted>\"", "must be a valid JSON object");
  }
}

RequestNames GatherRequestNames(const Json& devices) {
  RequestNames names;
  const Json* requests = Get(devices, "requests");
  if (requests == nullptr || !requests->is_array()) return names;
  for (const Json& r : *requests) {
    const Json* name = Get(r, "name");
    if (name == nullptr || !name->is_string()) continue;
    std::set<std::string>& subs = names[name->get<std::string>()];
    const Json* first = Get(r, "firstAvailable");
    if (first == nullptr || !first->is_array()) continue;
    for (const Json& s : *first) {
      const Json* sub = Get(s, "name");
      if (sub != nullptr && sub->is_string()) subs.insert(sub->get<std::string>());
    }
  }
  return names;
}

// DeviceClaim (ResourceClaimSpec.devices) at `path`.
void CheckDeviceClaim(Errors& e, const Json& spec, const std::string& spec_path) {
  const std::string path = spec_path + ".devices";
  const Json* devices = Map(e, spec, "devices", path);
  if (devices == nullptr) return;
  const std::string rpath = path + ".requests";
  if (const Json* requests = List(e, *devices, "requests", rpath)) {
    if (requests->size() > kDraMaxRequests) {
      e.TooMany(rpath, requests->size(), kDraMaxRequests);
    } else {
      std::set<std::string> seen;
      for (size_t i = 0; i < requests->size(); ++i) {
        const Json& r = (*requests)[i];
        const std::string ipath = Index(rpath, i);
        if (!r.is_object()) {
          e.Invalid(ipath, Show(r), "must be an object");
          continue;
        }
        std::string name = String(e, r, "name", ipath + ".name");
        CheckLabel(e, ipath + ".name", name);
        if (!name.empty() && !seen.insert(name).second) e.Duplicate(ipath, Show(name));
        const Json* exactly = Map(e, r, "exactly", ipath + ".exactly");
        const Json* first = List(e, r, "firstAvailable", ipath + ".firstAvailable");
        const bool has_first = first != nullptr && !first->empty();
        if (exactly == nullptr && !has_first) {
          e.Required(ipath, "exactly one of `exactly` or `firstAvailable` is required");
        } else if (exactly != nullptr && has_first) {
          e.Invalid(ipath, "null",
                    "exactly one of `exactly` or `firstAvailable` is required, but multiple "
                    "fields are set");
        } else if (exactly != nullptr) {
          CheckExactRequest(e, *exactly, ipath + ".exactly");
        } else if (first->size() > kDraMaxFirstAvailable) {
          e.TooMany(ipath + ".firstAvailable", first->size(), kDraMaxFirstAvailable);
        } else {
          std::set<std::string> subs;
          for (size_t j = 0; j < first->size(); ++j) {
            const Json& s = (*first)[j];
            const std::string spath = Index(ipath + ".firstAvailable", j);
            if (!s.is_object()) {
              e.Invalid(spath, Show(s), "must be an object");
              continue;
            }
            std::string sub = String(e, s, "name", spath + ".name");
            CheckLabel(e, spath + ".name", sub);
            if (!sub.empty() && !subs.insert(sub).second) e.Duplicate(spath, Show(sub));
            CheckExactRequest(e, s, spath);
          }
        }
      }
    }
  }
  const RequestNames names = GatherRequestNames(*devices);
  const std::string cpath = path + ".constraints";
  if (const Json* constraints = List(e, *devices, "constraints", cpath)) {
    if (constraints->size() > kMaxConstraints) {
      e.TooMany(cpath, constraints->size(), kMaxConstraints);
    } else {
      for (size_t i = 0; i < constraints->size(); ++i) {
        const Json& c = (*constraints)[i];
        const std::string ipath = Index(cpath, i);
        CheckRequestRefs(e, c, ipath + ".requests", names);
        const bool match = Get(c, "matchAttribute") != nullptr;
        const bool distinct = Get(c, "distinctAttribute") != nullptr;
        if (match == distinct) {
          const std::string why =
              "exactly one of \"matchAttribute\" or \"distinctAttribute\" is required";
          if (match) {
            e.Invalid(ipath, "null", why + ", but multiple fields are set");
          } else {
            e.Required(ipath, why);
          }
        }
      }
    }
  }
  const std::string gpath = path + ".config";
  if (const Json* configs = List(e, *devices, "config", gpath)) {
    if (configs->size() > kMaxConfigs) {
      e.TooMany(gpath, configs->size(), kMaxConfigs);
    } else {
      for (size_t i = 0; i < configs->size(); ++i) {
        CheckRequestRefs(e, (*configs)[i], Index(gpath, i) + ".requests", names);
        CheckOpaque(e, (*configs)[i], Index(gpath, i));
      }
    }
  }
}

void DefaultRequest(Json& request) {
  if (!request.is_object()) return;
  Json& mode = request["allocationMode"];
  if (mode.is_null() || mode == "") mode = "ExactCount";
  if (mode == "ExactCount" && (!request.contains("count") || request["count"].is_null())) {
    request["count"] = 1;
  }
  auto tolerations = request.find("tolerations");
  if (tolerations == request.end() || !tolerations->is_array()) return;
  for (Json& t : *tolerations) {
    if (t.is_object() &&
        (!t.contains("operator") || t["operator"].is_null() || t["operator"] == "")) {
      t["operator"] = "Equal";
    }
  }
}

bool IsUuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    const char c = s[i];
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

void CheckAllocation(Errors& e, const Json& allocation, const std::string& path,
                     const RequestNames& names) {
  if (!allocation.is_object()) return e.Invalid(path, Show(allocation), "must be an object");
  const Json* devices = Map(e, allocation, "devices", path + ".devices");
  if (devices == nullptr) return;
  const std::string rpath = path + ".devices.results";
  const Json* results = List(e, *devices, "results", rpath);
  if (results == nullptr) return;
  if (results->size() > kMaxResults) return e.TooMany(rpath, results->size(), kMaxResults);
  for (size_t i = 0; i < results->size(); ++i) {
    const Json& r = (*results)[i];
    const std::string ipath = Index(rpath, i);
    if (!r.is_object()) {
      e.Invalid(ipath, Show(r), "must be an object");
      continue;
    }
    std::string request = String(e, r, "request", ipath + ".request");
    if (!NamesRequest(names, request)) {
      e.Invalid(ipath + ".request", Show(request),
                "must be the name of a request in the claim or the name of a request and a "
                "subrequest separated by '/'");
    }
    CheckDriverName(e, ipath + ".driver", String(e, r, "driver", ipath + ".driver"));
    CheckPoolName(e, ipath + ".pool", String(e, r, "pool", ipath + ".pool"));
    CheckLabel(e, ipath + ".device", String(e, r, "device", ipath + ".device"));
    if (Get(r, "shareID") != nullptr) {
      std::string share = String(e, r, "shareID", ipath + ".shareID");
      if (!IsUuid(share)) {
        e.Invalid(ipath + ".shareID", Show(share),
                  "uid must be in RFC 4122 normalized form, "
                  "`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters");
      }
    }
    if (const Json* consumed = Map(e, r, "consumedCapacity", ipath + ".consumedCapacity")) {
      for (const auto& [name, value] : consumed->items()) {
        CheckQualifiedName(e, ipath + ".consumedCapacity", name);
        CheckQuantity(e, Key(ipath + ".consumedCapacity", name), value);
      }
    }
  }
}

const Json& SpecOf(const Json& obj) {
  static const Json kEmpty = Json::object();
  const Json* spec = Get(obj, "spec");
  return spec != nullptr && spec->is_object() ? *spec : kEmpty;
}

void CheckImmutableSpec(Errors& e, const Json& obj, const Json& old) {
  const Json* now = Get(obj, "spec");
  const Json* before = Get(old, "spec");
  const bool same = (now == nullptr && before == nullptr) ||
                    (now != nullptr && before != nullptr && *now == *before);
  if (!same) e.Invalid("spec", now == nullptr ? "null" : now->dump(), "field is immutable");
}

}  // namespace

FieldErrors ValidateResourceSlice(const Json& obj, const Json* old,
                                  const CounterSets& pool_counters) {
  FieldErrors out;
  Errors e(out);
  const Json& spec = SpecOf(obj);
  std::string driver = String(e, spec, "driver", "spec.driver");
  CheckDriverName(e, "spec.driver", driver);
  std::string pool_name;
  const Json* pool = Map(e, spec, "pool", "spec.pool");
  if (pool == nullptr) {
    e.Required("spec.pool.name");
    e.Invalid("spec.pool.resourceSliceCount", "0", "must be greater than zero");
  } else {
    pool_name = String(e, *pool, "name", "spec.pool.name");
    CheckPoolName(e, "spec.pool.name", pool_name);
    auto count = Int(e, *pool, "resourceSliceCount", "spec.pool.resourceSliceCount");
    if (count.value_or(0) <= 0 && (count || Get(*pool, "resourceSliceCount") == nullptr)) {
      e.Invalid("spec.pool.resourceSliceCount", std::to_string(count.value_or(0)),
                "must be greater than zero");
    }
    auto generation = Int(e, *pool, "generation", "spec.pool.generation");
    if (generation.value_or(0) < 0) {
      e.Invalid("spec.pool.generation", std::to_string(*generation),
                "must be greater than or equal to zero");
    }
  }
  if (old != nullptr) {
    const Json& old_spec = SpecOf(*old);
    auto immutable = [&](const std::string& path, const Json& now, const Json& before) {
      if (now != before) e.Invalid(path, Show(now), "field is immutable");
    };
    immutable("spec.driver", At(spec, {"driver"}), At(old_spec, {"driver"}));
    immutable("spec.pool.name", At(spec, {"pool", "name"}), At(old_spec, {"pool", "name"}));
    immutable("spec.nodeName", At(spec, {"nodeName"}), At(old_spec, {"nodeName"}));
  }
  std::vector<std::string> set;
  if (Get(spec, "nodeName") != nullptr) {
    std::string node = String(e, spec, "nodeName", "spec.nodeName");
    if (node.empty()) {
      e.Invalid("spec.nodeName", "\"\"", "must be either unset or set to a non-empty string");
    } else {
      set.push_back("`nodeName`");
      CheckSubdomain(e, "spec.nodeName", node);
    }
  }
  if (const Json* selector = Get(spec, "nodeSelector")) {
    set.push_back("`nodeSelector`");
    CheckNodeSelector(e, *selector, "spec.nodeSelector");
  }
  if (Get(spec, "allNodes") != nullptr) {
    if (Bool(e, spec, "allNodes", "spec.allNodes").value_or(false)) {
      set.push_back("`allNodes`");
    } else {
      e.Invalid("spec.allNodes", "false", "must be either unset or set to true");
    }
  }
  bool per_device = false;
  if (Get(spec, "perDeviceNodeSelection") != nullptr) {
    per_device =
        Bool(e, spec, "perDeviceNodeSelection", "spec.perDeviceNodeSelection").value_or(false);
    if (per_device) {
      set.push_back("`perDeviceNodeSelection`");
    } else {
      e.Invalid("spec.perDeviceNodeSelection", "false", "must be either unset or set to true");
    }
  }
  const char* one_of =
      "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
  if (set.empty()) e.Required("spec", one_of);
  if (set.size() > 1) {
    std::string shown;
    for (const auto& s : set) shown += (shown.empty() ? "" : ", ") + s;
    e.Invalid("spec", Quote("{" + shown + "}"),
              std::string(one_of) + ", but multiple fields are set");
  }
  const Json* devices = List(e, spec, "devices", "spec.devices");
  const Json* counters = List(e, spec, "sharedCounters", "spec.sharedCounters");
  if (devices != nullptr && counters != nullptr) {
    e.Invalid("spec", "\"\"", "only one of `sharedCounters` or `devices` is allowed");
  }
  if (devices != nullptr) {
    bool advanced = false;
    for (const Json& d : *devices) {
      advanced = advanced || HasNonEmpty(d, "taints") || HasNonEmpty(d, "consumesCounters");
    }
    const size_t max = advanced ? kDraMaxDevicesWithTaintsOrCounters : kDraMaxDevicesPerSlice;
    if (devices->size() > max) {
      e.TooMany("spec.devices", devices->size(), max);
    } else {
      const std::string pool_text = "driver " + Quote(driver) + " pool " + Quote(pool_name);
      std::set<std::string> seen;
      for (size_t i = 0; i < devices->size(); ++i) {
        const Json& d = (*devices)[i];
        CheckDevice(e, d, Index("spec.devices", i), per_device, pool_counters, pool_text);
        const Json* name = Get(d, "name");
        if (name != nullptr && name->is_string() && !name->get<std::string>().empty() &&
            !seen.insert(name->get<std::string>()).second) {
          e.Duplicate(Index("spec.devices", i), Show(*name));
        }
      }
    }
  }
  if (counters != nullptr) {
    if (counters->size() > kDraMaxCounterSets) {
      e.TooMany("spec.sharedCounters", counters->size(), kDraMaxCounterSets);
    } else {
      std::set<std::string> seen;
      for (size_t i = 0; i < counters->size(); ++i) {
        const Json& c = (*counters)[i];
        const std::string ipath = Index("spec.sharedCounters", i);
        if (!c.is_object()) {
          e.Invalid(ipath, Show(c), "must be an object");
          continue;
        }
        std::string name = String(e, c, "name", ipath + ".name");
        CheckLabel(e, ipath + ".name", name);
        CheckCounters(e, c, ipath);
        if (!name.empty() && !seen.insert(name).second) e.Duplicate(ipath, Show(name));
      }
    }
  }
  return out;
}

FieldErrors ValidateDeviceClass(const Json& obj) {
  FieldErrors out;
  Errors e(out);
  const Json& spec = SpecOf(obj);
  CheckSelectors(e, spec, "spec.selectors");
  if (const Json* configs = List(e, spec, "config", "spec.config")) {
    if (configs->size() > kMaxConfigs) {
      e.TooMany("spec.config", configs->size(), kMaxConfigs);
    } else {
      for (size_t i = 0; i < configs->size(); ++i) {
        CheckOpaque(e, (*configs)[i], Index("spec.config", i));
      }
    }
  }
  if (Get(spec, "extendedResourceName") != nullptr) {
    std::string name = String(e, spec, "extendedResourceName", "spec.extendedResourceName");
    // v1helper.IsExtendedResourceName: domain/name, not in kubernetes.io, not "requests.".
    std::vector<std::string_view> parts = Split(name, '/');
    bool ok = parts.size() == 2 && name.find("kubernetes.io/") == std::string::npos &&
              name.rfind("requests.", 0) != 0 && IsDns1123Subdomain(parts[0]) &&
              !parts[1].empty() && parts[1].size() <= 63;
    if (ok) {
      const std::string_view n = parts[1];
      auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
      ok = alnum(n.front()) && alnum(n.back()) && std::all_of(n.begin(), n.end(), [&](char c) {
             return alnum(c) || c == '-' || c == '_' || c == '.';
           });
    }
    if (!ok) {
      e.Invalid("spec.extendedResourceName", Show(name), "must be a valid extended resource name");
    }
  }
  return out;
}

FieldErrors ValidateResourceClaim(const Json& obj, const Json* old) {
  FieldErrors out;
  Errors e(out);
  if (old != nullptr) {
    CheckImmutableSpec(e, obj, *old);
    return out;
  }
  CheckDeviceClaim(e, SpecOf(obj), "spec");
  return out;
}

FieldErrors ValidateResourceClaimTemplate(const Json& obj, const Json* old) {
  FieldErrors out;
  Errors e(out);
  if (old != nullptr) {
    CheckImmutableSpec(e, obj, *old);
    return out;
  }
  const Json& spec = SpecOf(obj);
  if (const Json* meta = Map(e, spec, "metadata", "spec.metadata")) {
    for (const char* key : {"labels", "annotations"}) {
      const Json* m = Map(e, *meta, key, "spec.metadata." + std::string(key));
      if (m == nullptr) continue;
      for (const auto& [k, v] : m->items()) {
        if (!v.is_string())
          e.Invalid(Key("spec.metadata." + std::string(key), k), Show(v), "must be a string");
      }
    }
  }
  const Json* inner = Map(e, spec, "spec", "spec.spec");
  CheckDeviceClaim(e, inner != nullptr ? *inner : Json::object(), "spec.spec");
  return out;
}

FieldErrors ValidateResourceClaimStatus(const Json& obj, const Json& old) {
  FieldErrors out;
  Errors e(out);
  const Json* status = Get(obj, "status");
  if (status == nullptr) return out;
  if (!status->is_object()) {
    e.Invalid("status", Show(*status), "must be an object");
    return out;
  }
  const Json* allocation = Get(*status, "allocation");
  if (const Json* reserved = List(e, *status, "reservedFor", "status.reservedFor")) {
    if (reserved->size() > kMaxReservedFor) {
      e.TooMany("status.reservedFor", reserved->size(), kMaxReservedFor);
    } else {
      std::set<std::string> uids;
      for (size_t i = 0; i < reserved->size(); ++i) {
        const Json& r = (*reserved)[i];
        const std::string ipath = Index("status.reservedFor", i);
        for (const char* key : {"resource", "name", "uid"}) {
          if (String(e, r, key, ipath + "." + key).empty()) e.Required(ipath + "." + key);
        }
        const Json* uid = Get(r, "uid");
        if (uid != nullptr && uid->is_string() && !uids.insert(uid->get<std::string>()).second) {
          e.Duplicate(ipath, Show(*uid));
        }
      }
      if (!reserved->empty() && allocation == nullptr) {
        e.Forbidden("status.reservedFor", "may not be specified when `allocated` is not set");
      }
    }
  }
  const Json* old_status = Get(old, "status");
  const Json* old_allocation = old_status != nullptr ? Get(*old_status, "allocation") : nullptr;
  if (allocation != nullptr && old_allocation != nullptr) {
    if (*allocation != *old_allocation) {
      e.Invalid("status.allocation", allocation->dump(), "field is immutable");
    }
  } else if (allocation != nullptr) {
    const Json* devices = Get(SpecOf(obj), "devices");
    CheckAllocation(e, *allocation, "status.allocation",
                    GatherRequestNames(devices != nullptr ? *devices : Json::object()));
  }
  return out;
}

void DefaultDeviceClaimSpec(Json& spec) {
  if (!spec.is_object()) return;
  auto devices = spec.find("devices");
  if (devices == spec.end() || !devices->is_object()) return;
  auto requests = devices->find("requests");
  if (requests == devices->end() || !requests->is_array()) return;
  for (Json& r : *requests) {
    if (!r.is_object()) continue;
    auto exactly = r.find("exactly");
    if (exactly != r.end() && exactly->is_object()) DefaultRequest(*exactly);
    auto first = r.find("firstAvailable");
    if (first == r.end() || !first->is_array()) continue;
    for (Json& s : *first) DefaultRequest(s);
  }
}

CounterSets SharedCounterSets(const Json& slice) {
  CounterSets sets;
  const Json* counters = Get(SpecOf(slice), "sharedCounters");
  if (counters == nullptr || !counters->is_array()) return sets;
  for (const Json& c : *counters) {
    const Json* name = Get(c, "name");
    const Json* inner = Get(c, "counters");
    if (name == nullptr || !name->is_string() || inner == nullptr || !inner->is_object()) continue;
    std::set<std::string>& names = sets[name->get<std::string>()];
    for (const auto& [counter, value] : inner->items()) names.insert(counter);
  }
  return sets;
}

bool IsDraType(const ResourceType& type) { return type.group == "resource.k8s.io"; }

FieldErrors AdmitDraWrite(const ResourceType& type, Json& obj, const Json* old,
                          const CounterSets& pool_counters) {
  if (!IsDraType(type) || !obj.is_object()) return {};
  const std::string& kind = type.kind;
  if (kind == "ResourceClaim") {
    if (old == nullptr) {
      obj.erase("status");  // status is written through /status only
      if (obj.contains("spec")) DefaultDeviceClaimSpec(obj["spec"]);
      return ValidateResourceClaim(obj, nullptr);
    }
    if (obj.contains("spec")) DefaultDeviceClaimSpec(obj["spec"]);
    FieldErrors errors = ValidateResourceClaim(obj, old);
    if (At(obj, {"status"}) != At(*old, {"status"})) {
      FieldErrors status = ValidateResourceClaimStatus(obj, *old);
      errors.insert(errors.end(), status.begin(), status.end());
    }
    return errors;
  }
  if (kind == "ResourceClaimTemplate") {
    if (obj.contains("spec") && obj["spec"].is_object() && obj["spec"].contains("spec")) {
      DefaultDeviceClaimSpec(obj["spec"]["spec"]);
    }
    return ValidateResourceClaimTemplate(obj, old);
  }
  // DeviceClass and ResourceSlice count their spec changes in metadata.generation.
  Json& meta = obj["metadata"];
  if (old == nullptr) {
    meta["generation"] = 1;
  } else {
    const Json& old_generation = At(*old, {"metadata", "generation"});
    int64_t generation = old_generation.is_number_integer() ? old_generation.get<int64_t>() : 0;
    if (At(obj, {"spec"}) != At(*old, {"spec"})) ++generation;
    meta["generation"] = generation;
  }
  if (kind == "DeviceClass") return ValidateDeviceClass(obj);
  if (kind == "ResourceSlice") return ValidateResourceSlice(obj, old, pool_counters);
  return {};
}

std::string JoinFieldErrors(const FieldErrors& errors) {
  if (errors.size() == 1) return errors[0];
  std::string out = "[";
  for (size_t i = 0; i < errors.size(); ++i) out += (i ? ", " : "") + errors[i];
  return out + "]";
}

}  // namespace hami::sim
