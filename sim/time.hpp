#pragma once
// Simulated time: an integral number of picoseconds (STYLE.md point 6). A strong type so that a
// duration can never be confused with a byte count or a double of seconds; conversions to and
// from microseconds exist for the edges (configuration and output), never inside the engine.
#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace dionsim::sim {

class SimTime {
 public:
  constexpr SimTime() = default;
  [[nodiscard]] static constexpr SimTime ps(std::int64_t v) { return SimTime(v); }
  [[nodiscard]] static constexpr SimTime ns(std::int64_t v) { return SimTime(v * 1'000); }
  // Rounded to the nearest picosecond; `us` must be finite.
  [[nodiscard]] static SimTime from_us(double us) { return SimTime(std::llround(us * 1e6)); }
  // The time `bytes` take at `bytes_per_s`, rounded up to a whole picosecond so that a transfer
  // never completes before its last byte could have arrived.
  [[nodiscard]] static SimTime transfer(double bytes, double bytes_per_s) {
    return SimTime(static_cast<std::int64_t>(std::ceil(bytes / bytes_per_s * 1e12 - 1e-6)));
  }
  [[nodiscard]] static constexpr SimTime max() { return SimTime(std::numeric_limits<std::int64_t>::max()); }

  [[nodiscard]] constexpr std::int64_t count_ps() const { return ps_; }
  [[nodiscard]] double to_us() const { return static_cast<double>(ps_) * 1e-6; }
  [[nodiscard]] double to_s() const { return static_cast<double>(ps_) * 1e-12; }

  constexpr SimTime& operator+=(SimTime o) { ps_ += o.ps_; return *this; }
  constexpr SimTime& operator-=(SimTime o) { ps_ -= o.ps_; return *this; }
  friend constexpr SimTime operator+(SimTime a, SimTime b) { return SimTime(a.ps_ + b.ps_); }
  friend constexpr SimTime operator-(SimTime a, SimTime b) { return SimTime(a.ps_ - b.ps_); }
  friend constexpr auto operator<=>(SimTime, SimTime) = default;

 private:
  constexpr explicit SimTime(std::int64_t v) : ps_(v) {}
  std::int64_t ps_ = 0;
};

}  // namespace dionsim::sim
