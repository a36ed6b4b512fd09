#pragma once
// A progress bar on stderr: drawn only when stderr is a terminal and not --quiet, redrawn at most
// ten times a second, erased when done. Stdout stays pure data (STYLE.md point 9).
#include <chrono>
#include <cstdint>
#include <string>

namespace dionsim {

class ProgressBar {
 public:
  ProgressBar(std::string label, std::int64_t total, bool quiet);
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  ~ProgressBar();

  void advance(std::int64_t by = 1);
  // Text shown after the count (what is being worked on now, e.g. "world 1024 c 1.38"); redrawn now.
  void set_detail(std::string detail);
  void finish();
  [[nodiscard]] bool visible() const noexcept { return visible_; }

 private:
  void draw();

  std::string label_;
  std::string detail_;
  std::int64_t total_;
  std::int64_t done_ = 0;
  bool visible_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace dionsim
