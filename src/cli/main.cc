// hamictl: the operator's tool for HAMi annotations.
//   hamictl decode KIND VALUE   annotation value -> JSON with every field explicit
//   hamictl encode KIND JSON    JSON -> the exact annotation value
// VALUE/JSON may be "-" to read standard input. Exit 0 on success, 1 on bad input (message on
// stderr), 2 on bad usage.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "cli/kinds.h"
#include "common/flags.h"
#include "common/strings.h"

namespace {

void Usage(std::FILE* out) {
  std::fprintf(
      out,
      "hamictl: decode and encode HAMi annotation values.\n\n"
      "Usage:\n"
      "  hamictl decode KIND VALUE   print VALUE as JSON with every field explicit\n"
      "  hamictl encode KIND JSON    print the exact annotation value for JSON\n"
      "  hamictl kinds               list the kinds\n"
      "  hamictl --help              this text\n\n"
      "VALUE or JSON may be \"-\" to read standard input (a trailing newline is dropped).\n"
      "encode accepts what decode printed. Exit status: 0 ok, 1 bad input, 2 bad usage.\n\n"
      "Kinds:\n");
  for (const auto& k : hami::cli::Kinds()) {
    std::fprintf(out, "  %-22s %s\n", k.name.c_str(), k.help.c_str());
  }
}

std::string ReadArg(const std::string& arg) {
  if (arg != "-") return arg;
  std::string in((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (!in.empty() && in.back() == '\n') in.pop_back();
  return in;
}

}  // namespace

int main(int argc, char** argv_in) {
  // Go-style -help as --help; flags end at the verb (Go's flag package), so values stay as typed.
  hami::flags::FlagSet set;
  set.long_options = {{"help", hami::flags::Arity::kNone}};
  set.short_options = {{'h', hami::flags::Arity::kNone}};
  set.stop_at_first_positional = true;
  const hami::flags::GoStyleArgs args(set, argc, argv_in);
  const char* const* argv = args.argv();
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    Usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string verb = argv[1];
  if (verb == "kinds") {
    for (const auto& k : hami::cli::Kinds()) std::printf("%s\n", k.name.c_str());
    return 0;
  }
  if ((verb != "decode" && verb != "encode") || argc != 4) {
    std::fprintf(stderr, "hamictl: expected 'decode KIND VALUE' or 'encode KIND JSON'\n");
    Usage(stderr);
    return 2;
  }
  std::string kind_name = argv[2];
  for (const auto& k : hami::cli::Kinds()) {
    if (k.name != kind_name) continue;
    std::string input = ReadArg(argv[3]);
    auto r = verb == "decode" ? k.decode(input) : k.encode(input);
    if (!r) {
      std::fprintf(stderr, "hamictl %s %s: %s\n", verb.c_str(), kind_name.c_str(),
                   hami::EscapeTerminal(r.error(), /*keep_newlines=*/true).c_str());
      return 1;
    }
    // Decoded values come from cluster objects: no control character reaches the terminal.
    const std::string out = hami::EscapeTerminal(*r, /*keep_newlines=*/true);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  std::fprintf(stderr, "hamictl: unknown kind \"%s\" (see 'hamictl kinds')\n", kind_name.c_str());
  return 2;
}
