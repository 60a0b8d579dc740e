/**
 * PrioritySort: the QueueSort plugin that orders the active queue, as upstream kube-scheduler's
 * `queuesort.PrioritySort` — higher `spec.priority` first, then the pod queued earlier (its
 * queue timestamp) first, so equal-priority pods are served in arrival order. No arguments.
 */
import type { Factory, QueuedPodInfo, QueueSortPlugin } from "../Framework.js"

/** The plugin's name in profiles and the registry. */
export const name = "PrioritySort"

/** Whether `a` goes before `b`: higher priority, or equal priority and queued earlier. */
export const less = (a: QueuedPodInfo, b: QueuedPodInfo): boolean => {
  const pa = a.pod.priority
  const pb = b.pod.priority
  return pa > pb || (pa === pb && a.timestampMs < b.timestampMs)
}

/** The plugin. */
export const make = (): QueueSortPlugin => ({ name, less })

/** Builds the plugin (it takes no arguments; any given are ignored, as upstream). */
export const factory: Factory = () => make()
