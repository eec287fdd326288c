// ChangeRecorder: an EtcdCatalog listener that records every CatalogChange as a short line
// ("+tenant t", "-stream t/ns/s", ...) and lets a test wait, with a deadline, for a line.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "catalog/catalog.h"

namespace felix::cluster::testing {

inline std::string Describe(const catalog::CatalogChange& c) {
  std::string sign = c.op == catalog::CatalogChange::Op::kCreated ? "+" : "-";
  return std::visit(
      [&](const auto& e) -> std::string {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, catalog::Tenant>) {
          return sign + "tenant " + e.tenant_id;
        } else if constexpr (std::is_same_v<T, catalog::Namespace>) {
          return sign + "namespace " + e.tenant_id + "/" + e.name;
        } else if constexpr (std::is_same_v<T, catalog::Stream>) {
          return sign + "stream " + e.tenant_id + "/" + e.namespace_name + "/" + e.name;
        } else {
          return sign + "cache " + e.tenant_id + "/" + e.namespace_name + "/" + e.name;
        }
      },
      c.entity);
}

class ChangeRecorder {
 public:
  catalog::Catalog::Listener Listener() {
    return [this](const catalog::CatalogChange& c) {
      {
        std::lock_guard lock(mu_);
        lines_.push_back(Describe(c));
      }
      cv_.notify_all();
    };
  }
  bool WaitFor(const std::string& line,
               std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      return std::find(lines_.begin(), lines_.end(), line) != lines_.end();
    });
  }
  std::vector<std::string> Lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  void Clear() {
    std::lock_guard lock(mu_);
    lines_.clear();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

}  // namespace felix::cluster::testing
