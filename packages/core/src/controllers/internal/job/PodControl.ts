/**
 * The Job controller's writes to pods (upstream's PodControl and manageJob's slow start):
 * deletions, uncounted ones losing the tracking finalizer first; creations in batches of 1, 2,
 * 4, …; and the removal of the tracking finalizer with a JSON patch that fails if the list
 * changed meanwhile. A pod already gone is not an error.
 */
import { Effect } from "effect"
import type * as Client from "../../../client/Client.js"
import type * as Controller from "../../Controller.js"
import type { JsonObject } from "../../../object/Json.js"
import { finalizersOf, nameOf, namespaceOrUndefined, uidOf } from "../../../object/Metadata.js"
import * as ResourceRefs from "../../../object/ResourceRefs.js"
import * as ReplicaSet from "../../ReplicaSet.js"
import type { PodDeletion } from "./Decision.js"
import { trackingFinalizer } from "./Tracking.js"

const isNotFound = (e: Controller.ReconcileError) => e._tag === "ApiError" && e.status.code === 404

/** `effect` with its value dropped and a 404 (the object is gone) treated as done. */
export const ignoreNotFound = <A>(effect: Effect.Effect<A, Controller.ReconcileError>): Effect.Effect<void, Controller.ReconcileError> =>
  effect.pipe(
    Effect.asVoid,
    Effect.catchIf(isNotFound, () => Effect.void)
  )

/** Removes the tracking finalizer with a JSON patch that fails if the list changed meanwhile. */
export const removeFinalizer = (client: Client.Client, pod: JsonObject): Effect.Effect<void, Controller.ReconcileError> => {
  const i = finalizersOf(pod).indexOf(trackingFinalizer)
  if (i < 0) return Effect.void
  return ignoreNotFound(
    client.patch(ResourceRefs.Pod, namespaceOrUndefined(pod), nameOf(pod), "json", [
      { op: "test", path: `/metadata/uid`, value: uidOf(pod) },
      { op: "test", path: `/metadata/finalizers/${i}`, value: trackingFinalizer },
      { op: "remove", path: `/metadata/finalizers/${i}` }
    ])
  )
}

/** Deletes the pods one by one (the finalizer first where asked), each with a `SuccessfulDelete` event on the Job. */
export const deletePods = (ctx: Controller.Context, job: JsonObject, namespace: string | undefined, deletions: ReadonlyArray<PodDeletion>): Effect.Effect<void, Controller.ReconcileError> =>
  Effect.gen(function* () {
    for (const { pod, removeFinalizer: first } of deletions) {
      if (first) yield* removeFinalizer(ctx.client, pod)
      yield* ignoreNotFound(ctx.client.delete(ResourceRefs.Pod, namespace, nameOf(pod)))
      yield* ctx.events.record(job, "Normal", "SuccessfulDelete", `Deleted pod: ${nameOf(pod)}`)
    }
  })

/**
 * Creates the pods with slow start, as upstream: batches of 1, 2, 4, …; a failed batch skips the
 * rest (a quota or admission refusal would refuse them all). Answers how many were created and
 * the first error, which the caller fails with once the status is tracked.
 */
export const createPods = (
  ctx: Controller.Context,
  job: JsonObject,
  pods: ReadonlyArray<JsonObject>
): Effect.Effect<{ readonly created: number; readonly error: Controller.ReconcileError | undefined }> =>
  Effect.gen(function* () {
    let error: Controller.ReconcileError | undefined
    let created = 0
    for (const size of ReplicaSet.slowStartBatches(pods.length)) {
      const batch = pods.slice(created, created + size)
      const results = yield* Effect.forEach(batch, (pod) => Effect.either(ctx.client.create(pod)), { concurrency: size })
      for (const r of results) {
        if (r._tag === "Right") {
          created++
          yield* ctx.events.record(job, "Normal", "SuccessfulCreate", `Created pod: ${nameOf(r.right)}`)
        } else {
          error ??= r.left
          yield* ctx.events.record(job, "Warning", "FailedCreate", `Error creating: ${r.left.message}`)
        }
      }
      if (error !== undefined) break
    }
    return { created, error }
  })
