#include "common/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace dionsim {

ProgressBar::ProgressBar(std::string label, std::int64_t total, bool quiet)
    : label_(std::move(label)), total_(std::max<std::int64_t>(total, 1)), visible_(!quiet && isatty(STDERR_FILENO) != 0) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::advance(std::int64_t by) {
  done_ = std::min(total_, done_ + by);
  const auto now = std::chrono::steady_clock::now();
  if (visible_ && (now - last_draw_ > std::chrono::milliseconds(100) || done_ == total_)) {
    last_draw_ = now;
    draw();
  }
}

void ProgressBar::set_detail(std::string detail) {
  detail_ = std::move(detail);
  if (visible_ && !finished_) draw();
}

void ProgressBar::draw() {
  constexpr int width = 30;
  const auto filled = static_cast<int>(width * done_ / total_);
  // \033[K: a shorter detail than the last one leaves nothing of it behind.
  std::fprintf(stderr, "\r%s [%.*s%*s] %lld/%lld%s%s\033[K", label_.c_str(), filled, "==============================",
               width - filled, "", static_cast<long long>(done_), static_cast<long long>(total_),
               detail_.empty() ? "" : "  ", detail_.c_str());
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (visible_ && !finished_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  finished_ = true;
}

}  // namespace dionsim
