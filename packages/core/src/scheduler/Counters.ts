/**
 * What a running scheduler counts, shared by its cycles (the numbers `Scheduler.Running.metrics`
 * reports; the exported Prometheus series are `FleetMetrics.scheduler`).
 */

/** The counters, written in place by the scheduling and binding cycles. */
export interface Counts {
  /** Scheduling cycles run (one per pod popped from the queue). */
  attempts: number
  /** Pods bound. */
  scheduled: number
  /** Cycles that found no node. */
  unschedulable: number
  /** Cycles or bindings that failed (retried with backoff). */
  errors: number
  /** Preemptions started (victims evicted, node nominated). */
  preemptions: number
  /** Binding cycles running. */
  inFlight: number
}

/** Counters at zero. */
export const make = (): Counts => ({ attempts: 0, scheduled: 0, unschedulable: 0, errors: 0, preemptions: 0, inFlight: 0 })
