#include "vgpu/env.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "vgpu/log.h"

namespace hami::vgpu {
namespace {

void Report(ErrorSink sink, void* ctx, const char* message) {
  if (sink != nullptr) sink(ctx, message);
}

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Reads an optional size variable; returns true when it was set and valid.
bool ReadSize(EnvLookup lookup, void* lctx, ErrorSink sink, void* ectx, const char* name,
              std::uint64_t* out) {
  const char* text = lookup(lctx, name);
  if (text == nullptr) return false;
  char err[256];
  if (!ParseSize(name, text, out, err, sizeof(err))) {
    Report(sink, ectx, err);
    return false;
  }
  return true;
}

bool ReadInt(EnvLookup lookup, void* lctx, ErrorSink sink, void* ectx, const char* name, int* out) {
  const char* text = lookup(lctx, name);
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  errno = 0;
  long value = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < -1000000 || value > 1000000) {
    char err[256];
    std::snprintf(err, sizeof(err), "%s: invalid integer \"%.100s\", ignored", name, text);
    Report(sink, ectx, err);
    return false;
  }
  *out = static_cast<int>(value);
  return true;
}

int ParsePolicy(const char* text) {
  if (text == nullptr) return kPolicyDefault;
  if (std::strcmp(text, "FORCE") == 0 || std::strcmp(text, "force") == 0) return kPolicyForce;
  if (std::strcmp(text, "DISABLE") == 0 || std::strcmp(text, "disable") == 0) {
    return kPolicyDisable;
  }
  return kPolicyDefault;
}

const char* ProcessEnvLookup(void* /*ctx*/, const char* name) { return std::getenv(name); }

void LogErrorSink(void* /*ctx*/, const char* message) { VGPU_ERROR("%s", message); }

}  // namespace

bool ParseSize(const char* name, const char* text, std::uint64_t* out, char* err,
               std::size_t errcap) {
  const char* p = text;
  if (*p == '\0' || IsBlank(*p) || *p == '-' || *p == '+') {
    std::snprintf(err, errcap, "%s: invalid size \"%.100s\"", name, text);
    return false;
  }
  char* end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(p, &end, 0);
  if (end == p || errno == ERANGE) {
    std::snprintf(err, errcap, "%s: invalid size \"%.100s\"", name, text);
    return false;
  }
  std::uint64_t scale = 1;
  if (*end != '\0') {
    switch (*end) {
      case 'k':
      case 'K':
        scale = 1ULL << 10;
        break;
      case 'm':
      case 'M':
        scale = 1ULL << 20;
        break;
      case 'g':
      case 'G':
        scale = 1ULL << 30;
        break;
      default:
        std::snprintf(err, errcap, "%s: invalid size suffix in \"%.100s\" (want k, m or g)", name,
                      text);
        return false;
    }
    if (end[1] != '\0') {
      std::snprintf(err, errcap, "%s: trailing characters in \"%.100s\"", name, text);
      return false;
    }
  }
  if (value > UINT64_MAX / scale) {
    std::snprintf(err, errcap, "%s: size \"%.100s\" overflows 64 bits", name, text);
    return false;
  }
  *out = value * scale;
  return true;
}

void LoadConfig(EnvLookup lookup, void* lctx, ErrorSink sink, void* ectx, VgpuConfig* out) {
  std::memset(out, 0, sizeof(*out));
  std::uint64_t fallback = 0;
  ReadSize(lookup, lctx, sink, ectx, "CUDA_DEVICE_MEMORY_LIMIT", &fallback);
  std::uint64_t sm_fallback = 0;
  ReadSize(lookup, lctx, sink, ectx, "CUDA_DEVICE_SM_LIMIT", &sm_fallback);
  for (int i = 0; i < kMaxDevices; ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "CUDA_DEVICE_MEMORY_LIMIT_%d", i);
    std::uint64_t value = fallback;
    ReadSize(lookup, lctx, sink, ectx, name, &value);
    out->memory_limit[i] = value;
    std::snprintf(name, sizeof(name), "CUDA_DEVICE_SM_LIMIT_%d", i);
    std::uint64_t sm = sm_fallback;
    ReadSize(lookup, lctx, sink, ectx, name, &sm);
    // 0 means "not set" for the SM share, as in HAMi-core.
    out->sm_limit[i] = (sm == 0) ? 100 : sm;
  }
  const char* path = lookup(lctx, "CUDA_DEVICE_MEMORY_SHARED_CACHE");
  if (path == nullptr || *path == '\0') path = kDefaultCachePath;
  if (std::strlen(path) >= sizeof(out->cache_path)) {
    char err[256];
    std::snprintf(err, sizeof(err), "CUDA_DEVICE_MEMORY_SHARED_CACHE: path \"%.100s...\" too long",
                  path);
    Report(sink, ectx, err);
    path = kDefaultCachePath;
  }
  std::snprintf(out->cache_path, sizeof(out->cache_path), "%s", path);
  out->policy = ParsePolicy(lookup(lctx, "GPU_CORE_UTILIZATION_POLICY"));
  out->priority = 1;
  ReadInt(lookup, lctx, sink, ectx, "CUDA_TASK_PRIORITY", &out->priority);
  out->log_level = 2;
  ReadInt(lookup, lctx, sink, ectx, "LIBCUDA_LOG_LEVEL", &out->log_level);
  out->record_kernel_interval_s = 1;
  ReadInt(lookup, lctx, sink, ectx, "RECORD_KERNEL_INTERVAL", &out->record_kernel_interval_s);
  if (out->record_kernel_interval_s < 1) out->record_kernel_interval_s = 1;
}

