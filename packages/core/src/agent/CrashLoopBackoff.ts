/**
 * The kubelet's crash-loop backoff (its `flowcontrol.Backoff` with 10 s initial and 300 s maximum
 * delay), as pure functions over one entry per container. A container that exits and should be
 * restarted is restarted at once the first time; each later restart waits `delay` after the
 * container finished, the delay doubling up to 5 minutes; an entry not touched for twice the
 * maximum (10 minutes, i.e. the container ran that long before failing again) starts over.
 */

/** The delay before a container's next restart and when the entry last moved. */
export interface Entry {
  readonly delayMs: number
  readonly lastUpdateMs: number
}

/** The first delay (10 s). */
export const initialDelayMs = 10_000

/** The longest delay (5 min). */
export const maxDelayMs = 300_000

// hasExpired: the entry is older than twice the maximum at the time of the event.
const expired = (entry: Entry, eventMs: number) => eventMs - entry.lastUpdateMs > 2 * maxDelayMs

/**
 * Milliseconds the container must still wait before its restart, given that it finished at
 * `finishedAtMs` (0: restart now). The kubelet's `IsInBackOffSince`.
 */
export const remaining = (entry: Entry | undefined, finishedAtMs: number, nowMs: number): number => {
  if (entry === undefined || expired(entry, finishedAtMs)) return 0
  return Math.max(0, finishedAtMs + entry.delayMs - nowMs)
}

/** The entry after a restart at `nowMs` of a container that finished at `finishedAtMs` (the kubelet's `Next`). */
export const next = (entry: Entry | undefined, finishedAtMs: number, nowMs: number): Entry =>
  entry === undefined || expired(entry, finishedAtMs)
    ? { delayMs: initialDelayMs, lastUpdateMs: nowMs }
    : { delayMs: Math.min(entry.delayMs * 2, maxDelayMs), lastUpdateMs: nowMs }

/** The kubelet's waiting message, e.g. `back-off 20s restarting failed container=app pod=web_default(uid)`. */
export const message = (entry: Entry, container: string, pod: { readonly name: string; readonly namespace: string; readonly uid: string }): string =>
  `back-off ${goDuration(entry.delayMs)} restarting failed container=${container} pod=${pod.name}_${pod.namespace}(${pod.uid})`

/** A duration as Go's `time.Duration.String` prints whole seconds and minutes (`10s`, `1m20s`, `5m0s`). */
export const goDuration = (ms: number): string => {
  const s = Math.round(ms / 1000)
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  return m < 60 ? `${m}m${s % 60}s` : `${Math.floor(m / 60)}h${m % 60}m${s % 60}s`
}
