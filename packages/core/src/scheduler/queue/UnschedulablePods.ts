/**
 * The unschedulable pods (upstream's `unschedulablePods`): parked with the set of plugins that
 * rejected them, indexed by plugin so a cluster event finds the pods it may help without scanning
 * all of them. Only pods parked longer than the limit (upstream's podMaxInUnschedulablePodsDuration,
 * 5 min) leave on a timer, in case they missed their event; gated pods never do.
 */
import type { Timer } from "../../informer/WorkQueue.js"
import type { Entry } from "./QueueEntry.js"

/** The index key of pods rejected by no plugin (errors): any event may help them. */
export const anyPlugin = "\u0000any"

const keysOf = (e: Entry): Iterable<string> => (e.info.unschedulablePlugins.size === 0 ? [anyPlugin] : e.info.unschedulablePlugins)

/** The parked pods and their leftover-flush timer. */
export class UnschedulablePods {
  // In the order they were parked (oldest first), and indexed by rejecting plugin.
  private readonly parked = new Map<string, Entry>()
  private readonly byPlugin = new Map<string, Set<Entry>>()
  private armed: { readonly at: number; readonly cancel: () => void } | undefined
  private closed = false

  /** `due` receives each pod parked longer than `maxParkedMs`. */
  constructor(
    private readonly maxParkedMs: number,
    private readonly timer: Timer,
    private readonly now: () => number,
    private readonly due: (e: Entry) => void
  ) {}

  /** Pods parked. */
  get size(): number {
    return this.parked.size
  }

  /** Park `e` under the plugins that rejected it. */
  park(e: Entry): void {
    e.place = "unschedulable"
    this.parked.set(e.info.pod.uid, e)
    for (const p of keysOf(e)) {
      let s = this.byPlugin.get(p)
      if (s === undefined) this.byPlugin.set(p, (s = new Set()))
      s.add(e)
    }
    this.arm()
  }

  /** Take `e` out (its timer, if it was the oldest, is re-armed by the next `arm`). */
  unpark(e: Entry): void {
    this.parked.delete(e.info.pod.uid)
    for (const p of keysOf(e)) {
      const s = this.byPlugin.get(p)
      s?.delete(e)
      if (s !== undefined && s.size === 0) this.byPlugin.delete(p)
    }
  }

  /** The ungated pods parked by a plugin `interested` answers true for, each once. */
  movable(interested: (plugin: string) => boolean): Set<Entry> {
    const moving = new Set<Entry>()
    for (const [plugin, es] of this.byPlugin) {
      if (!interested(plugin)) continue
      for (const e of es) if (!e.gated) moving.add(e)
    }
    return moving
  }

  /** Hand every ungated pod parked too long to `due`, then re-arm (upstream's flushUnschedulablePodsLeftover). */
  flush(): void {
    const t = this.now()
    const due: Array<Entry> = []
    for (const e of this.parked.values()) {
      if (e.gated) continue
      if (e.info.timestampMs + this.maxParkedMs > t) break
      due.push(e)
    }
    for (const e of due) {
      this.unpark(e)
      this.due(e)
    }
    this.arm()
  }

  /** (Re-)arm the timer for the oldest ungated pod. */
  arm(): void {
    if (this.closed) return
    let oldest: Entry | undefined
    for (const e of this.parked.values()) {
      if (e.gated) continue
      oldest = e
      break
    }
    if (oldest === undefined) {
      this.armed?.cancel()
      this.armed = undefined
      return
    }
    const at = oldest.info.timestampMs + this.maxParkedMs
    if (this.armed !== undefined && this.armed.at <= at) return
    this.armed?.cancel()
    this.armed = {
      at,
      cancel: this.timer(Math.max(0, at - this.now()), () => {
        this.armed = undefined
        this.flush()
      })
    }
  }

  /** Stop the timer for good. */
  close(): void {
    this.closed = true
    this.armed?.cancel()
    this.armed = undefined
  }
}