void LoadConfigFromProcessEnv(VgpuConfig* out) {
  LoadConfig(ProcessEnvLookup, nullptr, LogErrorSink, nullptr, out);
}

void LoadConfigFromLimitsFile(const LimitsFile& file, VgpuConfig* out) {
  LoadConfig(LimitsFileLookup, const_cast<LimitsFile*>(&file), LogErrorSink, nullptr, out);
  out->from_limits_file = true;
}

bool IsLimitVariable(const char* name) {
  static const char* const kExact[] = {"CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_SM_LIMIT",
                                       "CUDA_DEVICE_MEMORY_SHARED_CACHE",
                                       "GPU_CORE_UTILIZATION_POLICY", "CUDA_TASK_PRIORITY"};
  for (const char* exact : kExact) {
    if (std::strcmp(name, exact) == 0) return true;
  }
  static const char* const kIndexed[] = {"CUDA_DEVICE_MEMORY_LIMIT_", "CUDA_DEVICE_SM_LIMIT_"};
  for (const char* prefix : kIndexed) {
    std::size_t n = std::strlen(prefix);
    if (std::strncmp(name, prefix, n) != 0) continue;
    const char* idx = name + n;
    if (idx[0] >= '0' && idx[0] <= '9' && idx[1] == '\0') return true;
    if (idx[0] == '1' && idx[1] >= '0' && idx[1] <= '5' && idx[2] == '\0') return true;
  }
  return false;
}

bool ParseLimitsFile(const char* text, std::size_t len, LimitsFile* out, char* err,
                     std::size_t errcap) {
  out->count = 0;
  std::size_t pos = 0;
  for (int line_no = 1; pos < len; ++line_no) {
    std::size_t end = pos;
    while (end < len && text[end] != '\n') ++end;
    const char* b = text + pos;
    const char* e = text + end;
    pos = end + 1;
    while (b < e && IsBlank(*b)) ++b;
    while (e > b && IsBlank(e[-1])) --e;
    if (b == e || *b == '#') continue;
    const char* eq = static_cast<const char*>(std::memchr(b, '=', static_cast<std::size_t>(e - b)));
    std::size_t name_len = eq ? static_cast<std::size_t>(eq - b) : 0;
    std::size_t value_len = eq ? static_cast<std::size_t>(e - eq - 1) : 0;
    if (eq == nullptr || name_len == 0 || name_len >= sizeof(out->names[0]) ||
        value_len >= sizeof(out->values[0]) || std::memchr(b, '\0', e - b) != nullptr) {
      std::snprintf(err, errcap, "%s line %d: want NAME=VALUE, got \"%.*s\"", kLimitsFileName,
                    line_no, static_cast<int>(e - b > 100 ? 100 : e - b), b);
      return false;
    }
    char name[sizeof(out->names[0])];
    std::memcpy(name, b, name_len);
    name[name_len] = '\0';
    if (!IsLimitVariable(name)) {
      std::snprintf(err, errcap, "%s line %d: unknown variable \"%s\"", kLimitsFileName, line_no,
                    name);
      return false;
    }
    if (LimitsFileLookup(out, name) != nullptr) {
      std::snprintf(err, errcap, "%s line %d: \"%s\" set twice", kLimitsFileName, line_no, name);
      return false;
    }
    if (out->count == kLimitsFileMaxEntries) {
      std::snprintf(err, errcap, "%s line %d: more than %d entries", kLimitsFileName, line_no,
                    kLimitsFileMaxEntries);
      return false;
    }
    std::memcpy(out->names[out->count], name, name_len + 1);
    std::memcpy(out->values[out->count], eq + 1, value_len);
    out->values[out->count][value_len] = '\0';
    ++out->count;
  }
  return true;
}

const char* LimitsFileLookup(void* ctx, const char* name) {
  if (!IsLimitVariable(name)) return std::getenv(name);
  const auto* file = static_cast<const LimitsFile*>(ctx);
  for (int i = 0; i < file->count; ++i) {
    if (std::strcmp(file->names[i], name) == 0) return file->values[i];
  }
  return nullptr;
}

int SplitVisibleDevices(const char* text, char (*tokens)[HAMI_REGION_UUID_LEN], int max) {
  int count = 0;
  const char* p = text;
  while (*p != '\0' && count < max) {
    const char* comma = std::strchr(p, ',');
    const char* end = comma ? comma : p + std::strlen(p);
    const char* b = p;
    const char* e = end;
    while (b < e && IsBlank(*b)) ++b;
    while (e > b && IsBlank(e[-1])) --e;
    std::size_t len = static_cast<std::size_t>(e - b);
    if (len >= HAMI_REGION_UUID_LEN) len = HAMI_REGION_UUID_LEN - 1;
    std::memcpy(tokens[count], b, len);
    tokens[count][len] = '\0';
    ++count;
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return count;
}

int ResolveVisibleDevice(const char* token, const char (*uuids)[HAMI_REGION_UUID_LEN], int count) {
  if (token[0] >= '0' && token[0] <= '9') {
    char* end = nullptr;
    long index = std::strtol(token, &end, 10);
    if (*end != '\0' || index < 0 || index >= count) return -1;
    return static_cast<int>(index);
  }
  if (std::strncmp(token, "GPU-", 4) != 0 || token[4] == '\0') return -1;
  std::size_t len = std::strlen(token);
  int found = -1;
  for (int i = 0; i < count; ++i) {
    if (std::strncmp(uuids[i], token, len) == 0) {
      if (found >= 0) return -1;  // An ambiguous prefix selects nothing, as in CUDA.
      found = i;
    }
  }
  return found;
}

}  // namespace hami::vgpu
