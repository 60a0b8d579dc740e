/**
 * The binding cycle of an assumed pod (upstream's bindingCycle), in the background with many in
 * flight (the store's group commit turns them into few transactions): the volumes Reserve chose
 * first, then the Bind plugins. On success the pod leaves the queue and a nomination it had is
 * cleared (upstream ≥ 1.34 clears it in the apiserver's binding). On a lost race (bound
 * elsewhere, a volume taken) or a failure the pod is forgotten by the cache, unreserved, backs off
 * and the failure is reported, to be retried against a fresh snapshot.
 *
 * Volumes: a claim to be provisioned gets the chosen node as `volume.kubernetes.io/selected-node`
 * (the PersistentVolume controller and the provisioner do the rest). Otherwise, after Reserve the
 * runtime writes the binding itself, as upstream's PreBind and the PV controller together would
 * (so claims the PersistentVolume controller leaves to the scheduler are bound; see
 * `VolumeBindingScope`): the volume's
 * `spec.claimRef` (a compare-and-swap on the volume the decision saw), then the claim's
 * `spec.volumeName`, then both `status.phase: Bound`; a failed write releases the volumes claimed
 * so far and the pod backs off. A pod binding that fails after its volumes were bound keeps them
 * bound (as upstream), so the retry goes to the volume's node.
 */
