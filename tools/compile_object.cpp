// `kiln compile`'s compile of the model source (tools/compile_object.h).
#include "compile_object.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "codegen/file_cache.h"
#include "codegen/process.h"
#include "compile_codegen.h"
#include "graph/file_io.h"
#include "graph/ir.h"

namespace kiln::cli {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (f) f.write(content.data(), static_cast<std::streamsize>(content.size()));
  if (!f || !f.flush())
    throw graph::Error("cannot write '" + path.string() + "': " + std::strerror(errno));
}

// The compiler's -MMD output with the staging directory's own files left out, for NAME.a.
std::string depfile_for(const fs::path& compiler_deps, const fs::path& staging,
                        const fs::path& target) {
  std::ifstream f(compiler_deps);
  std::stringstream buf;
  buf << f.rdbuf();
  std::string text = buf.str();
  const size_t colon = text.find(": ");
  if (colon == std::string::npos)
    throw graph::Error("unexpected depfile from the compiler: " + compiler_deps.string());
  std::string out = target.string() + ":";
  std::string token;
  auto flush = [&] {
    if (!token.empty() && token.rfind(staging.string(), 0) != 0) out += " " + token;
    token.clear();
  };
  for (size_t i = colon + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      ++i;  // line continuation
      flush();
    } else if (c == '\\' && i + 1 < text.size() && text[i + 1] == ' ') {
      token += "\\ ";
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      flush();
    } else {
      token += c;
    }
  }
  flush();
  return out + "\n";
}

namespace {

// Each file NAME.a depends on (depfile_for's text) with its size and hash, a line each: a cached
// object of the model's source is used only while the headers it was compiled from are unchanged.
// Paths are separated by white space; a backslash escapes the next character ("\ " is a space
// inside a path).
std::string dependency_sums(const std::string& depfile) {
  std::string sums, path;
  const auto flush = [&] {
    if (path.empty()) return;
    const std::string bytes = codegen::read_text(path);
    sums += path + " " + std::to_string(bytes.size()) + " " + std::to_string(graph::fnv1a(bytes)) +
            "\n";
    path.clear();
  };
  for (size_t i = depfile.find(':') + 1; i < depfile.size(); ++i) {
    if (depfile[i] == '\\' && i + 1 < depfile.size())
      path += depfile[++i];
    else if (std::isspace(static_cast<unsigned char>(depfile[i])))
      flush();
    else
      path += depfile[i];
  }
  flush();
  return sums;
}

}  // namespace

void compile_model_source(std::vector<std::string> cxx, const fs::path& staging,
                          const std::string& name, const std::string& source,
                          const std::string& cache_dir) {
  const fs::path& tmp = staging;
  for (const char* arg : {"-MMD", "-MF"}) cxx.push_back(arg);
  cxx.insert(cxx.end(), {(tmp / "deps.d").string(), "-c", (tmp / (name + ".cpp")).string(), "-o",
                         (tmp / (name + ".o")).string()});
  // The object and its depfile are cached, keyed by the command and the source, and used
  // while the headers the depfile names are as they were (headers.txt: their sizes and
  // hashes). The staging directory, which the command and the depfile name, is written as a
  // placeholder in the key and in the cached depfile (deps.cached): a model compiled to another
  // output directory finds the same entry.
  constexpr const char* kStaging = "@KILN_STAGING@";
  const codegen::FileCache objects(cache_dir, "objects");
  std::string object_key = codegen::toolchain_identity() + "command";
  for (const std::string& arg : cxx) object_key += " " + replace_all(arg, tmp.string(), kStaging);
  object_key += "\nsource\n" + source;
  const std::vector<std::string> object_files = {name + ".o", "deps.cached", "headers.txt"};
  const auto headers = [&] { return dependency_sums(depfile_for(tmp / "deps.d", tmp, "NAME.a")); };
  const bool fetched = objects.fetch(object_key, tmp, object_files);
  if (fetched)
    write_file(tmp / "deps.d",
               replace_all(codegen::read_text(tmp / "deps.cached"), kStaging, tmp.string()));
  if (fetched && codegen::read_text(tmp / "headers.txt") == headers()) {
    std::cout << "      " << name << ".cpp (cached)" << std::endl;
    return;
  }
  std::cout << "      " << name << ".cpp" << std::endl;
  codegen::run_tool(cxx, "compiling " + name + ".cpp");
  write_file(tmp / "headers.txt", headers());
  write_file(tmp / "deps.cached",
             replace_all(codegen::read_text(tmp / "deps.d"), tmp.string(), kStaging));
  objects.store(object_key, tmp, object_files);
}

}  // namespace kiln::cli
