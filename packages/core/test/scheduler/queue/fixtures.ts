/** Shared fixtures of the queue part tests: queue records and a clock driven by hand. */
import type { Timer } from "../../../src/informer/WorkQueue.js"
import * as QueueEntry from "../../../src/scheduler/queue/QueueEntry.js"
import type { PodInfo } from "../../../src/scheduler/Snapshot.js"

/** A pending pod as the queue reads it. */
export const podInfo = (name: string, priority = 0, status: Record<string, unknown> = {}): PodInfo => ({
  pod: { apiVersion: "v1", kind: "Pod", metadata: { name, namespace: "default", uid: `uid-${name}` }, spec: { containers: [] }, status },
  namespace: "default",
  name,
  uid: `uid-${name}`,
  labels: {},
  requests: { milliCpu: 0, memory: 0, ephemeralStorage: 0, pods: 1, scalar: {} },
  priority,
  nodeName: undefined
})

/** A queue record of `name`, queued at `timestampMs`, rejected by `plugins`. */
export const entry = (name: string, timestampMs = 0, plugins: ReadonlyArray<string> = [], priority = 0): QueueEntry.Entry =>
  QueueEntry.make({ pod: podInfo(name, priority), initialAttemptMs: timestampMs, timestampMs, attempts: 1, unschedulablePlugins: new Set(plugins) }, "active", false)

/** A clock and timer driven by hand. */
export const manual = () => {
  let now = 0
  const timers: Array<{ at: number; run: () => void; live: boolean }> = []
  const timer: Timer = (ms, run) => {
    const t = { at: now + ms, run, live: true }
    timers.push(t)
    return () => void (t.live = false)
  }
  const advance = (ms: number) => {
    const end = now + ms
    for (;;) {
      const due = timers.filter((t) => t.live && t.at <= end).sort((a, b) => a.at - b.at)[0]
      if (due === undefined) break
      now = Math.max(now, due.at)
      due.live = false
      due.run()
    }
    now = end
  }
  return { now: () => now, timer, advance, live: () => timers.filter((t) => t.live).length }
}
