// libvgpu.so must run inside any container: its run-time dependencies are pinned to libc,
// libdl, libpthread and the dynamic loader. Reads the ELF dynamic section directly.
#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "tests/vgpu/test_env.h"

namespace hami::vgpu {
namespace {

std::vector<std::string> NeededLibraries(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> needed;
  if (file.size() < sizeof(Elf64_Ehdr)) return needed;
  Elf64_Ehdr eh;
  std::memcpy(&eh, file.data(), sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) {
    return needed;
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  for (int i = 0; i < eh.e_shnum; ++i) {
    std::memcpy(&sections[i], file.data() + eh.e_shoff + i * eh.e_shentsize, sizeof(Elf64_Shdr));
  }
  for (const Elf64_Shdr& sh : sections) {
    if (sh.sh_type != SHT_DYNAMIC) continue;
    const Elf64_Shdr& strtab = sections[sh.sh_link];
    for (std::size_t off = 0; off + sizeof(Elf64_Dyn) <= sh.sh_size; off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn dyn;
      std::memcpy(&dyn, file.data() + sh.sh_offset + off, sizeof(dyn));
      if (dyn.d_tag == DT_NULL) break;
      if (dyn.d_tag == DT_NEEDED)
        needed.emplace_back(file.data() + strtab.sh_offset + dyn.d_un.d_val);
    }
  }
  return needed;
}

TEST(ElfNeededTest, OnlyLibcLibdlLibpthreadAndTheLoader) {
  std::vector<std::string> needed = NeededLibraries(testing::LibPath());
  ASSERT_FALSE(needed.empty()) << "cannot read " << testing::LibPath();
  const std::set<std::string> allowed = {"libc.so.6", "libdl.so.2", "libpthread.so.0",
                                         "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"};
  for (const std::string& lib : needed) EXPECT_TRUE(allowed.count(lib)) << lib;
  EXPECT_TRUE(std::set<std::string>(needed.begin(), needed.end()).count("libc.so.6"));
}

}  // namespace
}  // namespace hami::vgpu
