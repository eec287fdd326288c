#include "common/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace felix {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::Observe(double value) {
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  if (value > 0) {
    sum_micros_.fetch_add(static_cast<uint64_t>(std::llround(value * 1e6)),
                          std::memory_order_relaxed);
  }
}

double Histogram::Sum() const {
  return static_cast<double>(sum_micros_.load(std::memory_order_relaxed)) / 1e6;
}

std::vector<double> LatencyBucketsSeconds() {
  return {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
          0.01,    0.025,    0.05,    0.1,    0.25,    0.5,    1.0,   2.5,    10.0};
}

std::string MetricsRegistry::IndexKey(Type type, std::string_view name, std::string_view labels) {
  std::string key;
  key.reserve(name.size() + labels.size() + 2);
  key.push_back(static_cast<char>('0' + static_cast<int>(type)));
  key.append(name);
  key.push_back('{');  // never part of a metric name, so name/labels split unambiguously
  key.append(labels);
  return key;
}

MetricsRegistry::Series* MetricsRegistry::Find(Type type, std::string_view name,
                                               std::string_view labels) {
  auto it = index_.find(IndexKey(type, name, labels));
  return it == index_.end() ? nullptr : it->second;
}

void MetricsRegistry::Insert(std::unique_ptr<Series> series) {
  index_.emplace(IndexKey(series->type, series->name, series->labels), series.get());
  series_.push_back(std::move(series));
}

Counter& MetricsRegistry::AddCounter(std::string_view name, std::string_view help,
                                     std::string_view labels) {
  std::lock_guard lock(mu_);
  if (Series* s = Find(Type::kCounter, name, labels)) return *s->counter;
  auto s = std::make_unique<Series>(Series{Type::kCounter, std::string(name), std::string(help),
                                           std::string(labels), std::make_unique<Counter>(),
                                           nullptr, nullptr});
  Counter& c = *s->counter;
  Insert(std::move(s));
  return c;
}

Gauge& MetricsRegistry::AddGauge(std::string_view name, std::string_view help,
                                 std::string_view labels) {
  std::lock_guard lock(mu_);
  if (Series* s = Find(Type::kGauge, name, labels)) return *s->gauge;
  auto s = std::make_unique<Series>(Series{Type::kGauge, std::string(name), std::string(help),
                                           std::string(labels), nullptr, std::make_unique<Gauge>(),
                                           nullptr});
  Gauge& g = *s->gauge;
  Insert(std::move(s));
  return g;
}

Histogram& MetricsRegistry::AddHistogram(std::string_view name, std::string_view help,
                                         std::vector<double> upper_bounds,
                                         std::string_view labels) {
  std::lock_guard lock(mu_);
  if (Series* s = Find(Type::kHistogram, name, labels)) return *s->histogram;
  auto s = std::make_unique<Series>(Series{Type::kHistogram, std::string(name), std::string(help),
                                           std::string(labels), nullptr, nullptr,
                                           std::make_unique<Histogram>(std::move(upper_bounds))});
  Histogram& h = *s->histogram;
  Insert(std::move(s));
  return h;
}

namespace {

std::string WithLabels(const std::string& name, const std::string& labels,
                       const std::string& extra = {}) {
  std::string all = labels;
  if (!extra.empty()) all = all.empty() ? extra : all + "," + extra;
  return all.empty() ? name : name + "{" + all + "}";
}

}  // namespace

std::string MetricsRegistry::RenderPrometheus() const {
  std::lock_guard lock(mu_);
  // Group series of one name under one HELP/TYPE header, in name order.
  std::map<std::string, std::vector<const Series*>> by_name;
  for (const auto& s : series_) by_name[s->name].push_back(s.get());
  std::string out;
  for (const auto& [name, list] : by_name) {
    const Series* first = list.front();
    const char* type = first->type == Type::kCounter ? "counter"
                       : first->type == Type::kGauge ? "gauge"
                                                     : "histogram";
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, first->help, name, type);
    for (const Series* s : list) {
      switch (s->type) {
        case Type::kCounter:
          out += fmt::format("{} {}\n", WithLabels(name, s->labels), s->counter->Value());
          break;
        case Type::kGauge:
          out += fmt::format("{} {}\n", WithLabels(name, s->labels), s->gauge->Value());
          break;
        case Type::kHistogram: {
          const Histogram& h = *s->histogram;
          uint64_t cumulative = 0;
          for (size_t i = 0; i < h.bounds().size(); ++i) {
            cumulative += h.BucketCount(i);
            out += fmt::format(
                "{} {}\n",
                WithLabels(name + "_bucket", s->labels, fmt::format("le=\"{}\"", h.bounds()[i])),
                cumulative);
          }
          cumulative += h.BucketCount(h.bounds().size());
          out += fmt::format("{} {}\n", WithLabels(name + "_bucket", s->labels, "le=\"+Inf\""),
                             cumulative);
          out += fmt::format("{} {}\n", WithLabels(name + "_sum", s->labels), h.Sum());
          out += fmt::format("{} {}\n", WithLabels(name + "_count", s->labels), h.Count());
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace felix
