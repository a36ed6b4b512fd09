#include "optimizer/deferral_stream.hpp"

#include <cmath>
#include <numbers>
#include <stdexcept>

#include "common/error.hpp"
#include "common/parse.hpp"
#include "optimizer/capped.hpp"

namespace dionsim::opt {

namespace {

constexpr std::uint64_t kRowScaleDomain = 0x5ca1e5ca1eULL;  // row scales use their own key, apart from gradients

[[noreturn]] void bad_stream(std::string_view flag, std::string_view text) {
  throw_bad_usage(flag, text,
                  "iid, lognormal:SIGMA, skew:rank=R,factor=F, skew:rows=P,factor=F (P in (0, 1], F > 0) or replay:DB");
}

// "rank=0,factor=2" -> fills stream; false on any malformed or unknown item.
bool parse_skew(std::string_view body, std::string_view flag, NormStream& s) {
  bool have_target = false, have_factor = false;
  for (const std::string& item : split_list(body, flag)) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) return false;
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "rank" && !have_target) {
      s.kind = StreamKind::skew_rank;
      s.rank = parse_int(value, flag);
      have_target = s.rank >= 0;
      if (!have_target) return false;
    } else if (key == "rows" && !have_target) {
      s.kind = StreamKind::skew_rows;
      s.rows_fraction = parse_double(value, flag);
      have_target = s.rows_fraction > 0.0 && s.rows_fraction <= 1.0;
      if (!have_target) return false;
    } else if (key == "factor" && !have_factor) {
      s.factor = parse_double(value, flag);
      have_factor = s.factor > 0.0 && std::isfinite(s.factor);
      if (!have_factor) return false;
    } else {
      return false;
    }
  }
  return have_target && have_factor;
}

}  // namespace

NormStream parse_norm_stream(std::string_view text, std::string_view flag) {
  NormStream s;
  s.text = std::string(text);
  if (text == "iid") return s;
  if (text.starts_with("lognormal:")) {
    s.kind = StreamKind::lognormal;
    s.sigma = parse_double(text.substr(10), flag);
    if (!(s.sigma >= 0.0) || !std::isfinite(s.sigma)) bad_stream(flag, text);
    return s;
  }
  if (text.starts_with("skew:")) {
    try {
      if (parse_skew(text.substr(5), flag, s)) return s;
    } catch (const UsageError&) {
    }
    bad_stream(flag, text);
  }
  if (text.starts_with("replay:") && text.size() > 7) {
    s.kind = StreamKind::replay;
    s.replay_path = std::string(text.substr(7));
    return s;
  }
  bad_stream(flag, text);
}

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t stream_key(std::uint64_t seed, std::uint64_t trial, std::uint64_t group, std::uint64_t matrix) {
  return mix64(mix64(mix64(mix64(seed) ^ trial) ^ group) ^ matrix);
}

void normal_pair(std::uint64_t key, std::uint64_t counter, double& z0, double& z1) {
  // Marsaglia's polar method (no sin/cos): attempt a draws (u, v) uniform in (-1, 1)^2 from the
  // hash of (counter, a) until it falls inside the unit disc (probability pi/4 per attempt).
  const std::uint64_t base = mix64(key ^ mix64(counter));
  for (std::uint64_t a = 0;; ++a) {
    const std::uint64_t h = mix64(base + a);
    const double u = static_cast<double>(h >> 32) * 0x1.0p-31 - 1.0;
    const double v = static_cast<double>(h & 0xffffffffULL) * 0x1.0p-31 - 1.0;
    const double s = u * u + v * v;
    if (s > 0.0 && s < 1.0) {
      const double f = std::sqrt(-2.0 * std::log(s) / s);
      z0 = u * f;
      z1 = v * f;
      return;
    }
  }
}

double uniform01(std::uint64_t key, std::uint64_t counter) {
  return static_cast<double>(mix64(key ^ mix64(counter)) >> 11) * 0x1.0p-53;
}

double row_scale(const NormStream& stream, std::uint64_t key, std::int64_t row, std::int64_t S, std::int64_t C,
                 std::int64_t world) {
  const std::uint64_t counter = static_cast<std::uint64_t>(row);
  key = mix64(key ^ kRowScaleDomain);
  switch (stream.kind) {
    case StreamKind::iid: return 1.0;
    case StreamKind::lognormal: {
      double z0 = 0.0, z1 = 0.0;
      normal_pair(key, counter, z0, z1);
      return std::exp(stream.sigma * z0);
    }
    case StreamKind::skew_rank: {
      const std::int64_t pl = padded_local_rows(S, world);
      return row / pl == stream.rank ? stream.factor : 1.0;
    }
    case StreamKind::skew_rows: return uniform01(key, counter) < stream.rows_fraction ? stream.factor : 1.0;
    case StreamKind::replay: {
      if (!stream.replay) throw std::logic_error("row_scale: replay statistics not loaded");
      return stream.replay->row_scale(row, S, C, uniform01(key, counter));
    }
  }
  return 1.0;
}

}  // namespace dionsim::opt
