#include "kernels/device.hpp"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/check.cuh"

namespace dionsim::kernels {

namespace {
thread_local int g_error_rank = -1;
}

void set_error_rank(int rank) { g_error_rank = rank; }
int error_rank() { return g_error_rank; }

namespace detail {
void throw_device_error(const char* call, const std::string& status, const char* op, const char* file, int line) {
  std::string where = std::string(file);
  if (auto slash = where.rfind('/'); slash != std::string::npos) where = where.substr(slash + 1);
  throw DeviceError(std::string(call) + " failed on rank " + std::to_string(g_error_rank) + " during '" + op +
                    "': " + status + " (" + where + ":" + std::to_string(line) + ")");
}
}  // namespace detail

std::vector<DeviceInfo> list_devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no device: clear the sticky-free error, report none
    return {};
  }
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    DIONSIM_CUDA_CHECK(cudaGetDeviceProperties(&p, i), "device discovery");
    out.push_back({i, p.name, p.major, p.minor, p.multiProcessorCount, p.totalGlobalMem});
  }
  return out;
}

std::vector<DeviceInfo> require_devices(int count) {
  auto devices = list_devices();
  if (static_cast<int>(devices.size()) < count) {
    throw NoDeviceError("no CUDA device: need " + std::to_string(count) + " GPU(s), found " +
                        std::to_string(devices.size()) + " (CUDA_VISIBLE_DEVICES='" +
                        (std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES") : "") + "')");
  }
  return devices;
}

void set_device(int device) { DIONSIM_CUDA_CHECK(cudaSetDevice(device), "set device"); }

StreamHandle create_stream() {
  cudaStream_t s = nullptr;
  DIONSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "create stream");
  return s;
}
StreamHandle create_stream(int priority) {
  if (priority == 0) return create_stream();
  int least = 0, greatest = 0;
  DIONSIM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest), "stream priority range");
  cudaStream_t s = nullptr;
  DIONSIM_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority > 0 ? greatest : least),
                     "create stream (priority)");
  return s;
}
void destroy_stream(StreamHandle s) {
  if (s != nullptr) (void)cudaStreamDestroy(detail::stream(s));
}
void synchronize(StreamHandle s) { DIONSIM_CUDA_CHECK(cudaStreamSynchronize(detail::stream(s)), "stream synchronize"); }
void device_synchronize() { DIONSIM_CUDA_CHECK(cudaDeviceSynchronize(), "device synchronize"); }

void* device_alloc(std::size_t bytes, const char* what) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  DIONSIM_CUDA_CHECK(cudaMalloc(&p, bytes), what);
  return p;
}
void device_free(void* p) noexcept {
  if (p != nullptr) (void)cudaFree(p);
}
void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes) DIONSIM_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy to device");
}
void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes) DIONSIM_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy to host");
}
void memset_device(void* dst, int value, std::size_t bytes, StreamHandle s) {
  if (bytes) DIONSIM_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, detail::stream(s)), "memset");
}
void copy_device(void* dst, const void* src, std::size_t bytes, StreamHandle s) {
  if (bytes) DIONSIM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, detail::stream(s)), "copy device");
}

EventTimer::EventTimer() {
  cudaEvent_t a = nullptr, b = nullptr;
  DIONSIM_CUDA_CHECK(cudaEventCreate(&a), "event timer");
  DIONSIM_CUDA_CHECK(cudaEventCreate(&b), "event timer");
  start_ = a;
  stop_ = b;
}
EventTimer::~EventTimer() {
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}
void EventTimer::start(StreamHandle s) { DIONSIM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(start_), detail::stream(s)), "event record"); }
void EventTimer::stop(StreamHandle s) { DIONSIM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(stop_), detail::stream(s)), "event record"); }
float EventTimer::elapsed_ms() const {
  DIONSIM_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)), "event synchronize");
  float ms = 0;
  DIONSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)), "event elapsed");
  return ms;
}

Event::Event() {
  cudaEvent_t e = nullptr;
  DIONSIM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
  event_ = e;
}
Event::~Event() { (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_)); }
void Event::record(StreamHandle s) { DIONSIM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), detail::stream(s)), "event record"); }
void Event::wait(StreamHandle s) const {
  DIONSIM_CUDA_CHECK(cudaStreamWaitEvent(detail::stream(s), static_cast<cudaEvent_t>(event_), 0), "stream wait");
}

TimingEvent::TimingEvent() {
  cudaEvent_t e = nullptr;
  DIONSIM_CUDA_CHECK(cudaEventCreate(&e), "timing event");
  event_ = e;
}
TimingEvent::~TimingEvent() { (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_)); }
void TimingEvent::record(StreamHandle s) {
  DIONSIM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), detail::stream(s)), "timing event record");
}
float TimingEvent::ms_since(const TimingEvent& earlier) const {
  DIONSIM_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "timing event synchronize");
  float ms = 0;
  DIONSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(earlier.event_), static_cast<cudaEvent_t>(event_)), "timing event elapsed");
  return ms;
}

StreamGraph::~StreamGraph() { reset(); }
void StreamGraph::reset() noexcept {
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  exec_ = graph_ = nullptr;
  nodes_ = 0;
}
void StreamGraph::begin_capture(StreamHandle s) {
  reset();
  DIONSIM_CUDA_CHECK(cudaStreamBeginCapture(detail::stream(s), cudaStreamCaptureModeThreadLocal), "graph capture begin");
}
void StreamGraph::end_capture(StreamHandle s) {
  cudaGraph_t g = nullptr;
  DIONSIM_CUDA_CHECK(cudaStreamEndCapture(detail::stream(s), &g), "graph capture end");
  graph_ = g;
  DIONSIM_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &nodes_), "graph nodes");
  cudaGraphExec_t e = nullptr;
  DIONSIM_CUDA_CHECK(cudaGraphInstantiate(&e, g, 0), "graph instantiate");
  exec_ = e;
}
void StreamGraph::launch(StreamHandle s) const {
  if (exec_ == nullptr) throw std::logic_error("StreamGraph::launch: nothing captured");
  DIONSIM_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), detail::stream(s)), "graph launch");
}

}  // namespace dionsim::kernels
