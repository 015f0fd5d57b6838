// The text form of convolution schedule parameters: `FAMILY knob=value ...` (docs/tuning.md).
#include <algorithm>
#include <sstream>

#include "schedules/conv_params.h"
#include "schedules/conv_params_internal.h"

namespace kiln::schedules {
namespace {

struct FamilyInfo {
  ConvFamily family;
  const char* name;
  std::vector<std::string> knobs;
};

const std::vector<FamilyInfo>& families() {
  static const std::vector<FamilyInfo> f = {
      {ConvFamily::naive, "naive", {}},
      {ConvFamily::wide, "wide", {"block", "rows", "split", "stage", "lanes"}},
      {ConvFamily::deep, "deep", {"block", "chunk", "tasks", "prefetch", "lanes"}},
      {ConvFamily::grouped, "grouped", {"block"}},
      {ConvFamily::winograd, "winograd", {"tile", "block", "rows", "split", "prefetch", "lanes"}},
      {ConvFamily::depthwise, "depthwise", {"block", "rows", "inner", "stage"}},
      {ConvFamily::amx, "amx", {"rows", "cols", "windows"}},
  };
  return f;
}

const FamilyInfo& info(ConvFamily family) {
  for (const FamilyInfo& f : families())
    if (f.family == family) return f;
  return families().front();
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "none" : s;
}

bool parse_int(const std::string& s, int lo, int hi, int* out) {
  if (s.empty() || s.size() > 6 ||
      !std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= '0' && c <= '9'; }))
    return false;
  const int v = std::stoi(s);
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

namespace internal {

const char* family_name(ConvFamily family) { return info(family).name; }

}  // namespace internal

bool operator==(const ConvParams& a, const ConvParams& b) { return to_string(a) == to_string(b); }

std::string to_string(const ConvParams& p) {
  std::ostringstream s;
  s << info(p.family).name;
  const std::string block = std::to_string(p.block.vectors) + "x" + std::to_string(p.block.pixels);
  if (p.family == ConvFamily::wide)
    s << " block=" << block << " rows=" << p.rows << " split=" << (p.split_channels ? 1 : 0)
      << " stage=" << (p.stage_input ? "copy" : "in_place");
  if (p.family == ConvFamily::deep)
    s << " block=" << block << " chunk=" << p.chunk << " tasks=" << p.tasks
      << " prefetch=" << (p.prefetch ? 1 : 0);
  if (p.family == ConvFamily::grouped) s << " block=" << block;
  if (p.family == ConvFamily::winograd)
    s << " tile=" << p.tile << " block=" << block << " rows=" << p.rows
      << " split=" << (p.split_channels ? 1 : 0) << " prefetch=" << (p.prefetch ? 1 : 0);
  if (p.family == ConvFamily::amx)
    s << " rows=" << p.rows << " cols=" << p.columns
      << " windows=" << (p.windows_per_task ? "task" : "root");
  if (p.family == ConvFamily::depthwise)
    s << " block=" << block << " rows=" << p.rows
      << " inner=" << (p.channels_inside ? "channels" : "pixels")
      << " stage=" << (p.stage_input ? "copy" : "in_place");
  const bool takes_lanes = p.family == ConvFamily::wide || p.family == ConvFamily::deep ||
                           p.family == ConvFamily::winograd;
  if (takes_lanes && p.lanes != 0) s << " lanes=" << p.lanes;
  return s.str();
}

std::string parse_conv_params(const std::string& text, ConvParams* out) {
  ConvParams p = *out;
  std::istringstream words(text);
  std::string word;
  bool any = false;
  while (words >> word) {
    any = true;
    const size_t eq = word.find('=');
    if (eq == std::string::npos) {  // a family: the knobs after it are its own
      bool known = false;
      for (const FamilyInfo& f : families())
        if (word == f.name) p.family = f.family, known = true;
      // A family without the knob keeps no vector width of the one before.
      const std::vector<std::string>& knobs = info(p.family).knobs;
      if (std::find(knobs.begin(), knobs.end(), "lanes") == knobs.end()) p.lanes = 0;
      if (!known) {
        std::vector<std::string> names;
        for (const FamilyInfo& f : families()) names.push_back(f.name);
        return "no convolution schedule family is called '" + word + "' (" + join(names) + ")";
      }
      continue;
    }
    const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    const FamilyInfo& fam = info(p.family);
    if (std::find(fam.knobs.begin(), fam.knobs.end(), key) == fam.knobs.end())
      return "'" + key + "' is not a knob of schedule family " + fam.name +
             " (knobs: " + join(fam.knobs) + ")";
    const std::string bad = "bad value '" + value + "' for knob " + key;
    if (key == "block") {
      const size_t x = value.find('x');
      RegisterBlock b{};
      if (x == std::string::npos || !parse_int(value.substr(0, x), 0, 16, &b.vectors) ||
          !parse_int(value.substr(x + 1), 1, 64, &b.pixels))
        return bad + " (VECTORSxPIXELS, e.g. 2x14)";
      p.block = b;
    } else if (key == "rows") {
      if (!parse_int(value, 1, 4096, &p.rows)) return bad + " (1..4096)";
    } else if (key == "split") {
      if (value != "0" && value != "1") return bad + " (0 or 1)";
      p.split_channels = value == "1";
    } else if (key == "stage") {
      if (value != "copy" && value != "in_place") return bad + " (copy or in_place)";
      p.stage_input = value == "copy";
    } else if (key == "chunk") {
      if (!parse_int(value, 8, 65536, &p.chunk)) return bad + " (8..65536)";
    } else if (key == "prefetch") {
      if (value != "0" && value != "1") return bad + " (0 or 1)";
      p.prefetch = value == "1";
    } else if (key == "tasks") {
      if (!parse_int(value, 1, 4096, &p.tasks)) return bad + " (1..4096)";
    } else if (key == "inner") {
      if (value != "channels" && value != "pixels") return bad + " (channels or pixels)";
      p.channels_inside = value == "channels";
    } else if (key == "cols") {
      if (!parse_int(value, 0, 65536, &p.columns) || p.columns % 16 != 0)
        return bad + " (a multiple of 16; 0: every output channel)";
    } else if (key == "windows") {
      if (value != "task" && value != "root") return bad + " (task or root)";
      p.windows_per_task = value == "task";
    } else if (key == "lanes") {
      if (!parse_int(value, 0, 64, &p.lanes)) return bad + " (floats per vector; 0: the target's)";
    } else if (key == "tile") {
      if (value != "2" && value != "4") return bad + " (2 or 4)";
      p.tile = value == "2" ? 2 : 4;
    }
  }
  if (!any) return "an empty schedule";
  *out = p;
  return "";
}

}  // namespace kiln::schedules
