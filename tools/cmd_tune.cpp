// kiln tune: searches each tunable kernel's schedule parameters by measurement and keeps the
// winners in a schedule database that compile / run / bench apply with --schedules.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "cli.h"
#include "codegen/kernel_pipeline.h"
#include "codegen/schedule_db.h"
#include "commands.h"
#include "graph/file_io.h"
#include "graph/kernel_spec.h"
#include "peaks.h"
#include "runtime/kernels.h"
#include "tuner.h"

namespace kiln::cli {
namespace {

constexpr const char* kHelp = R"(usage: kiln tune MODEL --db FILE [options]

Searches the schedule of each kernel of MODEL (an .onnx file, or "example") that has schedule
knobs (today: dense, grouped and depthwise convolutions, and MatMuls run as 1x1 convolutions; see
docs/tuning.md) for one CPU target, and records the fastest in FILE, a schedule database of one
JSON record per line keyed by the kernel's signature and the target. `kiln compile`, `run` and
`bench` apply it with --schedules FILE. The model is optimized with the Winograd output check
of `kiln run` on the default schedules (float32), and no candidate exceeds a tile it capped;
`--schedules` checks the model again with the tuned ones.

For each kernel: candidates from the schedule families' parameter space, ranked by a simple
cost model and cut to --candidates; compiled in parallel (separate processes); each checked
against the reference interpreter (rtol 1e-3, atol 1e-4), the kernel alone, before it may
win; then timed one at a time, interleaved with the best so far, where it runs: each call a
run of the whole model on seeded random inputs (after an untimed run of the same instance),
the time that of the kernel (the mean of the model's kernels of its signature, which a
record applies to alike), the model's other kernels taking the database's records so far
(--isolated: the kernel alone, calls back to back, its inputs and weights warm in the
caches); in two epochs on fresh instances of both built in opposite orders; --cold evicts the
caches before each call. A candidate replaces the best only when its median is at least 2%
lower. While the kernel's share of the budget lasts, a local search follows: the untried
schedules one knob away from the best (a tile a pixel or a vector larger or smaller, the
other vector width, rows, chunk or tasks halved or doubled, the other staging, split,
prefetch, family or Winograd tile), compiled and timed the same way, and the new best's neighbours whenever one of them wins,
until none does. Finally the winner and the default are timed again side by side; the
default is kept unless the winner is faster there too (a kept default is reported at 1.00x).
Kernels the database already holds for this target are kept (a rerun resumes), and the
database is rewritten after each kernel, so an interrupted run loses only the kernel in
progress. Ends with a table: the default and tuned schedule of each kernel, their times from
the same run, the tuned one's share of the FMA peak, and oneDNN's time for the same
convolution alone (dense or depthwise, with bias, residual and ReLU/ReLU6 as post-ops, NHWC,
on the same threads; timed right after the kernel, not interleaved with it; "-" where oneDNN
has no such op, or where this kiln was built without oneDNN).

options:
  --db FILE            the schedule database to extend (created if missing)
  --target T           the CPU target to tune for: avx512, avx2, baseline or one of the
                       build's Halide target strings (default: the best this CPU runs)
  {input-shape:23}
  --budget MINUTES     time for the whole run (default 30; fractions allowed: 0.5 is 30 s);
                       each kernel gets an equal share of what is left, and stops trying
                       candidates when it is spent
  --threads N          threads the kernels run with (default: one per core)
  --jobs N             candidates compiled at once (default: one per core)
  --candidates N       schedules in each kernel's ranked list, the default included
                       (default 16)
  --local-rounds N     rounds of the local search after the ranked list (default 20; 0: none);
                       it stops sooner when no neighbour wins or the budget is spent
  --rounds N           timed calls of each schedule per comparison (default 15)
  --precision f32|bf16 tune the model's kernels at this precision (default f32): bf16 kernels
                       have signatures, and records, of their own
  --kernel NAME        tune only this kernel (a name from `kiln inspect`)
  --set KNOB=VALUE     with --kernel: compile the kernel's current schedule (its record, else
                       the default: the half-width kernel's where this CPU runs one, see
                       `kiln run --help`) with this knob changed, check it, time it against the
                       current one and print both; the database is not changed. Repeatable;
                       a family name switches family: --set deep --set chunk=144;
                       --set auto:NAME tries Halide's autoscheduler NAME instead
  --autoschedulers LIST
                       also schedule each kernel with these of Halide's autoschedulers
                       (comma-separated: Mullapudi2016, Adams2019, Li2018; or all), given the
                       kernel's shapes as estimates, check each against the reference and
                       time it against the winner, and add a column each to the table (the
                       time relative to the winner's, from the same interleaved run). They are
                       a comparison: a record always holds one of Kiln's schedule families.
                       Adams2019's search can take minutes per kernel.
  --json FILE          also write the final table as JSON (scripts/plot_results.py draws it)
  --isolated           time each kernel alone, calls back to back, not inside the model
                       (faster per candidate on large models, but a small kernel's winner
                       there can lose in the model, where its weights are not warm)
  --cold               write a 64 MiB buffer before every timed call, so the kernel's weights
                       and inputs come from memory (default: as the model leaves them)
  --retune             measure kernels the database already holds again
  -h, --help           this text
)";

struct TuneArgs {
  std::string model, db, json;
  InputShapes input_shapes;
  int target = -1, threads = 0, jobs = 0, candidates = 16, rounds = 15, local_rounds = 20;
  double budget_s = 30 * 60;
  std::string kernel;
  std::vector<std::string> sets;
  std::vector<std::string> autoschedulers;
  bool retune = false, cold = false, isolated = false;
};

TuneArgs parse(const Args& args) {
  TuneArgs a;
  a.model = single_model(args);
  a.input_shapes = parse_input_shapes(args, a.model);
  a.db = args.get("--db");
  if (a.db.empty()) throw UsageError("--db FILE is required (the schedule database to write)");
  const int best = runtime::best_cpu_target();
  if (best < 0) throw graph::Error("this CPU supports none of Kiln's CPU targets");
  a.target = args.has("--target") ? parse_cpu_target("--target", args.get("--target")) : best;
  {
    // Minutes, fractions allowed: 0.5 is 30 s (a budget of seconds for a small model).
    const std::string text = args.get("--budget", "30");
    char* end = nullptr;
    const double minutes = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(minutes > 0) || minutes > 100000)
      throw UsageError(
          "--budget expects minutes, more than 0 and at most 100000 (e.g. 30 or "
          "0.5), got '" +
          text + "'");
    a.budget_s = 60.0 * minutes;
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  a.threads = args.get_int("--threads", 0, 1, 1024);
  a.jobs = args.get_int("--jobs", cores, 1, 256);
  a.candidates = args.get_int("--candidates", 16, 1, 1000);
  a.rounds = args.get_int("--rounds", 15, 3, 10000);
  a.local_rounds = args.get_int("--local-rounds", 20, 0, 10000);
  a.kernel = args.get("--kernel");
  a.sets = args.get_all("--set");
  a.retune = args.has("--retune");
  a.cold = args.has("--cold");
  a.isolated = args.has("--isolated");
  a.json = args.get("--json");
  if (args.has("--json") && a.json.empty()) throw UsageError("--json needs a file name");
  if (args.has("--autoschedulers")) {
    std::stringstream list(args.get("--autoschedulers"));
    for (std::string name; std::getline(list, name, ',');) {
      if (name == "all") {
        a.autoschedulers = {"Mullapudi2016", "Adams2019", "Li2018"};
        break;
      }
      if (name != "Mullapudi2016" && name != "Adams2019" && name != "Li2018")
        throw UsageError("--autoschedulers: unknown '" + name +
                         "' (Mullapudi2016, Adams2019, Li2018 or all)");
      a.autoschedulers.push_back(name);
    }
  }
  if (!a.sets.empty() && a.kernel.empty())
    throw UsageError("--set needs --kernel NAME (the kernel whose schedule it changes)");
  for (const std::string& s : a.sets)
    if (s.empty()) throw UsageError("--set needs KNOB=VALUE or a family name");
  return a;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string minutes(double s) {
  char buf[32];
  const int total = static_cast<int>(std::max(0.0, s));
  std::snprintf(buf, sizeof buf, "%d:%02d", total / 60, total % 60);
  return buf;
}

// One line of progress per step on a terminal (rewritten in place), one per kernel otherwise.
class Progress {
 public:
  Progress() : tty_(isatty(STDERR_FILENO)) {}
  void update(const std::string& line) {
    if (tty_) std::fprintf(stderr, "\r\033[K%s", line.c_str());
    last_ = line;
  }
  void done() {
    if (tty_)
      std::fprintf(stderr, "\n");
    else if (!last_.empty())
      std::fprintf(stderr, "%s\n", last_.c_str());
    last_.clear();
  }

 private:
  bool tty_;
  std::string last_;
};

std::string bar(size_t done, size_t total) {
  const size_t width = 16, filled = total ? done * width / total : width;
  return "[" + std::string(filled, '#') + std::string(width - filled, '-') + "]";
}

struct Outcome {
  std::string kernel, op, default_schedule, schedule, note;
  double default_us = 0, tuned_us = 0, flops = 0;
  // Each requested autoscheduler's median over the winner's, from one interleaved run (NAN:
  // refused or failed; the note says why).
  std::vector<double> auto_ratio;
  bool measured = false;
  // oneDNN's median for the same op (NAN where it has none, or this kiln has no oneDNN; the
  // reason in onednn_note).
  double onednn_us = NAN;
  std::string onednn_note;
};

// Outcome::onednn_us for kernel `k`: timed now, right after the kernel's own comparison.
void time_onednn(const graph::KernelSpec& k, int threads, const TuneArgs& a, Outcome* o) {
#ifdef KILN_WITH_ONEDNN
  const std::optional<Timing> t = onednn_time(k, threads, a.rounds, a.cold, &o->onednn_note);
  if (t) o->onednn_us = t->median_us;
#else
  (void)k, (void)threads, (void)a;
  o->onednn_note = "this kiln was built without oneDNN";
#endif
}

// The local Measurer of kernel `spec` with the command's target, threads, jobs and caches.
// Inside the model (the other kernels taking the database's records) unless --isolated.
std::unique_ptr<Measurer> measurer_for(const std::shared_ptr<const graph::Graph>& optimized,
                                       const graph::KernelSpec& spec, const TuneArgs& a,
                                       const codegen::ScheduleDb& db) {
  LocalMeasurerOptions mo;
  mo.cpu_target = a.target;
  mo.threads = a.threads;
  mo.compile_jobs = a.jobs;
  mo.cache_dir = cache_dir();
  mo.evict = a.cold;
  if (!a.isolated) {
    mo.network = optimized;
    mo.signature = graph::schedule_signature(spec);
    mo.others = db.lookup();
  }
  return local_measurer(kernel_graph(*optimized, graph::kernel_name(spec)), mo);
}

// The schedule of `spec`'s half-width kernel on `t` where this CPU's runtime calls it by default
// (a CPU that splits 512-bit multiply-adds), else "".
std::string half_width_default(const graph::KernelSpec& spec, const std::string& target) {
  return runtime::splits_512bit_fma() ? codegen::half_width_kernel(spec, {target}, nullptr).schedule
                                      : "";
}

// Tunes one kernel; returns its record (schedule = the default when nothing beat it).
Outcome tune_kernel(const std::shared_ptr<const graph::Graph>& optimized,
                    const graph::KernelSpec& spec, const std::string& target, const TuneArgs& a,
                    const codegen::ScheduleDb& db, double budget_s, const std::string& label,
                    codegen::ScheduleRecord* record) {
  const auto start = std::chrono::steady_clock::now();
  const Halide::Target t(target);
  const int threads = a.threads > 0 ? a.threads
                                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> candidates =
      codegen::schedule_candidates(spec, t, threads, static_cast<size_t>(a.candidates));
  // Where the runtime calls the kernel's half-width kernel by default, that is the default.
  if (const std::string half = half_width_default(spec, target);
      !half.empty() && !candidates.empty()) {
    const auto it = std::find(candidates.begin(), candidates.end(), half);
    if (it != candidates.end()) candidates.erase(it);
    candidates.insert(candidates.begin(), half);
  }
  Outcome o;
  o.kernel = graph::kernel_name(spec);
  o.op = kernel_work(spec).op;
  o.default_schedule = o.schedule = candidates.front();
  o.flops = kernel_work(spec).flops;
  std::unique_ptr<Measurer> m = measurer_for(optimized, spec, a, db);

  Progress progress;
  progress.update(label + " compiling " + std::to_string(candidates.size()) + " candidates");
  const auto compile_start = std::chrono::steady_clock::now();
  const std::vector<std::string> errors = m->prepare(candidates);
  // What a compile and a comparison take here, to keep the search inside the kernel's budget
  // with room for the final comparison against the default.
  const double compile_s = seconds_since(compile_start) / double(candidates.size());
  double compare_s = 0;
  if (!errors.front().empty())
    throw graph::Error("kernel '" + o.kernel + "': its default schedule failed: " + errors.front());
  std::string best = candidates.front();
  double best_us = 0;
  size_t tried = 1, refused = 0;
  std::vector<std::pair<std::string, std::string>> refusals;  // (schedule, why)
  std::set<std::string> seen(candidates.begin(), candidates.end());
  // Times `list[i]` against the best so far (each list's errors from prepare); false once the
  // kernel's budget is spent.
  const auto try_list = [&](const std::vector<std::string>& list,
                            const std::vector<std::string>& list_errors, size_t first,
                            const std::string& stage) {
    for (size_t i = first; i < list.size(); ++i) {
      if (seconds_since(start) + 2 * compare_s > budget_s) {
        o.note = "budget spent after " + std::to_string(tried) + " candidates";
        return false;
      }
      ++tried;
      if (!list_errors[i].empty()) {
        ++refused;
        refusals.emplace_back(list[i], list_errors[i]);
        continue;
      }
      const auto compare_start = std::chrono::steady_clock::now();
      const auto [inc, cand] = m->compare(best, list[i], a.rounds);
      compare_s = seconds_since(compare_start);
      best_us = inc.median_us;
      if (cand.median_us < 0.98 * inc.median_us) best = list[i], best_us = cand.median_us;
      char line[256];
      std::snprintf(line, sizeof line, " %s %s %zu/%zu  best %.1f us%s", stage.c_str(),
                    bar(i + 1, list.size()).c_str(), i + 1, list.size(), best_us,
                    best == candidates.front() ? " (default)" : "");
      progress.update(label + line);
    }
    return true;
  };
  bool within_budget = try_list(candidates, errors, 1, "ranked");
  // Then a local search while the budget lasts: the untried schedules one knob away from the
  // best, the best's neighbours again whenever one of them wins, until none does.
  for (int round = 1; within_budget && round <= a.local_rounds; ++round) {
    const std::string from = best;
    std::vector<std::string> next;
    // As many as the budget leaves time to compile and compare.
    const double left = budget_s - seconds_since(start) - compare_s;
    for (const std::string& s : codegen::schedule_neighbors(spec, t, threads, best))
      if (double(next.size() + 1) * (compile_s + compare_s) <= left && seen.insert(s).second)
        next.push_back(s);
    if (next.empty()) break;
    progress.update(label + " local search " + std::to_string(round) + ": compiling " +
                    std::to_string(next.size()) + " neighbours");
    within_budget = try_list(next, m->prepare(next), 0, "local " + std::to_string(round));
    if (best == from) break;
  }
  // Halide's autoschedulers, each against the winner.
  if (!a.autoschedulers.empty()) {
    std::vector<std::string> autos;
    for (const std::string& name : a.autoschedulers) autos.push_back("auto:" + name);
    progress.update(label + " autoscheduling with " + std::to_string(autos.size()) +
                    " autoschedulers");
    const std::vector<std::string> auto_errors = m->prepare(autos);
    for (size_t i = 0; i < autos.size(); ++i) {
      if (!auto_errors[i].empty()) {
        o.auto_ratio.push_back(NAN);
        o.note += (o.note.empty() ? "" : "; ") + a.autoschedulers[i] + ": " + auto_errors[i];
        continue;
      }
      const auto [win, cand] = m->compare(best, autos[i], a.rounds);
      o.auto_ratio.push_back(cand.median_us / win.median_us);
    }
  }
  // The winner against the default, side by side, once more: the record states both. Where
  // the default won, both are the default's one timing (two sample sets of the same kernel
  // differ by noise, and reporting the lower would claim a speedup of nothing).
  const auto [def, win] = m->compare(candidates.front(), best, a.rounds);
  o.default_us = def.median_us;
  o.tuned_us = win.median_us;
  Timing kept = win;
  if (best == candidates.front() || !(win.median_us < def.median_us)) {
    best = candidates.front(), o.tuned_us = def.median_us, kept = def;
  }
  o.schedule = best;
  o.measured = true;
  time_onednn(spec, threads, a, &o);
  if (refused) o.note += (o.note.empty() ? "" : "; ") + std::to_string(refused) + " refused";
  char line[256];
  std::snprintf(line, sizeof line, " done: %.1f us -> %.1f us (%.2fx)%s%s", o.default_us, o.tuned_us,
                o.default_us / o.tuned_us, o.note.empty() ? "" : ", ", o.note.c_str());
  progress.update(label + line);
  progress.done();
  for (const auto& [schedule, why] : refusals)  // wrong results or a failed compile
    std::fprintf(stderr, "  refused '%s': %s\n", schedule.c_str(), graph::printable(why).c_str());

  record->kernel = o.kernel;
  record->signature = graph::schedule_signature(spec);
  record->target = target;
  record->schedule = best;
  record->default_schedule = candidates.front();
  record->median_us = kept.median_us;
  record->spread = kept.spread;
  record->default_us = def.median_us;
  record->threads = threads;
  record->candidates = static_cast<int>(tried);
  record->kiln_version = KILN_VERSION;
  record->cpu = cpu_model_name();
  return o;
}

// --kernel NAME --set ...: one schedule against the current one.
int try_schedule(const std::shared_ptr<const graph::Graph>& optimized,
                 const graph::KernelSpec& spec, const std::string& target, const TuneArgs& a,
                 const codegen::ScheduleDb& db) {
  const Halide::Target t(target);
  const codegen::ScheduleRecord* r = db.find(graph::schedule_signature(spec), target);
  const std::string half = r ? "" : half_width_default(spec, target);
  const std::string current = codegen::resolve_schedule(spec, t, r ? r->schedule : half);
  std::string text = current;
  for (const std::string& s : a.sets) text = s.rfind("auto:", 0) == 0 ? s : text + " " + s;
  const std::string trial = codegen::resolve_schedule(spec, t, text);  // refuses nonsense
  std::unique_ptr<Measurer> m = measurer_for(optimized, spec, a, db);
  const std::vector<std::string> errors = m->prepare({current, trial});
  if (!errors[0].empty()) throw graph::Error("the current schedule failed: " + errors[0]);
  if (!errors[1].empty()) throw graph::Error("schedule '" + trial + "': " + errors[1]);
  const auto [cur, tri] = m->compare(current, trial, a.rounds);
  std::printf("kernel %s (%s)\n", graph::printable(graph::kernel_name(spec)).c_str(),
              kernel_work(spec).op.c_str());
  std::printf("  current (%s): %-48s %9.1f us  spread %.0f%%\n",
              r              ? "tuned record"
              : half.empty() ? "default"
                             : "default, half-width",
              current.c_str(), cur.median_us, 100 * cur.spread);
  std::printf("  trial:                %-48s %9.1f us  spread %.0f%%  (%.2fx, matches the reference)\n",
              trial.c_str(), tri.median_us, 100 * tri.spread, cur.median_us / tri.median_us);
  return 0;
}

void print_table(const std::vector<Outcome>& rows, int threads,
                 const std::vector<std::string>& autoschedulers) {
  const Peaks peaks = machine_peaks(threads, false);
  size_t w = 6;
  for (const Outcome& o : rows) w = std::max(w, graph::printable(o.kernel).size());
  std::string auto_heads;
  for (const std::string& name : autoschedulers) {
    char head[48];
    std::snprintf(head, sizeof head, "  %19s", (name + "/tuned").c_str());
    auto_heads += head;
  }
  std::printf("\n%-*s  %-22s  %10s  %10s  %7s  %7s  %10s%s  %s\n", static_cast<int>(w), "kernel",
              "op", "default us", "tuned us", "speedup", "% FMA", "oneDNN us", auto_heads.c_str(),
              "tuned schedule (default if '=')");
  double log_sum = 0;
  int n = 0;
  for (const Outcome& o : rows) {
    if (!o.measured) continue;
    const double fraction = o.flops / (o.tuned_us * 1e-6) / 1e9 / peaks.fma_gflops;
    std::string autos;
    for (size_t i = 0; i < autoschedulers.size(); ++i) {
      const double r = i < o.auto_ratio.size() ? o.auto_ratio[i] : NAN;
      char cell[48];
      if (std::isfinite(r))
        std::snprintf(cell, sizeof cell, "  %18.2fx", r);
      else
        std::snprintf(cell, sizeof cell, "  %19s", "-");
      autos += cell;
    }
    char onednn[32] = "-";
    if (std::isfinite(o.onednn_us)) std::snprintf(onednn, sizeof onednn, "%.1f", o.onednn_us);
    std::printf("%-*s  %-22s  %10.1f  %10.1f  %6.2fx  %6.1f%%  %10s%s  %s\n", static_cast<int>(w),
                graph::printable(o.kernel).c_str(), o.op.substr(0, 22).c_str(), o.default_us,
                o.tuned_us, o.default_us / o.tuned_us, 100 * fraction, onednn, autos.c_str(),
                o.schedule == o.default_schedule ? "=" : o.schedule.c_str());
    log_sum += std::log(o.default_us / o.tuned_us);
    ++n;
  }
  if (n)
    std::printf("geometric-mean speedup over the defaults: %.3fx (%d kernels; FMA peak %.0f GFLOP/s, "
                "%d threads)\n",
                std::exp(log_sum / n), n, peaks.fma_gflops, threads);
}

void write_json(const std::string& path, const TuneArgs& a, const std::string& target, int threads,
                const std::vector<Outcome>& rows) {
  const Peaks peaks = machine_peaks(threads, false);
  nlohmann::json j = {{"model", a.model}, {"target", target}, {"threads", threads},
                      {"fma_peak_gflops", peaks.fma_gflops}};
  j["kernels"] = nlohmann::json::array();
  for (const Outcome& o : rows) {
    if (!o.measured) continue;
    nlohmann::json autos = nlohmann::json::object();
    for (size_t i = 0; i < a.autoschedulers.size() && i < o.auto_ratio.size(); ++i)
      autos[a.autoschedulers[i]] = o.auto_ratio[i];  // NaN (failed) is written as null
    j["kernels"].push_back({{"kernel", o.kernel},
                            {"op", o.op},
                            {"default_schedule", o.default_schedule},
                            {"schedule", o.schedule},
                            {"default_us", o.default_us},
                            {"tuned_us", o.tuned_us},
                            {"fma_fraction", o.flops / (o.tuned_us * 1e-6) / 1e9 / peaks.fma_gflops},
                            {"autoschedulers_over_tuned", autos},
                            {"onednn_us", o.onednn_us},  // NaN (none) is written as null
                            {"onednn_note", o.onednn_note},
                            {"note", o.note}});
  }
  graph::write_file_atomically(
      path, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace

int cmd_tune(int argc, char** argv) {
  const Args args(argc, argv, 2,
                  {"--db", "--target", "--budget", "--threads", "--jobs", "--candidates",
                   "--rounds", "--local-rounds", "--kernel", "--set", "--autoschedulers", "--json",
                   "--input-shape", "--precision"},
                  {"--retune", "--cold", "--isolated"});
  if (args.help()) {
    print_help(kHelp);
    return 0;
  }
  const TuneArgs a = parse(args);
  const std::string target = runtime::cpu_targets()[static_cast<size_t>(a.target)];
  codegen::ScheduleDb db = codegen::ScheduleDb::load(a.db);

  bool from_cache = false;
  // The Winograd output check with the default schedules: the tuner's candidates keep to the
  // caps it sets, and `--schedules` checks the model again with the tuned ones.
  const graph::Precision precision = parse_precision(args);
  OutputCheck check;
  check.options.generate_kernels = kernel_generator();
  check.options.threads = a.threads;
  check.options.cpu_target = a.target;
  const auto optimized = std::make_shared<const graph::Graph>(
      compile_cached(a.model, a.input_shapes, "cpu", precision, &from_cache,
                     precision == graph::Precision::f32 ? &check : nullptr));
  ModelOptions lower;
  lower.lower_only = true;
  const Model lowered(*optimized, lower);
  const Halide::Target t(target);
  std::vector<graph::KernelSpec> todo;
  bool found = a.kernel.empty();
  for (const graph::KernelSpec& k : codegen::distinct_kernels(lowered.kernels()).kernels) {
    const std::string& name = graph::kernel_name(k);
    if (!a.kernel.empty() && name != a.kernel) continue;
    found = true;
    if (codegen::default_schedule(k, t).empty()) {
      if (!a.kernel.empty())
        throw graph::Error("kernel '" + name + "' has no schedule knobs (only convolutions "
                           "and MatMuls run as 1x1 convolutions have)");
      continue;
    }
    todo.push_back(k);
  }
  if (!found)
    throw UsageError("--kernel " + a.kernel + ": the model has no such kernel (see kiln inspect)");
  if (!a.sets.empty()) return try_schedule(optimized, todo.front(), target, a, db);

  const int threads = a.threads > 0 ? a.threads
                                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("tuning %zu kernels of %s for %s, %d threads, budget %s, database %s\n", todo.size(),
              graph::printable(a.model).c_str(), target.c_str(), threads,
              minutes(a.budget_s).c_str(), graph::printable(a.db).c_str());
  const auto start = std::chrono::steady_clock::now();
  std::vector<Outcome> rows;
  size_t kept = 0;
  for (size_t i = 0; i < todo.size(); ++i) {
    const graph::KernelSpec& k = todo[i];
    const std::string name = graph::printable(graph::kernel_name(k));
    char label[160];
    std::snprintf(label, sizeof label, "[%zu/%zu] %s (%s), %s left:", i + 1, todo.size(),
                  name.c_str(), kernel_work(k).op.c_str(),
                  minutes(a.budget_s - seconds_since(start)).c_str());
    const codegen::ScheduleRecord* r = db.find(graph::schedule_signature(k), target);
    if (r && !a.retune) {
      ++kept;
      Outcome o;
      o.kernel = graph::kernel_name(k);
      o.op = kernel_work(k).op;
      o.default_schedule = r->default_schedule;
      o.schedule = r->schedule;
      o.default_us = r->default_us, o.tuned_us = r->median_us, o.flops = kernel_work(k).flops;
      o.measured = o.tuned_us > 0 && o.default_us > 0;
      o.note = "from the database";
      time_onednn(k, threads, a, &o);
      rows.push_back(o);
      continue;
    }
    const double left = a.budget_s - seconds_since(start);
    if (left <= 0) {
      std::fprintf(stderr, "%s skipped: the budget is spent (a rerun resumes here)\n", label);
      continue;
    }
    codegen::ScheduleRecord record;
    rows.push_back(
        tune_kernel(optimized, k, target, a, db, left / double(todo.size() - i), label, &record));
    db.put(record);
    db.save(a.db);
  }
  if (kept)
    std::printf("%zu kernels kept from the database (--retune measures them again)\n", kept);
  print_table(rows, threads, a.autoschedulers);
  if (!a.json.empty()) write_json(a.json, a, target, threads, rows);
  std::printf("database: %s (%zu records); total %s\n", graph::printable(a.db).c_str(),
              db.records().size(), minutes(seconds_since(start)).c_str());
  return 0;
}

}  // namespace kiln::cli
