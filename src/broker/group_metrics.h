// The consumer-group series (consumer-groups.md §7), registered once per broker and shared by
// every shard's StreamGroups. Counters and gauges are atomic: any thread.
#pragma once

#include "common/metrics.h"

namespace felix::broker {

struct GroupMetrics {
  explicit GroupMetrics(MetricsRegistry& r)
      : inflight(r.AddGauge("felix_group_inflight",
                            "records handed out by consumer groups and not yet settled")),
        redeliveries(r.AddCounter("felix_group_redeliveries_total",
                                  "group records handed out again (attempt > 1)")),
        dead_letters(r.AddCounter("felix_group_dead_letters_total",
                                  "group records dead-lettered (attempt bound or explicit)")),
        polls_capped(r.AddCounter("felix_group_polls_capped_total",
                                  "group polls answered empty at the in-flight cap")),
        polls_waited(r.AddCounter("felix_group_polls_waited_total",
                                  "group polls that found nothing and waited (wait_ms)")),
        cursor_writes(
            r.AddCounter("felix_group_cursor_writes_total", "group cursor records appended")),
        acks_sharing_cursor_write(
            r.AddCounter("felix_group_acks_sharing_cursor_write_total",
                         "acks answered by a cursor record written after them for several "
                         "acks (none of their own: their group had writes in flight)")) {}

  Gauge& inflight;
  Counter& redeliveries;
  Counter& dead_letters;
  Counter& polls_capped;
  Counter& polls_waited;
  Counter& cursor_writes;
  Counter& acks_sharing_cursor_write;
};

}  // namespace felix::broker
