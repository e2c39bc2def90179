// Go-style command lines for our CLI11 binaries (the drop-in rule: HAMi's chart and users pass
// flags the way Go's flag/pflag packages read them).
//
// NormalizeGoArgs rewrites an argv before CLI11 parses it:
//   -name[=value]   -> --name[=value]   when `name` (2+ letters) is a long option of the app
//   -v=4            -> --v=4            when `v` is also a long option; -x=val -> -x val when
//                                       `x` is a short option only
//   --name value    -> --name=value     for a one-value option, so that a value starting with
//   -name value     -> --name=value     '-' is taken as Go takes it (`--kube-qps -1`)
//   --              ends flag parsing: it and everything after it are kept as they are
// Values and positional arguments are never rewritten; unknown names are left to CLI11 to
// report. A positional argument naming a subcommand switches to that subcommand's options.
//
// GoStyleArgs collects the option names from a CLI::App (a template, so this header does not
// pull CLI11 in), makes --help show each option's default (ShowDefaults: every binary builds its
// app, then constructs GoStyleArgs, so this is the one place) and keeps the rewritten argv alive
// for CLI11_PARSE:
//   hami::flags::GoStyleArgs args(app, argc, argv);
//   CLI11_PARSE(app, args.argc(), args.argv());
//
// IgnoredFlags declares HAMi flags we accept and do not use (each in --help, under "Accepted
// for HAMi compatibility (ignored)"); Messages() after parsing names each one given.
#ifndef HAMI_COMMON_FLAGS_H_
#define HAMI_COMMON_FLAGS_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace hami::flags {

enum class Arity { kNone, kOne, kMany };  // a flag, one value, several values

struct FlagSet {
  std::map<std::string, Arity, std::less<>> long_options;  // without the leading "--"
  std::map<char, Arity> short_options;                     // without the leading "-"
  std::map<std::string, FlagSet, std::less<>> subcommands;
  // Go's flag package (not pflag): the first positional argument ends flag parsing.
  bool stop_at_first_positional = false;
};

// args[0] is the program name and is kept.
std::vector<std::string> NormalizeGoArgs(const FlagSet& set, const std::vector<std::string>& args);

// The names of a CLI::App's options, its option groups' and (nested) its subcommands'.
template <typename App>
FlagSet FlagSetOf(const App& app) {
  FlagSet set;
  for (const auto* opt : app.get_options()) {
    const int items = opt->get_items_expected_max();
    const Arity arity = items <= 0 ? Arity::kNone : items == 1 ? Arity::kOne : Arity::kMany;
    for (const std::string& n : opt->get_lnames()) set.long_options[n] = arity;
    for (const std::string& n : opt->get_snames()) {
      if (n.size() == 1) set.short_options[n[0]] = arity;
    }
  }
  for (const auto* sub : app.get_subcommands([](const App*) { return true; })) {
    FlagSet child = FlagSetOf(*sub);
    if (sub->get_name().empty()) {  // an option group: its options are the app's own
      set.long_options.merge(child.long_options);
      set.short_options.merge(child.short_options);
      set.subcommands.merge(child.subcommands);
    } else {
      set.subcommands[sub->get_name()] = std::move(child);
    }
  }
  return set;
}

// Records the current value of each option that takes a value (the app's, its option groups',
// its subcommands') as the default --help shows ("--kube-qps FLOAT=50"), unless one is set
// already. Call it after the options are added and before parsing, while the variables hold
// their defaults. An empty value (an unset path) shows no default.
template <typename App>
void ShowDefaults(App& app) {
  for (auto* opt : app.get_options()) {
    if (opt->get_default_str().empty()) opt->capture_default_str();
  }
  for (auto* sub : app.get_subcommands([](App*) { return true; })) ShowDefaults(*sub);
}

class GoStyleArgs {
 public:
  GoStyleArgs(const FlagSet& set, int argc, const char* const* argv);
  template <typename App>
  requires(!std::is_same_v<App, FlagSet>)  // a non-const FlagSet takes the constructor above
      GoStyleArgs(App& app, int argc, const char* const* argv)
      : GoStyleArgs((ShowDefaults(app), FlagSetOf(app)), argc, argv) {}
  GoStyleArgs(const GoStyleArgs&) = delete;
  GoStyleArgs& operator=(const GoStyleArgs&) = delete;

  int argc() const { return static_cast<int>(args_.size()); }
  const char* const* argv() const { return pointers_.data(); }
  const std::vector<std::string>& args() const { return args_; }

 private:
  std::vector<std::string> args_;
  std::vector<const char*> pointers_;  // into args_, then nullptr
};

struct IgnoredFlag {
  std::string name;  // without the leading "--"
  bool takes_value;  // false: a boolean flag (--name, --name=true|false)
  std::string help;  // what it is in HAMi and why we do not use it
};

class IgnoredFlags {
 public:
  inline static const char* const kGroup = "Accepted for HAMi compatibility (ignored)";

  template <typename App>
  void Add(App& app, const std::vector<IgnoredFlag>& flags) {
    for (const IgnoredFlag& f : flags) {
      Entry& e = entries_.emplace_back();
      e.flag = f;
      auto* opt = f.takes_value ? app.add_option("--" + f.name, e.value, f.help)
                                : app.add_flag("--" + f.name, e.on, f.help);
      opt->group(kGroup);
      e.count = [opt] { return opt->count(); };
    }
  }

  // One line per ignored flag on the command line: "--debug=true ignored: <help>".
  std::vector<std::string> Messages() const;

 private:
  struct Entry {
    IgnoredFlag flag;
    bool on = false;
    std::string value;
    std::function<std::size_t()> count;
  };
  std::deque<Entry> entries_;  // stable addresses: CLI11 writes into them
};

// klog's flags (HAMi's binaries register klog.InitFlags): accepted and ignored by ours, whose
// logging is -v alone.
std::vector<IgnoredFlag> KlogFlags();

}  // namespace hami::flags

#endif  // HAMI_COMMON_FLAGS_H_