import { Effect, type Scope } from "effect"
import type * as Client from "../client/Client.js"
import type * as Informer from "../informer/Informer.js"
import type { JsonObject } from "../object/Json.js"
import { metadataOf, nameOf, namespaceOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as Views from "../object/Views.js"
import type * as Counters from "./Counters.js"
import type { FailureHandler } from "./FailureHandler.js"
import { type CycleState, type Framework, isSuccess, type QueuedPodInfo, type Status, status, success } from "./Framework.js"
import { nominatedNodeOf } from "./PendingPods.js"
import * as VolumeBinding from "./plugins/VolumeBinding.js"
import type * as Queue from "./Queue.js"
import * as Schedule from "./Schedule.js"
import * as Snapshot from "./Snapshot.js"

/** Bind a pod through the API's `binding` subresource (DefaultBinder's handle); a conflict is Unschedulable. */
export const bindPod = (client: Client.Client) => (pod: JsonObject, node: string): Effect.Effect<Status> => {
  const meta = metadataOf(pod)
  return client
    .createSubresource(ResourceRefs.Pod, namespaceOf(pod), nameOf(pod), "binding", {
      apiVersion: "v1",
      kind: "Binding",
      metadata: { name: meta["name"], namespace: meta["namespace"], uid: meta["uid"] },
      target: { apiVersion: "v1", kind: "Node", name: node }
    })
    .pipe(
      Effect.as(success),
      Effect.catchAll((e) => Effect.succeed(status(e.status.code === 409 ? "Unschedulable" : "Error", e.status.message ?? "binding failed")))
    )
}

/** Undo Reserve (every plugin, in reverse order, as upstream's RunReservePluginsUnreserve). */
export const unreserve = (framework: Framework, state: CycleState, pod: Snapshot.PodInfo, node: string): void => {
  for (let i = framework.reserve.length - 1; i >= 0; i--) framework.reserve[i]!.unreserve(state, pod, node)
}

type ApiFailure = { readonly status: { readonly code?: number; readonly message?: string } }

const volumeFailure = (e: ApiFailure, what: string) =>
  status(e.status.code === 409 ? "Unschedulable" : "Error", `binding volumes: ${what}: ${e.status.message ?? "failed"}`)

/**
 * Write the claim → volume bindings Reserve chose (see the module comment). On a failed write, the
 * volumes claimed so far are released.
 */
export const bindVolumes = (client: Client.Client, volumes: Informer.Informer, claims: Informer.Informer) => (list: ReadonlyArray<VolumeBinding.Binding>): Effect.Effect<Status> =>
  Effect.gen(function* () {
    const claimed: Array<{ readonly volume: string; readonly resourceVersion: unknown }> = []
    const fail = (s: Status) =>
      Effect.as(
        Effect.forEach(
          claimed,
          (c) => Effect.ignore(client.patch(ResourceRefs.PersistentVolume, undefined, c.volume, "merge", { metadata: { resourceVersion: c.resourceVersion }, spec: { claimRef: null } })),
          { discard: true }
        ),
        s
      )
    for (const b of list) {
      if (b.volume === "") {
        // To be provisioned: the node is the provisioner's to know; a claim bound meanwhile ignores it.
        const selected = yield* Effect.either(
          client.patch(ResourceRefs.PersistentVolumeClaim, b.namespace, b.claim, "merge", { metadata: { annotations: { [VolumeBinding.selectedNodeAnnotation]: b.node ?? "" } } })
        )
        if (selected._tag === "Left") return yield* fail(volumeFailure(selected.left, `persistentvolumeclaim "${b.claim}"`))
        continue
      }
      const pv = volumes.get(undefined, b.volume)
      if (pv === undefined) return yield* fail(status("Error", `binding volumes: persistentvolume "${b.volume}" not found`))
      const claimRef = { apiVersion: "v1", kind: "PersistentVolumeClaim", namespace: b.namespace, name: b.claim, uid: b.claimUid }
      const written = yield* Effect.either(
        client.patch(ResourceRefs.PersistentVolume, undefined, b.volume, "merge", { metadata: { resourceVersion: metadataOf(pv)["resourceVersion"] }, spec: { claimRef } })
      )
      if (written._tag === "Left") return yield* fail(volumeFailure(written.left, `persistentvolume "${b.volume}"`))
      claimed.push({ volume: b.volume, resourceVersion: metadataOf(written.right)["resourceVersion"] })
      const pvc = claims.get(b.namespace, b.claim)
      if (pvc === undefined) return yield* fail(status("Error", `binding volumes: persistentvolumeclaim "${b.claim}" not found`))
      const bound = yield* Effect.either(
        client.patch(ResourceRefs.PersistentVolumeClaim, b.namespace, b.claim, "merge", { metadata: { resourceVersion: metadataOf(pvc)["resourceVersion"] }, spec: { volumeName: b.volume } })
      )
      if (bound._tag === "Left") return yield* fail(volumeFailure(bound.left, `persistentvolumeclaim "${b.claim}"`))
      const pvSpec = Views.persistentVolume(pv).spec
      // The phases are reporting only (the scheduler reads claimRef and volumeName): best effort.
      yield* Effect.ignore(client.patch(ResourceRefs.PersistentVolume, undefined, b.volume, "merge", { status: { phase: "Bound" } }, "status"))
      yield* Effect.ignore(
        client.patch(ResourceRefs.PersistentVolumeClaim, b.namespace, b.claim, "merge", { status: { phase: "Bound", accessModes: pvSpec?.accessModes, capacity: pvSpec?.capacity } }, "status")
      )
    }
    return success
  })

/** What a binding cycle works with. */
export interface Deps {
  readonly client: Client.Client
  readonly pods: Informer.Informer
  readonly volumes: Informer.Informer
  readonly claims: Informer.Informer
  readonly queue: Queue.SchedulingQueue
  readonly cache: Snapshot.Cache
  readonly counts: Counters.Counts
  readonly failures: FailureHandler
  /** Bindings in flight at once. */
  readonly concurrency: number
}

/** Starts the binding cycle of an assumed pod; waits only for a free binding slot. */
export type BindingCycle = (framework: Framework, state: CycleState, qpi: QueuedPodInfo, node: string, nominated: boolean) => Effect.Effect<void>

/** The binding cycles of a running scheduler, forked in `scope`. */
export const make = (deps: Deps, scope: Scope.Scope): Effect.Effect<BindingCycle> =>
  Effect.map(Effect.makeSemaphore(deps.concurrency), (slots) => {
    const { client, pods, queue, cache, counts, failures } = deps
    const volumesBound = bindVolumes(client, deps.volumes, deps.claims)

    const run = (framework: Framework, state: CycleState, qpi: QueuedPodInfo, node: string, nominated: boolean) =>
      Effect.gen(function* () {
        const pod = qpi.pod
        const volumeBindings = VolumeBinding.bindings(state)
        let result = volumeBindings.length === 0 ? success : yield* volumesBound(volumeBindings)
        if (isSuccess(result)) {
          result = status("Error", "no Bind plugin")
          for (const b of framework.bind) {
            result = yield* b.bind(state, pod, node)
            if (result.code !== "Skip") break
          }
        }
        if (isSuccess(result)) {
          counts.scheduled++
          queue.done(pod.uid)
          const latest = pods.get(pod.namespace, pod.name)
          if (nominated || (latest !== undefined && nominatedNodeOf(latest) !== "")) yield* failures.clearNomination(pod.namespace, pod.name)
          return
        }
        // Lost a race (bound elsewhere, a volume taken) or failed: undo and retry against a fresh snapshot.
        cache.forget(Snapshot.podKey(pod))
        unreserve(framework, state, pod, node)
        counts.errors++
        queue.addUnschedulable(qpi, [])
        yield* failures.reportFailure(pod, "SchedulerError", `Binding rejected: ${Schedule.statusMessage(result)}`)
      }).pipe(
        Effect.ensuring(
          Effect.zipRight(
            Effect.sync(() => counts.inFlight--),
            slots.release(1)
          )
        )
      )

    return (framework, state, qpi, node, nominated) =>
      Effect.gen(function* () {
        counts.inFlight++
        yield* slots.take(1)
        yield* Effect.forkIn(run(framework, state, qpi, node, nominated), scope)
      })
  })
