/**
 * The runtime relist (the kubelet's PLEG): every second the runtime's containers are listed, and
 * a container that appeared, changed state or went queues its pod for a sync. A sync notes what
 * it saw, so the next relist does not queue the pod again for its own changes.
 */
import { Effect } from "effect"
import type * as Runtime from "../runtime/Runtime.js"
import * as ContainerIdentity from "./ContainerIdentity.js"

/** What the relist saw: container id → `uid|state|exit code`, and the pods that had containers. */
export interface State {
  readonly seen: Map<string, string>
  uids: Set<string>
  /** The runtime was listed once. */
  done: boolean
}

/** A relist of one runtime. */
export interface Relist {
  readonly state: State
  /** List the runtime and queue the pods whose containers changed (a runtime error skips a round). */
  readonly relist: Effect.Effect<void>
  /** A sync saw `raw` for pod `uid`. */
  readonly noteSeen: (uid: string, raw: ReadonlyArray<Runtime.Container>) => void
  /** Whether the last relist saw a container of `uid`. */
  readonly hasContainers: (uid: string) => boolean
}

/** What the relist compares between rounds. */
export const signature = (uid: string, c: Runtime.Container): string => `${uid}|${c.status.state}|${c.status.exitCode ?? ""}`

/** A relist of `runtime` that queues pods with `enqueue`. */
export const make = (runtime: Runtime.RuntimeService, enqueue: (uid: string) => void, state: State = { seen: new Map(), uids: new Set(), done: false }): Relist => ({
  state,
  relist: Effect.gen(function* () {
    const list = yield* Effect.either(runtime.containers.list())
    if (list._tag === "Left") return
    const { seen } = state
    const now = new Set<string>()
    const uids = new Set<string>()
    for (const c of list.right) {
      const uid = ContainerIdentity.podUidOf(c)
      if (uid === undefined) continue
      now.add(c.id)
      uids.add(uid)
      const sig = signature(uid, c)
      if (seen.get(c.id) !== sig) {
        seen.set(c.id, sig)
        enqueue(uid)
      }
    }
    for (const [id, sig] of seen) {
      if (now.has(id)) continue
      seen.delete(id)
      enqueue(sig.slice(0, sig.indexOf("|")))
    }
    state.uids = uids
    state.done = true
  }),
  noteSeen: (uid, raw) => {
    for (const c of raw) state.seen.set(c.id, signature(uid, c))
    if (raw.length > 0) state.uids.add(uid)
  },
  hasContainers: (uid) => state.uids.has(uid)
})
