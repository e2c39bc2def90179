#include "common/flags.h"

#include <optional>
#include <utility>

namespace hami::flags {
namespace {

// The option `name` in the current (sub)command or one of its parents.
std::optional<Arity> FindLong(const std::vector<const FlagSet*>& chain, std::string_view name) {
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    auto found = (*it)->long_options.find(name);
    if (found != (*it)->long_options.end()) return found->second;
  }
  return std::nullopt;
}

std::optional<Arity> FindShort(const std::vector<const FlagSet*>& chain, char name) {
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    auto found = (*it)->short_options.find(name);
    if (found != (*it)->short_options.end()) return found->second;
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> NormalizeGoArgs(const FlagSet& set, const std::vector<std::string>& args) {
  std::vector<std::string> out;
  out.reserve(args.size());
  if (args.empty()) return out;
  out.push_back(args[0]);
  std::vector<const FlagSet*> chain{&set};
  size_t i = 1;
  // Copies args[i..] unchanged.
  const auto copy_rest = [&] {
    for (; i < args.size(); ++i) out.push_back(args[i]);
  };
  while (i < args.size()) {
    const std::string& arg = args[i];
    if (arg == "--") return copy_rest(), out;
    if (arg.size() < 2 || arg[0] != '-') {  // a positional argument ("-" is one too)
      if (chain.back()->stop_at_first_positional) return copy_rest(), out;
      auto sub = chain.back()->subcommands.find(arg);
      if (sub != chain.back()->subcommands.end()) chain.push_back(&sub->second);
      out.push_back(arg);
      ++i;
      continue;
    }
    const bool two_dashes = arg[1] == '-';
    const std::string_view body = std::string_view(arg).substr(two_dashes ? 2 : 1);
    const size_t eq = body.find('=');
    const std::string_view name = body.substr(0, eq);
    if (name.empty() || name[0] == '-') {  // "---x", "-=x", "--=x": CLI11 reports them
      out.push_back(arg);
      ++i;
      continue;
    }
    std::optional<Arity> arity = FindLong(chain, name);
    if (!arity && !two_dashes && name.size() == 1) {
      // A short-only option: "-x=value" becomes "-x" "value"; "-x value" stays.
      if (auto s = FindShort(chain, name[0])) {
        out.push_back(arg.substr(0, 2));
        if (eq != std::string_view::npos) {
          out.emplace_back(body.substr(eq + 1));
        } else if (*s == Arity::kOne && i + 1 < args.size()) {
          out.push_back(args[++i]);  // its value, as it is
        }
        ++i;
        continue;
      }
    }
    if (!arity) {  // unknown: left for CLI11 to report
      out.push_back(arg);
      ++i;
      continue;
    }
    std::string flag = "--" + std::string(body);
    if (eq == std::string_view::npos && *arity == Arity::kOne && i + 1 < args.size()) {
      flag += "=" + args[++i];  // "--name value": the value as it is, even "-1"
    }
    out.push_back(std::move(flag));
    ++i;
  }
  return out;
}

GoStyleArgs::GoStyleArgs(const FlagSet& set, int argc, const char* const* argv) {
  std::vector<std::string> in;
  for (int i = 0; i < argc; ++i) in.emplace_back(argv[i] != nullptr ? argv[i] : "");
  args_ = NormalizeGoArgs(set, in);
  pointers_.reserve(args_.size() + 1);
  for (const std::string& a : args_) pointers_.push_back(a.c_str());
  pointers_.push_back(nullptr);
}

std::vector<std::string> IgnoredFlags::Messages() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) {
    if (e.count() == 0) continue;
    const std::string value = e.flag.takes_value ? e.value : (e.on ? "true" : "false");
    out.push_back("--" + e.flag.name + "=" + value + " ignored: " + e.flag.help);
  }
  return out;
}

std::vector<IgnoredFlag> KlogFlags() {
  const std::string why = "klog's; our logs go to stderr, set by -v alone";
  std::vector<IgnoredFlag> out;
  for (const char* name : {"add_dir_header", "alsologtostderr", "logtostderr", "one_output",
                           "skip_headers", "skip_log_headers"}) {
    out.push_back({name, false, why});
  }
  for (const char* name : {"log_backtrace_at", "log_dir", "log_file", "log_file_max_size",
                           "stderrthreshold", "vmodule"}) {
    out.push_back({name, true, why});
  }
  return out;
}

}  // namespace hami::flags
