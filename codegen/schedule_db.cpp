// The schedule database: JSON lines through nlohmann::json.
#include "codegen/schedule_db.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "Halide.h"
#include "codegen/kernel_pipeline.h"
#include "graph/file_io.h"

namespace kiln::codegen {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Databases are small (a record per distinct kernel and target); a file past this is not one.
constexpr std::uintmax_t kMaxDbBytes = 64ull << 20;

json to_json(const ScheduleRecord& r) {
  return json{{"kernel", r.kernel},
              {"signature", r.signature},
              {"target", r.target},
              {"schedule", r.schedule},
              {"default_schedule", r.default_schedule},
              {"median_us", r.median_us},
              {"spread", r.spread},
              {"default_us", r.default_us},
              {"threads", r.threads},
              {"candidates", r.candidates},
              {"kiln_version", r.kiln_version},
              {"cpu", r.cpu}};
}

ScheduleRecord from_json(const json& j) {
  ScheduleRecord r;
  r.signature = j.at("signature").get<std::string>();
  r.target = j.at("target").get<std::string>();
  r.schedule = j.at("schedule").get<std::string>();
  r.kernel = j.value("kernel", "");
  r.default_schedule = j.value("default_schedule", "");
  r.median_us = j.value("median_us", 0.0);
  r.spread = j.value("spread", 0.0);
  r.default_us = j.value("default_us", 0.0);
  r.threads = j.value("threads", 0);
  r.candidates = j.value("candidates", 0);
  r.kiln_version = j.value("kiln_version", "");
  r.cpu = j.value("cpu", "");
  return r;
}

// The record's schedule resolved for `spec` on `target`, or "" (with *why) when it does not
// apply.
std::string applicable(const ScheduleRecord& r, const graph::KernelSpec& spec,
                       const std::string& target, std::string* why) {
  if (!Halide::Target::validate_target_string(target)) {
    if (why) *why = "'" + target + "' is not a Halide target";
    return "";
  }
  try {
    const std::string s = resolve_schedule(spec, Halide::Target(target), r.schedule);
    if (s.empty() && why) *why = "the kernel has no schedule knobs";
    return s;
  } catch (const graph::Error& e) {
    if (why) *why = e.what();
  }
  return "";
}

}  // namespace

ScheduleDb ScheduleDb::load(const std::string& path) {
  ScheduleDb db;
  std::error_code ec;
  if (!fs::exists(path, ec)) return db;
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxDbBytes)
    throw graph::Error("schedule database " + path + ": not a readable file of at most 64 MiB");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw graph::Error("cannot read the schedule database " + path);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      db.put(from_json(json::parse(line)));
    } catch (const json::exception& e) {
      throw graph::Error("schedule database " + path + " line " + std::to_string(number) +
                         ": not a schedule record (" + e.what() + ")");
    }
  }
  return db;
}

void ScheduleDb::save(const std::string& path) const { graph::write_file_atomically(path, text()); }

std::string ScheduleDb::text() const {
  std::vector<ScheduleRecord> sorted = records_;
  std::sort(sorted.begin(), sorted.end(), [](const ScheduleRecord& a, const ScheduleRecord& b) {
    return std::tie(a.kernel, a.signature, a.target) < std::tie(b.kernel, b.signature, b.target);
  });
  std::string text;
  for (const ScheduleRecord& r : sorted)
    text += to_json(r).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  return text;
}

const ScheduleRecord* ScheduleDb::find(const std::string& signature,
                                       const std::string& target) const {
  for (const ScheduleRecord& r : records_)
    if (r.signature == signature && r.target == target) return &r;
  return nullptr;
}

void ScheduleDb::put(ScheduleRecord record) {
  for (ScheduleRecord& r : records_)
    if (r.signature == record.signature && r.target == record.target) {
      r = std::move(record);
      return;
    }
  records_.push_back(std::move(record));
}

ScheduleLookup ScheduleDb::lookup() const {
  auto records = std::make_shared<const ScheduleDb>(*this);
  return [records](const graph::KernelSpec& spec, const std::string& target) -> std::string {
    const ScheduleRecord* r = records->find(graph::schedule_signature(spec), target);
    return r ? applicable(*r, spec, target, nullptr) : "";
  };
}

std::vector<ScheduleUse> schedule_uses(const std::vector<graph::KernelSpec>& specs,
                                       const std::string& target, const ScheduleDb* db) {
  if (!Halide::Target::validate_target_string(target))
    throw graph::Error("'" + target + "' is not a Halide target");
  const ScheduleLookup lookup = db ? db->lookup() : nullptr;
  const Halide::Target t(target);
  std::vector<ScheduleUse> out;
  for (const graph::KernelSpec& k : distinct_kernels(specs).kernels) {
    ScheduleUse u{graph::kernel_name(k), "", "default"};
    const std::string requested = requested_schedule(k, target, lookup);
    const auto* conv = std::get_if<graph::ConvKernelSpec>(&k);
    if (conv && !conv->schedule.empty())
      u.origin = "spec";
    else if (!requested.empty())
      u.origin = "tuned (DB)";
    u.schedule = resolve_schedule(k, t, requested);
    u.half_width = half_width_kernel(k, {target}, lookup).schedule;
    out.push_back(u);
  }
  return out;
}

std::string schedule_loop_nest(const graph::KernelSpec& spec, const std::string& target,
                               const std::string& schedule) {
  if (!Halide::Target::validate_target_string(target))
    throw graph::Error("'" + target + "' is not a Halide target");
  KernelPipeline k = build_kernel_pipeline(spec, Halide::Target(target), schedule);
  // Halide prints the loop nest on stderr: catch it in a temporary file.
  char path[] = "/tmp/kiln-loop-nest-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) throw graph::Error("cannot create a temporary file for the loop nest");
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  k.pipeline.print_loop_nest();
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path);
  return text.str();
}

std::vector<std::string> stale_records(const ScheduleDb& db,
                                       const std::vector<graph::KernelSpec>& specs,
                                       const std::vector<std::string>& targets) {
  std::vector<std::string> out;
  std::set<std::string> targets_set(targets.begin(), targets.end());
  for (const graph::KernelSpec& k : distinct_kernels(specs).kernels) {
    const std::string& name = graph::kernel_name(k);
    const std::string signature = graph::schedule_signature(k);
    for (const std::string& target : targets) {
      const ScheduleRecord* exact = db.find(signature, target);
      std::string why;
      if (exact && !applicable(*exact, k, target, &why).empty()) continue;
      if (exact) {
        out.push_back("kernel " + name + ", target " + target + ": record '" + exact->schedule +
                      "' no longer applies (" + why + "); the default is used");
        continue;
      }
      for (const ScheduleRecord& r : db.records()) {
        if (r.kernel != name) continue;
        if (r.signature != signature)
          out.push_back("kernel " + name + ": a record was tuned for a different kernel signature "
                        "(the shapes, attributes or fused ops changed); the default is used on " +
                        target);
        else if (!targets_set.count(r.target))
          out.push_back("kernel " + name + ": a record was tuned for target " + r.target +
                        ", not " + target + "; the default is used");
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace kiln::codegen
