/**
 * A pending pod's record in the scheduling queue: the pod as last seen with its attempt history
 * (`QueuedPodInfo`), where it waits, and the bookkeeping each part of the queue keeps on it. One
 * record per pod moves between activeQ, backoffQ and the unschedulable pods, never copied.
 */
import type { QueuedPodInfo } from "../Framework.js"
import type { Indexed } from "./Heap.js"

/** Where a pod waits: activeQ, backoffQ, the unschedulable pods, or in a scheduling cycle. */
export type Place = "active" | "backoff" | "unschedulable" | "inFlight"

/** A pod's record in the queue. */
export interface Entry extends Indexed {
  info: QueuedPodInfo
  place: Place
  /** Position in the heap it is in (activeQ or backoffQ). */
  index: number
  backoffUntil: number
  /** In flight: the first event of the in-flight log this attempt has not seen yet. */
  eventsFrom: number
  /** In flight: the pod was updated meanwhile (the update may have fixed it). */
  updated: boolean
  gated: boolean
}

/** A record for `info`, in no heap yet. */
export const make = (info: QueuedPodInfo, place: Place, gated: boolean, eventsFrom = 0): Entry => ({
  info,
  place,
  index: -1,
  backoffUntil: 0,
  eventsFrom,
  updated: false,
  gated
})
