/**
 * The pod status a simulated kubelet reports, as pure builders: container statuses (running,
 * terminated, with the last termination after a restart), the pod's conditions, and conditions
 * keeping their `lastTransitionTime` while their status holds.
 */
import type { JsonObject } from "../../object/Json.js"
import { uidOf } from "../../object/Metadata.js"
import * as Pods from "../../object/Pods.js"
import * as Views from "../../object/Views.js"

/** How a container's run ended. */
export interface Termination {
  readonly exitCode: number
  readonly startedAt: string
  readonly finishedAt: string
}

/** The `terminated` state of a container after `termination`. */
export const terminated = (t: Termination): JsonObject => ({
  exitCode: t.exitCode,
  reason: t.exitCode === 0 ? "Completed" : "Error",
  startedAt: t.startedAt,
  finishedAt: t.finishedAt
})

/** The statuses of the pod's containers, alike: running since `startedAt`, or ended by `ended`. */
export const containerStatuses = (
  pod: JsonObject,
  running: boolean,
  ready: boolean,
  restarts: number,
  startedAt: string,
  ended?: { readonly exitCode: number; readonly at: string }
): ReadonlyArray<JsonObject> =>
  Views.pod(pod).spec.containers.map((c) => ({
    name: c.name,
    image: c.image,
    imageID: `sim://${String(c.image)}`,
    containerID: `sim://${uidOf(pod)}/${c.name}`,
    ready: running && ready,
    started: running,
    restartCount: restarts,
    state: ended
      ? { terminated: terminated({ exitCode: ended.exitCode, startedAt, finishedAt: ended.at }) }
      : { running: { startedAt } }
  }))

/** The conditions of a scheduled, initialised pod, ready or not, as of `now`. */
const podConditions = (ready: boolean, now: string): ReadonlyArray<JsonObject> => [
  { type: "PodReadyToStartContainers", status: "True", lastTransitionTime: now },
  { type: "Initialized", status: "True", lastTransitionTime: now },
  { type: "ContainersReady", status: ready ? "True" : "False", lastTransitionTime: now },
  { type: "Ready", status: ready ? "True" : "False", lastTransitionTime: now },
  { type: "PodScheduled", status: "True", lastTransitionTime: now }
]

/** `list` with each condition keeping the pod's `lastTransitionTime` where its status did not change. */
const keepTransition = (pod: JsonObject, list: ReadonlyArray<JsonObject>): ReadonlyArray<JsonObject> =>
  list.map((c) => {
    const old = Pods.condition(pod, String(c["type"]))
    return old !== undefined && old["status"] === c["status"] && old["lastTransitionTime"] !== undefined
      ? { ...c, lastTransitionTime: old["lastTransitionTime"] }
      : c
  })

/** The pod's conditions, ready or not, keeping unchanged transitions. */
export const conditionsOf = (pod: JsonObject, ready: boolean, now: string): ReadonlyArray<JsonObject> =>
  keepTransition(pod, podConditions(ready, now))
