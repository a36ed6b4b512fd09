#pragma once
// Template bodies of SimTransport (included by transport.hpp).
#include <stdexcept>

namespace dionsim::opt {

template <class T>
std::vector<std::vector<std::vector<T>>> SimTransport::all_to_all(const std::string& name, std::int64_t group,
                                                                  const std::vector<std::vector<std::vector<T>>>& send) {
  const auto w = static_cast<std::size_t>(world_);
  if (send.size() != w) throw std::logic_error(name + ": send buffers for " + std::to_string(send.size()) + " ranks");
  const std::size_t chunk = send[0].empty() ? 0 : send[0][0].size();
  std::vector<std::vector<std::vector<T>>> recv(w, std::vector<std::vector<T>>(w));
  CollectiveRecord rec{name, CollectiveKind::all_to_all, group, std::vector<std::int64_t>(w, 0),
                       static_cast<std::int64_t>(chunk * sizeof(T))};
  for (std::size_t s = 0; s < w; ++s) {
    if (send[s].size() != w) throw std::logic_error(name + ": rank " + std::to_string(s) + " has no chunk per peer");
    for (std::size_t d = 0; d < w; ++d) {
      if (send[s][d].size() != chunk) throw std::logic_error(name + ": chunk sizes differ (fixed-size all-to-all)");
      recv[d][s] = send[s][d];  // the copy is the message
      rec.bytes_sent[s] += static_cast<std::int64_t>(chunk * sizeof(T));
    }
  }
  records_.push_back(std::move(rec));
  return recv;
}

template <class T>
std::vector<T> SimTransport::all_gather(const std::string& name, std::int64_t group,
                                        const std::vector<std::vector<T>>& inputs) {
  const auto w = static_cast<std::size_t>(world_);
  if (inputs.size() != w) throw std::logic_error(name + ": inputs for " + std::to_string(inputs.size()) + " ranks");
  const std::size_t n = inputs[0].size();
  CollectiveRecord rec{name, CollectiveKind::all_gather, group, std::vector<std::int64_t>(w, 0),
                       static_cast<std::int64_t>(n * sizeof(T))};
  std::vector<T> out;
  out.reserve(n * w);
  for (std::size_t r = 0; r < w; ++r) {
    if (inputs[r].size() != n) throw std::logic_error(name + ": all-gather inputs differ in size");
    out.insert(out.end(), inputs[r].begin(), inputs[r].end());
    rec.bytes_sent[r] = static_cast<std::int64_t>(n * sizeof(T));
  }
  records_.push_back(std::move(rec));
  return out;
}

}  // namespace dionsim::opt
